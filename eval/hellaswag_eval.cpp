#include "eval/hellaswag_eval.h"

#include <algorithm>
#include <stdexcept>

#include "eval/choice_scoring.h"
#include "model/mixed_precision.h"

namespace mygpt {

HellaSwagResult evaluate_hellaswag(Gpt& model, const std::vector<TokenizedHellaSwag>& examples, int64_t limit,
                                   Communicator& comm, const torch::Device& device, Precision precision,
                                   const std::function<void(int64_t done, int64_t correct)>& on_example,
                                   int64_t examples_per_batch, const EvaluationRounds& rounds) {
  if (examples_per_batch <= 0) throw std::logic_error("examples_per_batch must be positive");
  const auto n = limit > 0 ? std::min<int64_t>(limit, static_cast<int64_t>(examples.size()))
                           : static_cast<int64_t>(examples.size());
  // Each ending appended to the context, its own tokens the span; the lowest mean loss wins.
  const auto item_at = [&examples](int64_t i) {
    const TokenizedHellaSwag& ex = examples[static_cast<size_t>(i)];
    ScoringItem item;
    item.gold = ex.label;
    for (const auto& ending : ex.endings) {
      ScoringRow row{ex.context, static_cast<int64_t>(ex.context.size()), 0};
      row.tokens.insert(row.tokens.end(), ending.begin(), ending.end());
      row.end = static_cast<int64_t>(row.tokens.size());
      item.rows.push_back(std::move(row));
    }
    return item;
  };
  // Every row of the model, padding ones included, as the scores were before the loop was shared.
  const ScoringPass pass = score_items(model, n, item_at, comm, device, precision, /*vocab_limit=*/0,
                                       examples_per_batch, on_example, rounds);
  return {pass.correct, pass.total, pass.stopped};
}

}  // namespace mygpt
