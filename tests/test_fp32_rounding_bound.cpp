// The fp32 drift bound that the CUDA test Cuda.Fp32LossesEqualTheCpuRun uses (fp32_rounding_bound.h),
// checked where it can be on a CPU: two runs that round differently (the fused, chunked loss against the
// plain cross-entropy: other summation orders, another logsumexp) stay within it over 20 AdamW steps, and
// it is not so loose that a real difference (a learning rate 10% off) passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "tests/fp32_rounding_bound.h"
#include "tests/scratch_dir.h"
#include "tests/training_fixture.h"

namespace mygpt::fp32_rounding_bound_test {
namespace {

constexpr int64_t kVocab = 37;
constexpr int kSteps = 20;

std::vector<double> losses_of(const std::string& out, const std::string& lr, const std::string& fused) {
  const TrainingData data = testing::token_data(testing::pattern_tokens(20000, kVocab), kVocab);
  auto run = testing::cpu_trainer({"--preset", "tiny", "--block-size", "16", "--seq-len", "16", "--batch-size", "8",
                                   "--steps", std::to_string(kSteps), "--lr", lr, "--warmup-steps", "2",
                                   "--eval-every", "0", "--precision", "fp32", "--fused-loss", fused, "--out", out},
                                  data);
  std::vector<double> losses;
  for (int64_t step = 0; step < kSteps; ++step) losses.push_back(run->train_step(step).loss);
  return losses;
}

// The shape of the runs above (and of the CUDA test's): tiny preset, T=16, B=8.
const testing::Fp32RunShape kTinyRun{/*n_layer=*/2, /*n_embd=*/32, /*seq_len=*/16, kVocab, /*rows=*/8 * 16};

TEST(Fp32RoundingBound, RunsThatRoundDifferentlyStayWithinItAndARealDifferenceDoesNot) {
  ScratchDir dir;
  const auto reference = losses_of((dir.path() / "fused").string(), "3e-3", "true");
  const auto other_rounding = losses_of((dir.path() / "plain").string(), "3e-3", "false");
  const auto other_lr = losses_of((dir.path() / "lr").string(), "3.3e-3", "true");
  const auto bounds = testing::fp32_loss_bounds(kTinyRun, reference);
  ASSERT_EQ(bounds.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(reference.back(), 0.8 * reference.front()) << "the run learns, so later bounds include its travel";
  EXPECT_GT(bounds.back(), bounds.front());
  bool real_difference_caught = false;
  double largest_share = 0;  // of the bound, used by the rounding difference
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_LE(std::abs(other_rounding[s] - reference[s]), bounds[s]) << "step " << s;
    largest_share = std::max(largest_share, std::abs(other_rounding[s] - reference[s]) / bounds[s]);
    real_difference_caught = real_difference_caught || std::abs(other_lr[s] - reference[s]) > bounds[s];
  }
  EXPECT_GT(largest_share, 0.0) << "the two runs rounded alike: this comparison checks nothing";
  std::cout << "rounding difference: at most " << largest_share << " of the bound\n";
  EXPECT_TRUE(real_difference_caught) << "a learning rate 10% off stayed within the rounding bound";
}

TEST(Fp32RoundingBound, FollowsTheModelsReductionsAndTheRunsTravel) {
  // kappa = 2 * (2 layers * (9*32 + 2*16) + 2*32 + 37 + 128) + 128 = 1866 reductions.
  EXPECT_DOUBLE_EQ(testing::fp32_reduction_chain(kTinyRun), 1866.0);
  const auto bounds = testing::fp32_loss_bounds(kTinyRun, {3.0, 2.5, 2.75});
  const double per_unit = 1866.0 * testing::kFp32UnitRoundoff;
  EXPECT_DOUBLE_EQ(bounds[0], per_unit * 3.0);
  EXPECT_DOUBLE_EQ(bounds[1], per_unit * (2.5 + 0.5));
  EXPECT_DOUBLE_EQ(bounds[2], per_unit * (2.75 + 0.75));
}

}  // namespace
}  // namespace mygpt::fp32_rounding_bound_test
