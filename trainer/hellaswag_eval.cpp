#include "trainer/hellaswag_eval.h"

#include <algorithm>

#include "trainer/mixed_precision.h"

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
  auto shift_mask = mask.slice(1, 1).to(torch::kFloat);
  auto mean_loss = (next_token_losses.to(torch::kFloat) * shift_mask).sum(1) / shift_mask.sum(1);
  return mean_loss.argmin().item<int64_t>();
}

HellaSwagResult evaluate_hellaswag(Gpt& model, const std::vector<TokenizedHellaSwag>& examples, int64_t limit,
                                   Communicator& comm, const torch::Device& device, bool bf16,
                                   const std::function<void(int64_t done, int64_t correct)>& on_example) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto n = static_cast<size_t>(limit > 0 ? std::min<int64_t>(limit, static_cast<int64_t>(examples.size()))
                                               : static_cast<int64_t>(examples.size()));
  const int64_t block = model->config().block_size;
  int64_t correct = 0, total = 0;
  for (size_t i = static_cast<size_t>(comm.rank()); i < n; i += static_cast<size_t>(comm.world_size())) {
    const TokenizedHellaSwag& ex = examples[i];
    size_t longest = 0;
    for (const auto& ending : ex.endings) longest = std::max(longest, ex.context.size() + ending.size());
    const auto T = static_cast<int64_t>(std::min<size_t>(longest, static_cast<size_t>(block)));
    auto tokens = torch::zeros({4, T}, torch::kLong);
    auto mask = torch::zeros({4, T}, torch::kLong);
    for (int64_t k = 0; k < 4; ++k) {
      std::vector<int64_t> row = ex.context;
      row.insert(row.end(), ex.endings[k].begin(), ex.endings[k].end());
      // Too long for the model: keep the end, where the ending is.
      const size_t drop = row.size() > static_cast<size_t>(T) ? row.size() - static_cast<size_t>(T) : 0;
      for (size_t t = drop; t < row.size(); ++t) {
        tokens[k][static_cast<int64_t>(t - drop)] = row[t];
        if (t >= ex.context.size()) mask[k][static_cast<int64_t>(t - drop)] = 1;
      }
    }
    // Position t predicts token t+1; the last position predicts nothing and gets a dummy target
    // (its loss is dropped), so the model sees exactly the rows it saw when scoring from logits.
    const auto input = tokens.to(device);
    const auto targets = torch::cat({input.slice(1, 1), torch::zeros({4, 1}, input.options())}, 1);
    torch::Tensor losses;
    {
      AutocastScope autocast(device, bf16);
      losses = model->token_losses(input, targets).slice(1, 0, -1);
    }
    correct += pick_hellaswag_ending_from_losses(losses, mask.to(device)) == ex.label ? 1 : 0;
    ++total;
    if (on_example) on_example(total, correct);
  }
  auto counts = torch::tensor({correct, total}, torch::kLong).to(device);
  comm.all_reduce(counts, ReduceOp::Sum);
  counts = counts.to(torch::kCPU);
  model->train(was_training);
  return {counts[0].item<int64_t>(), counts[1].item<int64_t>()};
}

}  // namespace mygpt
