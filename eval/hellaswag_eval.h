#pragma once
// HellaSwag scored as build-nanogpt does: each of the four endings is appended to the context, and
// the prediction is the ending with the lowest mean cross-entropy over its own tokens (the
// length-normalized "acc_norm"). Examples are split across ranks and the counts summed.
#include <torch/torch.h>

#include <array>
#include <functional>
#include <vector>

#include "eval/evaluation_rounds.h"
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

// Scores examples [0, limit) (all when limit <= 0); this rank takes every world_size-th one.
// on_example(done, correct), when given, hears of each example this rank scored (for progress lines).
// Examples are scored examples_per_batch at a time: one copy to the device and one wait per batch.
// rounds (eval/evaluation_rounds.h): a stop asked between rounds of batches, and what a rank out of examples
// runs while the others score theirs.
constexpr int64_t kHellaSwagExamplesPerBatch = 8;
HellaSwagResult evaluate_hellaswag(Gpt& model, const std::vector<TokenizedHellaSwag>& examples, int64_t limit,
                                   Communicator& comm, const torch::Device& device, Precision precision,
                                   const std::function<void(int64_t done, int64_t correct)>& on_example = {},
                                   int64_t examples_per_batch = kHellaSwagExamplesPerBatch,
                                   const EvaluationRounds& rounds = {});

}  // namespace mygpt
