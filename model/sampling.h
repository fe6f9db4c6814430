#pragma once
// Autoregressive sampling from a trained GPT.
#include <torch/torch.h>

#include <optional>

#include "model/gpt.h"

namespace mygpt {

struct SamplingOptions {
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  // 0 means greedy (always the most likely token)
  int64_t top_k = 0;         // 0 keeps the whole distribution
};

// Extends prompt (B, T) int64 by max_new_tokens sampled tokens and returns (B, T + max_new_tokens).
// The context fed to the model is cropped to the last block_size tokens. Randomness comes from the
// default generator of the prompt's device (seeding that device makes the sample reproducible), or
// from `generator` when given, which leaves the default streams (dropout, data) untouched.
// Runs in eval mode without gradients; the model's training flag is restored afterwards.
torch::Tensor generate(Gpt& model, torch::Tensor prompt, const SamplingOptions& options,
                       std::optional<at::Generator> generator = std::nullopt);

}  // namespace mygpt
