#pragma once
// The one batched scoring loop of the evaluations that judge items (HellaSwag, CORE): ranks take items by
// stride (rank r scores items r, r + W, ...), each scores its items `items_per_batch` at a time (every row
// of those items in one forward, padded on the right, which a causal model never reads), and the counts
// are summed over ranks, so N ranks give the numbers of one.
//
// A row longer than the model's block is cropped from the left and its span shifted with it (nanochat's
// rule); a span token left with no token before it (the span began at the row's first position, or was
// cropped) cannot be predicted and is left out of the span. Only the span positions reach the output head.
#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "eval/scoring_item.h"
#include "distributed/communicator.h"
#include "eval/evaluation_rounds.h"
#include "model/gpt.h"
#include "model/mixed_precision.h"

namespace mygpt {

struct ScoringPass {
  int64_t correct = 0;
  int64_t total = 0;
  bool stopped = false;  // ended early by a stop all ranks agreed on: the counts are partial
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
};

// What one row's span scored: the mean next-token loss (NaN for an empty span, which then never wins)
// and whether the argmax was every span token.
struct RowScore {
  double mean_loss = 0;
  bool greedy_match = true;
};
// The judgement of an item from its rows' scores: lowest_mean_loss takes the first row with the lowest
// mean (a NaN never wins over an earlier row, as Python's min() over floats), greedy_match its one row.
bool judge_item(const ScoringItem& item, const std::vector<RowScore>& scores);

// Scores items [0, count) of item_at (called only for this rank's items, as they are scored). vocab_limit as
// in Gpt::loss. on_item(done, correct) hears of each item this rank scored; rounds.stop, when given, is asked
// between rounds of batches and ends the pass early; rounds.sit_out stands in for the forward of a rank whose
// items are done while others still score theirs.
ScoringPass score_items(Gpt& model, int64_t count, const std::function<ScoringItem(int64_t)>& item_at,
                        Communicator& comm, const torch::Device& device, Precision precision, int64_t vocab_limit,
                        int64_t items_per_batch, const std::function<void(int64_t done, int64_t correct)>& on_item = {},
                        const EvaluationRounds& rounds = {});

}  // namespace mygpt
