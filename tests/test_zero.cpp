// --zero 1 in one process (the multi-rank cases are tests/mpi/zero_test.sh): the sharded AdamW, its
// gradient norm and its checkpoints are bit-identical to plain AdamW's; a checkpoint resumes with or
// without --zero.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "distributed/gradient_sync.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "tests/training_fixture.h"
#include "trainer/checkpoint.h"
#include "trainer/gradient_norm.h"
#include "trainer/trainer.h"

namespace mygpt::zero_test {
namespace {

constexpr int64_t kVocab = 23;

// Width 35 and vocabulary 23: parameters of odd sizes, none a multiple of the shard alignment; a low
// clip threshold so that every step clips; dropout so the random streams matter.
std::vector<std::string> args(const ScratchDir& dir, const std::string& zero, const std::string& steps = "6",
                              const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {"--preset", "tiny",  "--n-embd", "35",  "--n-head",       "5",   "--block-size", "16",
          "--steps",  steps,   "--batch-size", "4", "--seq-len",    "16",  "--warmup-steps", "2",
          "--lr",     "1e-2",  "--grad-clip", "0.5", "--dropout",    "0.1", "--eval-every", "0",
          "--out",    dir.path().string(), "--device", "cpu", "--seed", "4", "--zero", zero};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TrainingData data() { return testing::token_data(testing::random_tokens(3000, kVocab, 5), kVocab); }

void expect_identical_parameters(Trainer& a, Trainer& b) {
  const auto pa = a.model()->parameters(), pb = b.model()->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "parameter " << k;
}

void expect_identical_state(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(torch::equal(tensor, b.at(name))) << name;
  }
}

// The checkpoint a run writes after `steps` steps (its folder is the run's --out).
Checkpoint checkpoint_after(Trainer& run, const ScratchDir& dir, int64_t steps) {
  run.save_checkpoint_at(steps);
  return load_checkpoint(checkpoint_path(dir.path(), steps));
}

TEST(ZeroOne, OneRankEqualsPlainAdamWBitForBit) {
  ScratchDir plain_dir, sharded_dir;
  // One run after the other: dropout draws from the one global generator, which building a run seeds.
  std::vector<StepResult> a, b;
  auto plain = testing::cpu_trainer(args(plain_dir, "0"), data());
  for (int64_t step = 0; step < 6; ++step) a.push_back(plain->train_step(step));
  auto sharded = testing::cpu_trainer(args(sharded_dir, "1"), data());
  for (int64_t step = 0; step < 6; ++step) b.push_back(sharded->train_step(step));
  for (size_t step = 0; step < 6; ++step) {
    EXPECT_EQ(a[step].loss, b[step].loss) << "step " << step;
    EXPECT_EQ(a[step].grad_norm, b[step].grad_norm) << "step " << step;
    EXPECT_GT(a[step].grad_norm, 0.5) << "the test needs steps that clip";
  }
  expect_identical_parameters(*plain, *sharded);
  // The sharded optimizer's checkpoint holds the plain one's state: names, shapes and values.
  const Checkpoint saved_plain = checkpoint_after(*plain, plain_dir, 6);
  const Checkpoint saved_sharded = checkpoint_after(*sharded, sharded_dir, 6);
  StateDict optimizer_a, optimizer_b;
  for (const auto& [name, t] : saved_plain.tensors) {
    if (name.rfind("optimizer.", 0) == 0) optimizer_a[name] = t;
  }
  for (const auto& [name, t] : saved_sharded.tensors) {
    if (name.rfind("optimizer.", 0) == 0) optimizer_b[name] = t;
  }
  EXPECT_GT(optimizer_a.size(), 10u);
  expect_identical_state(optimizer_a, optimizer_b);
}

// A checkpoint of either kind resumes in a run of either kind, continuing bit for bit.
TEST(ZeroOne, CheckpointsResumeWithAndWithoutZero) {
  for (const auto& [saved_zero, resumed_zero] :
       std::vector<std::pair<std::string, std::string>>{{"1", "0"}, {"0", "1"}, {"1", "1"}}) {
    ScratchDir dir;
    auto straight = testing::cpu_trainer(args(dir, resumed_zero), data());
    std::vector<double> expected;
    for (int64_t step = 0; step < 6; ++step) expected.push_back(straight->train_step(step).loss);
    Checkpoint ckpt;
    {
      auto first = testing::cpu_trainer(args(dir, saved_zero), data());
      for (int64_t step = 0; step < 3; ++step) first->train_step(step);
      ckpt = checkpoint_after(*first, dir, 3);
    }
    auto resumed = testing::cpu_trainer(args(dir, resumed_zero), data());
    ASSERT_EQ(resumed->restore(ckpt), 3);
    for (int64_t step = 3; step < 6; ++step) {
      EXPECT_EQ(resumed->train_step(step).loss, expected[static_cast<size_t>(step)])
          << "saved with --zero " << saved_zero << ", resumed with --zero " << resumed_zero << ", step " << step;
    }
    expect_identical_parameters(*resumed, *straight);
  }
}

TEST(ZeroOne, ShardedOptimizerStateMustMatchTheModel) {
  ScratchDir dir;
  auto run = testing::cpu_trainer(args(dir, "1"), data());
  run->train_step(0);
  Checkpoint ckpt = checkpoint_after(*run, dir, 1);
  ckpt.tensors.erase("optimizer.exp_avg.0.1");
  EXPECT_EQ(testing::invalid_argument_message([&] { run->restore(ckpt); }), "optimizer state lacks 'exp_avg.0.1'");
  ckpt = checkpoint_after(*run, dir, 1);
  ckpt.tensors["optimizer.exp_avg_sq.1.0"] = torch::zeros({3});
  EXPECT_EQ(testing::invalid_argument_message([&] { run->restore(ckpt); }),
            "optimizer state exp_avg_sq.1.0 does not match the model's shapes");
}

// --zero 2 and 3 in one process: with one rank their reductions divide by one, and the gradient shard
// adds the micro-steps in the order the buckets do, so every configuration is --zero 0's bit for bit:
// accumulation, recompute, clipping, dropout, a tied or untied head.
TEST(ZeroTwoAndThree, OneRankEqualsZeroZeroBitForBit) {
  const std::vector<std::vector<std::string>> configurations = {
      {"--grad-accum", "2", "--recompute", "block"},
      {"--grad-accum", "3", "--recompute", "mlp", "--tie-head", "false"},
      {"--grad-accum", "1"},
  };
  for (const auto& extra : configurations) {
    ScratchDir plain_dir;
    auto plain = testing::cpu_trainer(args(plain_dir, "0", "6", extra), data());
    std::vector<StepResult> expected;
    for (int64_t step = 0; step < 6; ++step) expected.push_back(plain->train_step(step));
    for (const std::string zero : {"2", "3"}) {
      ScratchDir dir;
      auto sharded = testing::cpu_trainer(args(dir, zero, "6", extra), data());
      for (int64_t step = 0; step < 6; ++step) {
        const StepResult r = sharded->train_step(step);
        EXPECT_EQ(r.loss, expected[static_cast<size_t>(step)].loss) << "--zero " << zero << " " << extra[1] << " step " << step;
        EXPECT_EQ(r.grad_norm, expected[static_cast<size_t>(step)].grad_norm) << "--zero " << zero << " step " << step;
      }
      const auto pa = plain->whole_parameters(), pb = sharded->whole_parameters();
      ASSERT_EQ(pa.size(), pb.size());
      for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "--zero " << zero << " parameter " << k;
    }
  }
}

// A checkpoint of --zero 3 (or 2) resumes at --zero 0 and the other way round, bit for bit, and holds
// --zero 0's tensors.
TEST(ZeroTwoAndThree, CheckpointsResumeAcrossStages) {
  for (const auto& [saved_zero, resumed_zero] :
       std::vector<std::pair<std::string, std::string>>{
           {"3", "0"}, {"0", "3"}, {"3", "3"}, {"2", "3"}, {"0", "2"}, {"2", "0"}, {"1", "3"}, {"3", "1"}}) {
    ScratchDir dir;
    auto straight = testing::cpu_trainer(args(dir, resumed_zero), data());
    std::vector<double> expected;
    for (int64_t step = 0; step < 6; ++step) expected.push_back(straight->train_step(step).loss);
    Checkpoint ckpt;
    {
      auto first = testing::cpu_trainer(args(dir, saved_zero), data());
      for (int64_t step = 0; step < 3; ++step) first->train_step(step);
      ckpt = checkpoint_after(*first, dir, 3);
    }
    auto resumed = testing::cpu_trainer(args(dir, resumed_zero), data());
    ASSERT_EQ(resumed->restore(ckpt), 3);
    for (int64_t step = 3; step < 6; ++step) {
      EXPECT_EQ(resumed->train_step(step).loss, expected[static_cast<size_t>(step)])
          << "saved with --zero " << saved_zero << ", resumed with --zero " << resumed_zero << ", step " << step;
    }
    const auto pa = resumed->whole_parameters(), pb = straight->whole_parameters();
    for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "parameter " << k;
  }
}

// Muon beside the sharded AdamW (--zero 1, 2, 3): each matrix's gradient gathered whole to its owner from
// the ranks' pieces (one rank here: all of them), its momentum kept there, and at --zero 3 its update
// applied to the parameter's pieces; the same numbers as Muon with --zero 0 in the same order, so bit for
// bit. Its checkpoint resumes at --zero 0 and the other way round.
TEST(ZeroMuon, OneRankEqualsZeroZeroBitForBitAndResumesAcrossStages) {
  const std::vector<std::string> muon = {"--optimizer", "muon"};
  ScratchDir plain_dir;
  auto plain = testing::cpu_trainer(args(plain_dir, "0", "6", muon), data());
  std::vector<StepResult> expected;
  for (int64_t step = 0; step < 6; ++step) expected.push_back(plain->train_step(step));
  for (const std::string zero : {"1", "2", "3"}) {
    ScratchDir dir;
    auto sharded = testing::cpu_trainer(args(dir, zero, "6", muon), data());
    for (int64_t step = 0; step < 6; ++step) {
      const StepResult r = sharded->train_step(step);
      EXPECT_EQ(r.loss, expected[static_cast<size_t>(step)].loss) << "--zero " << zero << " step " << step;
      EXPECT_EQ(r.grad_norm, expected[static_cast<size_t>(step)].grad_norm) << "--zero " << zero << " step " << step;
    }
    const auto pa = plain->whole_parameters(), pb = sharded->whole_parameters();
    for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "--zero " << zero << " parameter " << k;
  }
  for (const auto& [saved_zero, resumed_zero] :
       std::vector<std::pair<std::string, std::string>>{{"2", "0"}, {"0", "2"}, {"1", "2"}, {"3", "0"}, {"0", "3"}}) {
    ScratchDir dir;
    Checkpoint ckpt;
    {
      auto first = testing::cpu_trainer(args(dir, saved_zero, "6", muon), data());
      for (int64_t step = 0; step < 3; ++step) first->train_step(step);
      ckpt = checkpoint_after(*first, dir, 3);
    }
    int momenta = 0;
    for (const auto& [name, t] : ckpt.tensors) momenta += name.rfind("muon.momentum.", 0) == 0 ? 1 : 0;
    EXPECT_GT(momenta, 0) << "saved with --zero " << saved_zero;
    auto resumed = testing::cpu_trainer(args(dir, resumed_zero, "6", muon), data());
    ASSERT_EQ(resumed->restore(ckpt), 3);
    for (int64_t step = 3; step < 6; ++step) {
      EXPECT_EQ(resumed->train_step(step).loss, expected[static_cast<size_t>(step)].loss)
          << "Muon saved with --zero " << saved_zero << ", resumed with --zero " << resumed_zero << ", step " << step;
    }
    const auto pa = plain->whole_parameters(), pb = resumed->whole_parameters();
    for (size_t k = 0; k < pa.size(); ++k) EXPECT_TRUE(torch::equal(pa[k], pb[k])) << "parameter " << k;
  }
}

TEST(ZeroThree, RefusesWhatItDoesNotUse) {
  ScratchDir dir;
  EXPECT_EQ(testing::invalid_argument_message([&] {
              testing::cpu_trainer(args(dir, "3", "6", {"--bucket-mb", "2"}), data());
            }),
            "--bucket-mb has no effect with --zero 3 (each unit's gradients are reduce-scattered whole, not in buckets)");
  EXPECT_EQ(testing::invalid_argument_message([&] { testing::cpu_trainer(args(dir, "4"), data()); }),
            "--zero must be 0, 1, 2 or 3, got 4");
}

// Gradients of odd sizes (a parameter shorter than a piece, one of several pieces with a short last one,
// one of exactly two) in a synchronizer's buckets, as backward leaves them.
struct BucketedGradients {
  std::vector<torch::Tensor> params;
  std::unique_ptr<GradientSynchronizer> sync;
  BucketedGradients(size_t bucket_bytes, bool sharded, LocalCommunicator& comm) {
    torch::manual_seed(1);
    for (const auto& shape : std::vector<std::vector<int64_t>>{{3000}, {7}, {64, 40}, {2048}, {1, 1}}) {
      params.push_back(torch::zeros(shape, torch::requires_grad()));
    }
    sync = std::make_unique<GradientSynchronizer>(params, comm, bucket_bytes, /*overlap=*/false,
                                                  sharded ? GradientSharding::reduce_scatter : GradientSharding::none);
    // The gradients as the synchronizer binds them (views of their slots), not dropped as zero_grad leaves
    // them until backward: they are written here directly.
    torch::NoGradGuard no_grad;
    // Magnitudes spread over six decades, so the order of summation shows in the last bits.
    for (auto& p : params) p.mutable_grad().copy_(torch::randn(p.sizes()) * torch::exp(torch::randn(p.sizes()) * 3));
  }
};

// The norm of all gradients, to the bound of fp32 arithmetic. The result is sqrt(sum over P pieces of
// (sqrt(sum of the piece's n <= 1024 squares))^2), every operation rounded to fp32 (unit roundoff
// u = 2^-24): a sum of m terms of one sign is within (m - 1) u of the exact sum (to first order), squaring
// and sqrt add u each. The sum of squares is then within (1023 + P - 1 + 4) u of the exact one and its
// square root within half that: relative error <= (1026 + P) u / 2. The reference is in double.
TEST(GradientNorm, EqualsTheDoublePrecisionNormToFp32Bounds) {
  LocalCommunicator comm;
  BucketedGradients g(size_t{1} << 30, /*sharded=*/false, comm);
  double sum = 0;
  for (const auto& p : g.params) sum += p.grad().to(torch::kDouble).square().sum().item<double>();
  const double exact = std::sqrt(sum);
  const GradientNorm norm(*g.sync, comm, /*sharded=*/false);
  EXPECT_EQ(norm.pieces(), 3 + 1 + 3 + 2 + 1);
  const double u = std::ldexp(1.0, -24);
  const torch::Tensor computed = norm.compute();
  ASSERT_EQ(computed.scalar_type(), torch::kFloat);
  EXPECT_NEAR(computed.item<double>(), exact, (1026.0 + static_cast<double>(norm.pieces())) * u / 2 * exact);
}

// One bucket or one per parameter, sharded layout or not: the same numbers added in the same order.
TEST(GradientNorm, BitIdenticalWhateverTheBucketsAndSharding) {
  LocalCommunicator comm;
  BucketedGradients one_bucket(size_t{1} << 30, false, comm), many(1, false, comm), sharded(1, true, comm);
  ASSERT_EQ(many.sync->layout().size(), many.params.size());
  const torch::Tensor reference = GradientNorm(*one_bucket.sync, comm, false).compute();
  EXPECT_TRUE(torch::equal(GradientNorm(*many.sync, comm, false).compute(), reference));
  EXPECT_TRUE(torch::equal(GradientNorm(*sharded.sync, comm, true).compute(), reference));
}

}  // namespace
}  // namespace mygpt::zero_test
