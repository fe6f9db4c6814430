#pragma once
// A trained model with its tokenizer, loaded from a checkpoint onto a device for sampling or evaluation.
#include <torch/torch.h>

#include <memory>
#include <string>

#include "dataloader/text_codec.h"
#include "model/gpt.h"
#include "trainer/checkpoint.h"

namespace mygpt {

struct InferenceModel {
  Gpt model{nullptr};
  CheckpointMeta meta;
  std::unique_ptr<TextCodec> codec;
};

// path: a checkpoint file or a directory (its newest checkpoint). Reads onto the CPU, then moves.
// vocab_dir, when not empty, supplies GPT-2's vocabulary files (needed for checkpoints trained on
// token data without --vocab, or when the files moved since training).
InferenceModel load_inference_model(const std::string& path, const torch::Device& device,
                                    const std::string& vocab_dir = "");

}  // namespace mygpt
