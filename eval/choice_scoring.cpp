#include "eval/choice_scoring.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace mygpt {

bool judge_item(const ScoringItem& item, const std::vector<RowScore>& scores) {
  if (item.rule == ScoringRule::greedy_match) return scores.at(0).greedy_match;
  size_t best = 0;
  for (size_t r = 1; r < scores.size(); ++r) {
    if (scores[r].mean_loss < scores[best].mean_loss) best = r;
  }
  return static_cast<int64_t>(best) == item.gold;
}

namespace {

// A row as the model reads it: at most `block` tokens (its end), and the scored positions p, each
// predicted by the output at p - 1.
struct CroppedRow {
  const int64_t* tokens;
  int64_t length, begin, end;
};

CroppedRow crop(const ScoringRow& row, int64_t block) {
  const auto size = static_cast<int64_t>(row.tokens.size());
  const int64_t drop = std::max<int64_t>(0, size - block);
  const int64_t begin = std::max<int64_t>(row.begin - drop, 1);
  const int64_t end = std::max<int64_t>(row.end - drop, begin);
  return {row.tokens.data() + drop, size - drop, begin, end};
}

// Scores the rows of a batch of items: one forward of all rows, then the head on the span positions only.
std::vector<std::vector<RowScore>> score_batch(Gpt& model, const std::vector<ScoringItem>& items,
                                               const torch::Device& device, Precision precision, int64_t vocab_limit) {
  const int64_t block = model->config().block_size;
  std::vector<CroppedRow> rows;
  for (const ScoringItem& item : items) {
    for (const ScoringRow& row : item.rows) rows.push_back(crop(row, block));
  }
  int64_t T = 1;
  for (const CroppedRow& r : rows) T = std::max(T, r.length);
  const auto R = static_cast<int64_t>(rows.size());
  int64_t positions = 0;
  for (const CroppedRow& r : rows) positions += r.end - r.begin;
  // Tokens (R, T), then the flat indices of the predicting positions and their targets, in one host buffer
  // (pinned for a CUDA device) and one copy.
  auto host = torch::zeros({R * T + 2 * positions}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(device.is_cuda()));
  int64_t* tokens = host.data_ptr<int64_t>();
  int64_t* at = tokens + R * T;
  int64_t* targets = at + positions;
  int64_t k = 0;
  for (int64_t r = 0; r < R; ++r) {
    const CroppedRow& row = rows[static_cast<size_t>(r)];
    std::copy(row.tokens, row.tokens + row.length, tokens + r * T);
    for (int64_t p = row.begin; p < row.end; ++p, ++k) {
      at[k] = r * T + p - 1;
      targets[k] = row.tokens[p];
    }
  }
  const auto on_device = host.to(device, /*non_blocking=*/true);
  torch::Tensor nll, match;
  {
    AutocastScope autocast(device, precision);
    const ForwardOptions picked{.positions = on_device.slice(0, R * T, R * T + positions), .vocab_limit = vocab_limit};
    const auto logits = model->forward(on_device.slice(0, 0, R * T).view({R, T}), picked).to(torch::kFloat);
    const auto target = on_device.slice(0, R * T + positions);
    nll = -torch::log_softmax(logits, -1).gather(1, target.unsqueeze(1)).squeeze(1);
    match = logits.argmax(-1).eq(target);
  }
  // The one wait for the device per batch.
  const auto nll_host = nll.to(torch::kCPU).contiguous();
  const auto match_host = match.to(torch::kCPU).contiguous();
  const float* n = nll_host.data_ptr<float>();
  const bool* m = match_host.data_ptr<bool>();
  std::vector<std::vector<RowScore>> scores(items.size());
  k = 0;
  size_t r = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t j = 0; j < items[i].rows.size(); ++j, ++r) {
      const CroppedRow& row = rows[r];
      RowScore s;
      double sum = 0;
      for (int64_t p = row.begin; p < row.end; ++p, ++k) {
        sum += n[k];
        s.greedy_match = s.greedy_match && m[k];
      }
      const int64_t span = row.end - row.begin;
      s.mean_loss = span > 0 ? sum / static_cast<double>(span) : std::numeric_limits<double>::quiet_NaN();
      scores[i].push_back(s);
    }
  }
  return scores;
}

}  // namespace

ScoringPass score_items(Gpt& model, int64_t count, const std::function<ScoringItem(int64_t)>& item_at,
                        Communicator& comm, const torch::Device& device, Precision precision, int64_t vocab_limit,
                        int64_t items_per_batch, const std::function<void(int64_t done, int64_t correct)>& on_item,
                        const EvaluationRounds& rounds) {
  if (items_per_batch <= 0) throw std::logic_error("items_per_batch must be positive");
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int64_t W = comm.world_size();
  std::vector<int64_t> mine;
  for (int64_t i = comm.rank(); i < count; i += W) mine.push_back(i);
  int64_t correct = 0, total = 0;
  bool stopped = false;
  // Rounds of one batch per rank; rank 0 has the most items (ceil(count / W)), so its count of batches is
  // every rank's count of rounds.
  const int64_t most = (count + W - 1) / W;
  for (int64_t first = 0; first < most; first += items_per_batch) {
    if (first > 0 && rounds.stop && rounds.stop()) {
      stopped = true;
      break;
    }
    if (first >= static_cast<int64_t>(mine.size())) {
      if (rounds.sit_out) rounds.sit_out();
      continue;
    }
    const int64_t last = std::min<int64_t>(static_cast<int64_t>(mine.size()), first + items_per_batch);
    std::vector<ScoringItem> batch;
    for (int64_t i = first; i < last; ++i) batch.push_back(item_at(mine[static_cast<size_t>(i)]));
    const auto scores = score_batch(model, batch, device, precision, vocab_limit);
    for (size_t i = 0; i < batch.size(); ++i) {
      correct += judge_item(batch[i], scores[i]) ? 1 : 0;
      ++total;
      if (on_item) on_item(total, correct);
    }
  }
  auto counts = torch::tensor({correct, total}, torch::kLong).to(device);
  comm.all_reduce(counts, ReduceOp::Sum);
  counts = counts.to(torch::kCPU);
  model->train(was_training);
  return {counts[0].item<int64_t>(), counts[1].item<int64_t>(), stopped};
}

}  // namespace mygpt
