#include "eval/hellaswag_eval.h"

#include <algorithm>
#include <stdexcept>

#include "eval/choice_scoring.h"
#include "model/mixed_precision.h"

namespace mygpt {

int64_t pick_hellaswag_ending(const torch::Tensor& logits, const torch::Tensor& tokens, const torch::Tensor& mask) {
  // Position t predicts token t+1: shift so each ending token is scored by the logit before it.
  auto shift_logits = logits.slice(1, 0, -1).to(torch::kFloat);
  auto shift_tokens = tokens.slice(1, 1);
  auto losses = torch::nn::functional::cross_entropy(
                    shift_logits.reshape({-1, shift_logits.size(-1)}), shift_tokens.reshape({-1}),
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
                    .view_as(shift_tokens);
  return pick_hellaswag_ending_from_losses(losses, mask);
}

int64_t pick_hellaswag_ending_from_losses(const torch::Tensor& next_token_losses, const torch::Tensor& mask) {
  return pick_hellaswag_endings_from_losses(next_token_losses, mask)[0].item<int64_t>();
}

torch::Tensor pick_hellaswag_endings_from_losses(const torch::Tensor& next_token_losses, const torch::Tensor& mask) {
  auto shift_mask = mask.slice(1, 1).to(torch::kFloat);
  auto mean_loss = (next_token_losses.to(torch::kFloat) * shift_mask).sum(1) / shift_mask.sum(1);
  return mean_loss.view({-1, 4}).argmin(1);
}

HellaSwagResult evaluate_hellaswag(Gpt& model, const std::vector<TokenizedHellaSwag>& examples, int64_t limit,
                                   Communicator& comm, const torch::Device& device, Precision precision,
                                   const std::function<void(int64_t done, int64_t correct)>& on_example,
                                   int64_t examples_per_batch, const std::function<bool()>& stop_agreed) {
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
                                       examples_per_batch, on_example, stop_agreed);
  return {pass.correct, pass.total, pass.stopped};
}

}  // namespace mygpt
