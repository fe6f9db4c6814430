#pragma once
// HellaSwag scored as build-nanogpt does: each of the four endings is appended to the context, and
// the prediction is the ending with the lowest mean cross-entropy over its own tokens (the
// length-normalized "acc_norm"). Examples are split across ranks and the counts summed.
#include <torch/torch.h>

#include <array>
#include <functional>
#include <vector>

#include "eval/hellaswag_reader.h"
#include "distributed/communicator.h"
#include "model/gpt.h"
#include "model/mixed_precision.h"

namespace mygpt {

struct HellaSwagResult {
  int64_t correct = 0;
  int64_t total = 0;
  bool stopped = false;  // ended early by a stop all ranks agreed on: the counts are partial
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
};

// Index of the ending with the lowest mean loss, given logits (4, T, V) of the four rows, the rows'
// tokens (4, T) and a mask (4, T) that marks the ending tokens.
int64_t pick_hellaswag_ending(const torch::Tensor& logits, const torch::Tensor& tokens, const torch::Tensor& mask);
// The same choice from next-token losses (4, T-1), column t being the loss of predicting token t+1
// (what Gpt::loss with LossReduction::none gives without holding the (4, T, V) logits), and the same mask (4, T).
int64_t pick_hellaswag_ending_from_losses(const torch::Tensor& next_token_losses, const torch::Tensor& mask);
// The choices of E examples at once: losses (4E, T-1) and mask (4E, T), four rows per example -> (E).
torch::Tensor pick_hellaswag_endings_from_losses(const torch::Tensor& next_token_losses, const torch::Tensor& mask);

// Scores examples [0, limit) (all when limit <= 0); this rank takes every world_size-th one.
// on_example(done, correct), when given, hears of each example this rank scored (for progress lines).
// Examples are scored examples_per_batch at a time: one copy to the device and one wait per batch.
// stop_agreed, when given, is asked after each round of batches (every rank takes part in each round, a
// rank out of examples too: it is a collective) and ends the scoring early when it says so.
constexpr int64_t kHellaSwagExamplesPerBatch = 8;
HellaSwagResult evaluate_hellaswag(Gpt& model, const std::vector<TokenizedHellaSwag>& examples, int64_t limit,
                                   Communicator& comm, const torch::Device& device, Precision precision,
                                   const std::function<void(int64_t done, int64_t correct)>& on_example = {},
                                   int64_t examples_per_batch = kHellaSwagExamplesPerBatch,
                                   const std::function<bool()>& stop_agreed = {});

}  // namespace mygpt
