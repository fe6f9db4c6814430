// HellaSwag scoring: the length-normalized pick of an ending, the evaluation loop over examples and ranks.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "model/gpt.h"
#include "tests/test_support.h"
#include "eval/hellaswag_eval.h"

namespace mygpt {
namespace {

// ------------------------------------------------------------------------------------------------
// pick_hellaswag_ending on hand-made logits

constexpr int64_t kVocab = 8;

// The cross-entropy of a token whose logit is `a` while the other kVocab-1 logits are 0.
double token_loss(double a) { return std::log(std::exp(a) + static_cast<double>(kVocab - 1)) - a; }

// Four rows of hand-made tokens, logits and masks. Position t's logits predict token t+1.
struct Rows {
  int64_t T;
  torch::Tensor tokens, mask, logits;
  explicit Rows(int64_t length)
      : T(length),
        tokens(torch::zeros({4, length}, torch::kLong)),
        mask(torch::zeros({4, length}, torch::kLong)),
        logits(torch::zeros({4, length, kVocab}, torch::kFloat)) {}
  // Gives token t of row k (predicted at position t-1) the logit `a` (0: uniform, loss log 8).
  void set(int64_t k, int64_t t, int64_t token, double a, bool ending) {
    tokens[k][t] = token;
    mask[k][t] = ending ? 1 : 0;
    if (t > 0) logits[k][t - 1][token] = a;
  }
};

TEST(PickHellaSwagEnding, PicksTheRowWhoseEndingTokensArePredicted) {
  for (int64_t favoured = 0; favoured < 4; ++favoured) {
    Rows r(6);
    for (int64_t k = 0; k < 4; ++k) {
      for (int64_t t = 0; t < 6; ++t) {
        const int64_t token = (k + 2 * t + 1) % kVocab;
        // Ending tokens are positions 3..5; only the favoured row's are predicted confidently. Each
        // row also gets a confident *unshifted* logit (position t for token t), which a scorer that
        // forgot the shift would mistake for a good prediction.
        r.set(k, t, token, k == favoured ? 6.0 : 0.0, /*ending=*/t >= 3);
        if (k != favoured) r.logits[k][t][token] = 9.0;
      }
    }
    EXPECT_EQ(pick_hellaswag_ending(r.logits, r.tokens, r.mask), favoured);
    // bf16 logits (autocast) give the same answer.
    EXPECT_EQ(pick_hellaswag_ending(r.logits.to(torch::kBFloat16), r.tokens, r.mask), favoured);
  }
}

TEST(PickHellaSwagEnding, MeanLossNotSumDecidesAndOnlyEndingTokensCount) {
  // Row 0: context of 2 tokens, a long ending of 6 tokens each with loss ~0.41 (sum ~2.5).
  // Row 1: context of 2 tokens, an ending of 1 token with loss ~1.0 (higher mean, lower sum).
  // Rows 2, 3: one-token endings with the uniform loss log 8 = 2.08.
  const double low = 2.5, mid = 0.97;
  ASSERT_LT(token_loss(low), token_loss(mid));
  ASSERT_GT(6 * token_loss(low), token_loss(mid));
  Rows r(8);
  for (int64_t k = 0; k < 4; ++k) {
    // Context tokens of row 0 are predicted terribly: a scorer counting the context would drop row 0.
    r.set(k, 0, 1, 0.0, false);
    r.set(k, 1, 2, k == 0 ? -30.0 : 0.0, false);
  }
  for (int64_t t = 2; t < 8; ++t) r.set(0, t, 3, low, true);
  r.set(1, 2, 4, mid, true);
  r.set(2, 2, 5, 0.0, true);
  r.set(3, 2, 6, 0.0, true);
  // Padding after the short endings (mask 0) predicted terribly: it must not count either.
  for (int64_t k = 1; k < 4; ++k) {
    for (int64_t t = 3; t < 8; ++t) r.set(k, t, 0, -30.0, false);
  }
  EXPECT_EQ(pick_hellaswag_ending(r.logits, r.tokens, r.mask), 0);

  // The long ending a little worse per token than the short one: now the short one wins. The pick
  // follows the mean, not the length.
  for (int64_t t = 2; t < 8; ++t) r.logits[0][t - 1][3] = 0.9;
  ASSERT_GT(token_loss(0.9), token_loss(mid));
  EXPECT_EQ(pick_hellaswag_ending(r.logits, r.tokens, r.mask), 1);
}

// ------------------------------------------------------------------------------------------------
// evaluate_hellaswag with a tiny model

// Pretends to be one rank of several; collectives are the identity, so each rank's counts are its own.
class PretendRank final : public Communicator {
 public:
  PretendRank(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return "pretend"; }
  void all_reduce(torch::Tensor&, ReduceOp) override {}
  std::unique_ptr<PendingCollective> all_reduce_async(torch::Tensor, ReduceOp) override {
    struct Done final : PendingCollective {
      void wait() override {}
    };
    return std::make_unique<Done>();
  }
  void broadcast(torch::Tensor&, int) override {}
  void barrier() override {}
  using Communicator::all_reduce;
  using Communicator::broadcast;

