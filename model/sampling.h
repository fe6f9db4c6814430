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
  // When positive, only ids below it can be drawn: the real vocabulary of a model whose embedding is
  // padded (padded rows score logit 0 and would otherwise be sampled). 0 allows every id.
  int64_t vocab_limit = 0;
};

// logits (..., V) with every id at or above vocab_limit set to -inf, so that softmax, argmax, top-k
// and cross-entropy all behave as if the vocabulary ended there. vocab_limit 0 or V returns logits
// as they are; a limit outside 0..V is std::invalid_argument.
torch::Tensor limit_vocab(const torch::Tensor& logits, int64_t vocab_limit);

// Extends prompt (B, T) int64 by max_new_tokens sampled tokens and returns (B, T + max_new_tokens).
// The context fed to the model is cropped to the last block_size tokens. Randomness comes from the
// default generator of the prompt's device (seeding that device makes the sample reproducible), or
// from `generator` when given, which leaves the default streams (dropout, data) untouched.
// Runs in eval mode without gradients; the model's training flag is restored afterwards.
torch::Tensor generate(Gpt& model, torch::Tensor prompt, const SamplingOptions& options,
                       std::optional<at::Generator> generator = std::nullopt);

}  // namespace mygpt
