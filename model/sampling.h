#pragma once
// Autoregressive sampling from a trained GPT.
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <stdexcept>

#include "model/gpt.h"

namespace mygpt {

struct SamplingOptions {
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  // 0 means greedy (always the most likely token)
  int64_t top_k = 0;         // 0 keeps the whole distribution
  // When positive, only ids below it can be drawn: the real vocabulary of a model whose embedding is
  // padded (padded rows score logit 0 and would otherwise be sampled). 0 allows every id.
  int64_t vocab_limit = 0;
  // Keep the context's attention keys and values (model/kv_cache.h) and compute one new position per
  // token; false re-reads the whole context for every token (the reference the cache is tested against).
  bool kv_cache = true;
  // Below 1: nucleus sampling, the smallest set of most likely ids whose probabilities reach top_p (after
  // temperature and top_k), as transformers' TopPLogitsWarper keeps them; 1 keeps them all.
  double top_p = 1.0;
};

// Logits that are NaN or infinite: weights that diverged (or were stored so) cannot be sampled from.
struct NonFiniteLogits : std::runtime_error {
  NonFiniteLogits() : std::runtime_error("the model produces non-finite logits (NaN or infinite): its weights diverged") {}
};

// Called after each step with the new tokens (B, 1), on the prompt's device: for printing as they come.
using NewTokensCallback = std::function<void(const torch::Tensor& next)>;

// logits (..., V) with every id at or above vocab_limit set to -inf, so that softmax, argmax, top-k
// and cross-entropy all behave as if the vocabulary ended there. vocab_limit 0 or V returns logits
// as they are; a limit outside 0..V is std::invalid_argument.
torch::Tensor limit_vocab(const torch::Tensor& logits, int64_t vocab_limit);

// The next token of each row (B, 1) from its logits (B, vocab) as options' temperature, top_k and top_p say
// (options' other fields are generate's): greedy at temperature 0, else drawn from `generator` (the
// default generator of the logits' device when none).
torch::Tensor sample_next(torch::Tensor logits, const SamplingOptions& options,
                          std::optional<at::Generator> generator = std::nullopt);

// Extends prompt (B, T) int64 by max_new_tokens sampled tokens and returns (B, T + max_new_tokens).
// The B rows are sampled together (one forward pass per step for all of them) and independently.
// The context the model sees is the last block_size tokens, with or without the KV cache: once the
// context passes the block size, each token re-reads the last block (the positions are learned
// embeddings, so keys cached at one position cannot be moved to another), as the uncached path does. Randomness comes from the
// default generator of the prompt's device (seeding that device makes the sample reproducible), or
// from `generator` when given, which leaves the default streams (dropout, data) untouched.
// Runs in eval mode without gradients; the model's training flag is restored afterwards. Throws
// NonFiniteLogits where the model's logits are not finite (rather than sample from NaN).
torch::Tensor generate(Gpt& model, torch::Tensor prompt, const SamplingOptions& options,
                       std::optional<at::Generator> generator = std::nullopt,
                       const NewTokensCallback& on_new_tokens = {});

}  // namespace mygpt
