#include "trainer/hellaswag_eval.h"

#include <algorithm>
#include <stdexcept>

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
  return pick_hellaswag_endings_from_losses(next_token_losses, mask)[0].item<int64_t>();
}

torch::Tensor pick_hellaswag_endings_from_losses(const torch::Tensor& next_token_losses, const torch::Tensor& mask) {
  auto shift_mask = mask.slice(1, 1).to(torch::kFloat);
  auto mean_loss = (next_token_losses.to(torch::kFloat) * shift_mask).sum(1) / shift_mask.sum(1);
  return mean_loss.view({-1, 4}).argmin(1);
}

namespace {

// The rows of a batch of examples, written straight into one host buffer (pinned for a CUDA device) so
// that the tokens, the ending masks and the labels reach the device in one copy: tokens (4E, T), then the
// mask (4E, T), then the labels (E). Each row is left-aligned and padded on the right, which a causal
// model never looks at; a row too long for the model keeps its end, where the ending is.
struct ScoringBatch {
  torch::Tensor tokens, mask, labels;
};

ScoringBatch pack_batch(const std::vector<const TokenizedHellaSwag*>& batch, int64_t block, const torch::Device& device) {
  const auto width = [block](const TokenizedHellaSwag& ex) {
    size_t longest = 0;
    for (const auto& ending : ex.endings) longest = std::max(longest, ex.context.size() + ending.size());
    return static_cast<int64_t>(std::min<size_t>(longest, static_cast<size_t>(block)));
  };
  int64_t T = 1;
  for (const auto* ex : batch) T = std::max(T, width(*ex));
  const auto E = static_cast<int64_t>(batch.size()), R = 4 * E;
  auto host = torch::zeros({2 * R * T + E}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(device.is_cuda()));
  int64_t* tokens = host.data_ptr<int64_t>();
  int64_t* mask = tokens + R * T;
  int64_t* labels = mask + R * T;
  for (int64_t e = 0; e < E; ++e) {
    const TokenizedHellaSwag& ex = *batch[static_cast<size_t>(e)];
    const auto T_e = static_cast<size_t>(width(ex));  // as if scored alone
    for (int64_t k = 0; k < 4; ++k) {
      std::vector<int64_t> row = ex.context;
      row.insert(row.end(), ex.endings[static_cast<size_t>(k)].begin(), ex.endings[static_cast<size_t>(k)].end());
      const size_t drop = row.size() > T_e ? row.size() - T_e : 0;
      const int64_t base = (4 * e + k) * T;
      for (size_t t = drop; t < row.size(); ++t) {
        tokens[base + static_cast<int64_t>(t - drop)] = row[t];
        if (t >= ex.context.size()) mask[base + static_cast<int64_t>(t - drop)] = 1;
      }
    }
    labels[e] = ex.label;
  }
  const auto on_device = host.to(device, /*non_blocking=*/true);
  return {on_device.slice(0, 0, R * T).view({R, T}), on_device.slice(0, R * T, 2 * R * T).view({R, T}),
          on_device.slice(0, 2 * R * T)};
}

}  // namespace

HellaSwagResult evaluate_hellaswag(Gpt& model, const std::vector<TokenizedHellaSwag>& examples, int64_t limit,
                                   Communicator& comm, const torch::Device& device, Precision precision,
                                   const std::function<void(int64_t done, int64_t correct)>& on_example,
                                   int64_t examples_per_batch, const std::function<bool()>& stop_agreed) {
  if (examples_per_batch <= 0) throw std::logic_error("examples_per_batch must be positive");
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto n = static_cast<size_t>(limit > 0 ? std::min<int64_t>(limit, static_cast<int64_t>(examples.size()))
                                               : static_cast<int64_t>(examples.size()));
  std::vector<const TokenizedHellaSwag*> mine;
  for (size_t i = static_cast<size_t>(comm.rank()); i < n; i += static_cast<size_t>(comm.world_size())) {
    mine.push_back(&examples[i]);
  }
  int64_t correct = 0, total = 0;
  bool stopped = false;
  // Rounds of one batch per rank; rank 0 has the most examples (ceil(n / W)), so its count of batches is
  // every rank's count of rounds.
  const size_t most = (n + static_cast<size_t>(comm.world_size()) - 1) / static_cast<size_t>(comm.world_size());
  for (size_t first = 0; first < most; first += static_cast<size_t>(examples_per_batch)) {
    if (first > 0 && stop_agreed && stop_agreed()) {
      stopped = true;
      break;
    }
    if (first >= mine.size()) continue;
    const size_t last = std::min(mine.size(), first + static_cast<size_t>(examples_per_batch));
    const ScoringBatch batch = pack_batch({mine.begin() + static_cast<std::ptrdiff_t>(first),
                                           mine.begin() + static_cast<std::ptrdiff_t>(last)},
                                          model->config().block_size, device);
    // Position t predicts token t+1; the last position predicts nothing and gets a dummy target
    // (its loss is dropped), so the model sees exactly the rows it saw when scoring from logits.
    const auto targets = torch::cat({batch.tokens.slice(1, 1), torch::zeros({batch.tokens.size(0), 1}, batch.tokens.options())}, 1);
    torch::Tensor losses;
    {
      AutocastScope autocast(device, precision);
      losses = model->token_losses(batch.tokens, targets).slice(1, 0, -1);
    }
    // The one wait for the device per batch.
    const torch::Tensor right = pick_hellaswag_endings_from_losses(losses, batch.mask).eq(batch.labels).to(torch::kCPU);
    const auto* r = right.data_ptr<bool>();
    for (size_t e = 0; e < last - first; ++e) {
      correct += r[e] ? 1 : 0;
      ++total;
      if (on_example) on_example(total, correct);
    }
  }
  auto counts = torch::tensor({correct, total}, torch::kLong).to(device);
  comm.all_reduce(counts, ReduceOp::Sum);
  counts = counts.to(torch::kCPU);
  model->train(was_training);
  return {counts[0].item<int64_t>(), counts[1].item<int64_t>(), stopped};
}

}  // namespace mygpt
