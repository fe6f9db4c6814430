// --recompute: activations recomputed in backward give the plain path's losses and gradients bit for
// bit, with dropout (the same masks) and under bf16 autocast, and leave the random streams as they were.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/gpt.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "tests/training_fixture.h"
#include "model/mixed_precision.h"
#include "trainer/trainer.h"

namespace mygpt::recompute_test {
namespace {

constexpr int64_t kVocab = 29;

struct Outcome {
  torch::Tensor loss;
  std::vector<torch::Tensor> grads;
  torch::Tensor next_random;  // a draw after backward: the random stream is where the plain path left it
};

Outcome forward_backward(Recompute mode, bool bf16) {
  torch::manual_seed(5);
  Gpt model(testing::small_config(kVocab, 16, /*layers=*/2, /*heads=*/2, /*width=*/32, /*dropout=*/0.2),
            GptRuntime{.recompute = mode});
  model->train();
  auto x = torch::randint(kVocab, {3, 16}, torch::kLong), y = torch::randint(kVocab, {3, 16}, torch::kLong);
  Outcome out;
  {
    AutocastScope autocast(torch::kCPU, bf16 ? Precision::bf16 : Precision::fp32);
    out.loss = model->loss(x, y);
  }
  out.loss.backward();
  for (const auto& p : model->parameters()) out.grads.push_back(p.grad().clone());
  out.next_random = torch::rand({4});
  return out;
}

class RecomputeModes : public ::testing::TestWithParam<std::tuple<Recompute, bool>> {};

TEST_P(RecomputeModes, SameLossGradientsAndRandomStreamAsThePlainPath) {
  const auto [mode, bf16] = GetParam();
  const Outcome plain = forward_backward(Recompute::none, bf16), recomputed = forward_backward(mode, bf16);
  EXPECT_TRUE(torch::equal(plain.loss, recomputed.loss)) << plain.loss << recomputed.loss;
  ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
  for (size_t k = 0; k < plain.grads.size(); ++k) {
    EXPECT_TRUE(torch::equal(plain.grads[k], recomputed.grads[k])) << "parameter " << k;
    EXPECT_GT(plain.grads[k].abs().max().item<double>(), 0) << "parameter " << k;
  }
  EXPECT_TRUE(torch::equal(plain.next_random, recomputed.next_random));
}

INSTANTIATE_TEST_SUITE_P(Modes, RecomputeModes,
                         ::testing::Combine(::testing::Values(Recompute::mlp, Recompute::block), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == Recompute::mlp ? "Mlp" : "Block") +
                                  (std::get<1>(info.param) ? "Bf16" : "Fp32");
                         });

TEST(Recompute, DropoutReallyDrawsDifferentMasksPerRun) {
  // The control: without the restored random state, a second forward draws other masks.
  torch::manual_seed(5);
  Gpt model(testing::small_config(kVocab, 16, 2, 2, 32, 0.2));
  model->train();
  auto x = torch::randint(kVocab, {3, 16}, torch::kLong), y = torch::randint(kVocab, {3, 16}, torch::kLong);
  EXPECT_FALSE(torch::equal(model->loss(x, y), model->loss(x, y)));
}

TEST(Recompute, TrainingRunsEqualThePlainRun) {
  ScratchDir dir;
  auto args = [&](const std::string& mode) {
    return std::vector<std::string>{"--preset", "tiny",  "--block-size", "16",  "--steps",    "4",
                                    "--batch-size", "4", "--seq-len",    "16",  "--dropout",  "0.1",
                                    "--precision", "bf16", "--eval-every", "0", "--out", dir.path().string(),
                                    "--device", "cpu",   "--recompute",  mode,  "--grad-accum", "2"};
  };
  const TrainingData data = testing::token_data(testing::random_tokens(3000, kVocab, 5), kVocab);
  // One run after the other: dropout draws from the one global generator, which building a run seeds.
  std::vector<StepResult> a, b;
  auto plain = testing::cpu_trainer(args("none"), data);
  for (int64_t step = 0; step < 4; ++step) a.push_back(plain->train_step(step));
  auto block = testing::cpu_trainer(args("block"), data);
  for (int64_t step = 0; step < 4; ++step) b.push_back(block->train_step(step));
  for (size_t step = 0; step < 4; ++step) {
    EXPECT_EQ(a[step].loss, b[step].loss) << "step " << step;
    EXPECT_EQ(a[step].grad_norm, b[step].grad_norm) << "step " << step;
  }
  const auto pa = plain->model()->parameters(), pb = block->model()->parameters();
  for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "parameter " << k;
}

}  // namespace
}  // namespace mygpt::recompute_test
