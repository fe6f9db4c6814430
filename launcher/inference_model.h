#pragma once
// A trained model with its tokenizer, loaded from a checkpoint onto a device for sampling or evaluation.
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "trainer/checkpoint.h"

namespace mygpt {

struct InferenceModel {
  Gpt model{nullptr};
  CheckpointMeta meta;
  std::function<std::vector<int64_t>(const std::string&)> encode;
  std::function<std::string(const std::vector<int64_t>&)> decode;
};

// path: a checkpoint file or a directory (its newest checkpoint). Reads onto the CPU, then moves.
InferenceModel load_inference_model(const std::string& path, const torch::Device& device);

}  // namespace mygpt
