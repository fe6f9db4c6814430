#pragma once
// What the batched scoring loop (eval/choice_scoring.h) takes from an evaluation's reader: one item's
// rows of token ids, each with the span of its tokens that is scored, and the rule that judges the item.
// Rows are as long as the text makes them; the loop crops them to the model's block.
#include <cstdint>
#include <vector>

namespace mygpt {

struct ScoringRow {
  std::vector<int64_t> tokens;
  int64_t begin = 0, end = 0;  // the scored tokens: tokens[begin, end), each predicted from the ones before it
};

enum class ScoringRule {
  lowest_mean_loss,  // right when the row with the lowest mean loss over its span is row `gold`
  greedy_match,      // one row; right when the model's argmax is every token of its span
};

struct ScoringItem {
  std::vector<ScoringRow> rows;
  ScoringRule rule = ScoringRule::lowest_mean_loss;
  int64_t gold = 0;
};

}  // namespace mygpt
