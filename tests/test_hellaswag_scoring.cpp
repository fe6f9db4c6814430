// HellaSwag scoring: the length-normalized pick of an ending (against an independent row-by-row reference), the
// evaluation loop over examples and ranks.
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

namespace mygpt::hellaswag_scoring_test {
namespace {

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

TEST(EvaluateHellaSwag, ARankOutOfExamplesSitsOutEachRoundTheOthersScore) {
  // 7 examples on 3 ranks, 2 per batch: rank 0 holds 3 (0, 3, 6: 2 rounds), rank 2 holds 2 (2, 5: 1 round).
  // Every rank takes part in rank 0's 2 rounds (under --zero 3 each round's forward holds gathers), a rank
  // without a batch through sit_out, which scores nothing.
  Gpt model = tiny_model();
  const auto examples = examples_with_known_answers(model, 10);
  ASSERT_EQ(examples.size(), 10u);
  for (int rank : {0, 2}) {
    PretendRank pretend(rank, 3);
    int sat_out = 0, stops_asked = 0;
    EvaluationRounds rounds;
    rounds.sit_out = [&] { ++sat_out; };
    rounds.stop = [&] { ++stops_asked; return false; };
    const HellaSwagResult r =
        evaluate_hellaswag(model, examples, 7, pretend, torch::kCPU, Precision::fp32, {}, /*examples_per_batch=*/2, rounds);
    EXPECT_EQ(r.total, rank == 0 ? 3 : 2) << "rank " << rank;
    EXPECT_EQ(sat_out, rank == 0 ? 0 : 1) << "rank " << rank;
    EXPECT_EQ(stops_asked, 1) << "rank " << rank;  // between the 2 rounds, on every rank
  }
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
}  // namespace mygpt::hellaswag_scoring_test