 private:
  int rank_, world_;
};

// A random tiny model whose logits are spread widely (the GPT-2 initialization keeps them near 0,
// where every ending would score almost the same).
Gpt tiny_model(double dropout = 0.0) {
  torch::manual_seed(1);
  Gpt model(testing::small_config(32, 16, 1, 2, 16, dropout));
  torch::NoGradGuard no_grad;
  model->wte->weight.mul_(100.0);
  return model;
}

// The mean loss of each ending, computed row by row without padding: an independent reference for
// the batched, padded, masked scoring of evaluate_hellaswag.
std::vector<double> reference_mean_losses(Gpt& model, const TokenizedHellaSwag& ex) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  std::vector<double> out;
  const auto block = static_cast<size_t>(model->config().block_size);
  for (const auto& ending : ex.endings) {
    std::vector<int64_t> row = ex.context;
    row.insert(row.end(), ending.begin(), ending.end());
    const size_t drop = row.size() > block ? row.size() - block : 0;
    const std::vector<int64_t> kept(row.begin() + static_cast<std::ptrdiff_t>(drop), row.end());
    auto logits = model->forward(torch::tensor(kept, torch::kLong).unsqueeze(0)).squeeze(0);
    auto logp = torch::log_softmax(logits, -1);
    double sum = 0;
    int64_t n = 0;
    for (size_t t = 1; t < kept.size(); ++t) {
      if (t + drop < ex.context.size()) continue;  // a context token
      sum -= logp[static_cast<int64_t>(t - 1)][kept[t]].item<double>();
      ++n;
    }
    out.push_back(sum / static_cast<double>(n));
  }
  model->train(was_training);
  return out;
}

// Random examples whose best ending (by the reference) wins by a clear margin, so padding and batching
// cannot flip it. Even-numbered examples are labelled with the model's pick, odd ones with another
// ending: whatever the model, exactly the even ones are "correct". One example is longer than the block.
std::vector<TokenizedHellaSwag> examples_with_known_answers(Gpt& model, size_t count) {
  std::vector<TokenizedHellaSwag> out;
  torch::manual_seed(7);
  for (int attempt = 0; out.size() < count && attempt < 1000; ++attempt) {
    TokenizedHellaSwag ex;
    const int64_t context_len = out.size() == 3 ? 14 : 3 + attempt % 4;  // example 3 overflows the block
    auto draw = [&](int64_t n) {
      auto t = torch::randint(0, model->config().vocab_size, {n}, torch::kLong);
      return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
    };
    ex.context = draw(context_len);
    for (int64_t k = 0; k < 4; ++k) ex.endings[static_cast<size_t>(k)] = draw(1 + (k + attempt) % 4);
    const auto losses = reference_mean_losses(model, ex);
    std::vector<double> sorted = losses;
    std::sort(sorted.begin(), sorted.end());
    if (sorted[1] - sorted[0] < 0.02) continue;
    const int best = static_cast<int>(std::min_element(losses.begin(), losses.end()) - losses.begin());
    ex.label = out.size() % 2 == 0 ? best : (best + 1) % 4;
    out.push_back(std::move(ex));
  }
  return out;
}

TEST(EvaluateHellaSwag, CountsMatchAnIndependentRowByRowScoring) {
  Gpt model = tiny_model();
  const auto examples = examples_with_known_answers(model, 10);
  ASSERT_EQ(examples.size(), 10u);
  size_t longest = 0;
  for (const auto& ending : examples[3].endings)
    longest = std::max(longest, examples[3].context.size() + ending.size());
  ASSERT_GT(longest, static_cast<size_t>(model->config().block_size));  // scored on its last block_size tokens
  LocalCommunicator single;
  const HellaSwagResult all = evaluate_hellaswag(model, examples, 0, single, torch::kCPU, Precision::fp32);
  EXPECT_EQ(all.total, 10);
  EXPECT_EQ(all.correct, 5);
  EXPECT_DOUBLE_EQ(all.accuracy(), 0.5);
}

TEST(EvaluateHellaSwag, BatchesOfExamplesGiveTheVerdictsOfOneAtATime) {
  // Rows of different lengths (and one cut to the block) share a batch, padded on the right: each
  // example's verdict, and the progress heard after each, must be those of scoring it alone.
  Gpt model = tiny_model();
  const auto examples = examples_with_known_answers(model, 10);
  ASSERT_EQ(examples.size(), 10u);
  LocalCommunicator single;
  auto progress_with = [&](int64_t per_batch) {
    std::vector<std::pair<int64_t, int64_t>> heard;
    const HellaSwagResult r = evaluate_hellaswag(
        model, examples, 0, single, torch::kCPU, Precision::fp32, [&](int64_t done, int64_t correct) { heard.emplace_back(done, correct); },
        per_batch);
    EXPECT_EQ(r.total, 10);
    EXPECT_EQ(r.correct, 5);
    return heard;
  };
  const auto alone = progress_with(1);
  ASSERT_EQ(alone.size(), 10u);
  for (int64_t per_batch : {3, 8, 16}) EXPECT_EQ(progress_with(per_batch), alone) << per_batch << " per batch";
}

TEST(EvaluateHellaSwag, LimitTakesTheFirstExamples) {
  Gpt model = tiny_model();
  const auto examples = examples_with_known_answers(model, 10);
  ASSERT_EQ(examples.size(), 10u);
  LocalCommunicator single;
  const HellaSwagResult three = evaluate_hellaswag(model, examples, 3, single, torch::kCPU, Precision::fp32);
  EXPECT_EQ(three.total, 3);
  EXPECT_EQ(three.correct, 2);  // examples 0 and 2
  const HellaSwagResult one = evaluate_hellaswag(model, examples, 1, single, torch::kCPU, Precision::fp32);
  EXPECT_EQ(one.total, 1);
  EXPECT_EQ(one.correct, 1);
  const HellaSwagResult beyond = evaluate_hellaswag(model, examples, 100, single, torch::kCPU, Precision::fp32);
  EXPECT_EQ(beyond.total, 10);
  EXPECT_EQ(beyond.correct, 5);
  const HellaSwagResult none = evaluate_hellaswag(model, {}, 0, single, torch::kCPU, Precision::fp32);
  EXPECT_EQ(none.total, 0);
  EXPECT_EQ(none.accuracy(), 0.0);
}

TEST(EvaluateHellaSwag, EachRankScoresEveryWorldSizeThExample) {
  Gpt model = tiny_model();
  const auto examples = examples_with_known_answers(model, 10);
  ASSERT_EQ(examples.size(), 10u);
  PretendRank rank0(0, 2), rank1(1, 2);
  const HellaSwagResult r0 = evaluate_hellaswag(model, examples, 0, rank0, torch::kCPU, Precision::fp32);
  const HellaSwagResult r1 = evaluate_hellaswag(model, examples, 0, rank1, torch::kCPU, Precision::fp32);
  EXPECT_EQ(r0.total, 5);
  EXPECT_EQ(r0.correct, 5);  // the even examples
  EXPECT_EQ(r1.total, 5);
  EXPECT_EQ(r1.correct, 0);  // the odd ones
  PretendRank third(2, 3);
  const HellaSwagResult r2 = evaluate_hellaswag(model, examples, 7, third, torch::kCPU, Precision::fp32);
  EXPECT_EQ(r2.total, 2);    // examples 2 and 5 of the first 7
  EXPECT_EQ(r2.correct, 1);  // example 2
}

TEST(EvaluateHellaSwag, ScoresInEvalModeAndRestoresTrainingMode) {
  Gpt model = tiny_model(/*dropout=*/0.5);
  const auto examples = examples_with_known_answers(model, 10);  // reference scored in eval mode
  ASSERT_EQ(examples.size(), 10u);
  model->train();
  LocalCommunicator single;
  for (int repeat = 0; repeat < 3; ++repeat) {  // with dropout active, answers would vary
    const HellaSwagResult r = evaluate_hellaswag(model, examples, 0, single, torch::kCPU, Precision::fp32);
    EXPECT_EQ(r.correct, 5);
    EXPECT_TRUE(model->is_training());
  }
  model->eval();
  evaluate_hellaswag(model, examples, 0, single, torch::kCPU, Precision::fp32);
  EXPECT_FALSE(model->is_training());
}

}  // namespace
}  // namespace mygpt
