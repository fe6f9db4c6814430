// The training step made ready for CUDA graph capture (the learning rate and fp16's loss scale read from
// device tensors, every micro-batch copied into fixed input tensors) trains bit for bit as the step did
// before, whose code is kept here as the reference: host scalars, the loader's batches used directly.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

#include "distributed/gradient_sync.h"
#include "tests/scratch_dir.h"
#include "tests/training_fixture.h"
#include "trainer/gradient_norm.h"
#include "model/mixed_precision.h"
#include "trainer/trainer.h"

namespace mygpt::graph_ready_step_test {
namespace {

constexpr int64_t kVocab = 23;

std::vector<std::string> args(const ScratchDir& dir, const std::string& precision) {
  return {"--preset",      "tiny", "--n-embd",     "35",  "--n-head",  "5",         "--block-size", "16",
          "--steps",       "5",    "--batch-size", "4",   "--seq-len", "16",        "--warmup-steps", "2",
          "--lr",          "1e-2", "--grad-clip",  "0.5", "--dropout", "0.1",       "--grad-accum", "2",
          "--eval-every",  "0",    "--device",     "cpu", "--seed",    "4",         "--precision",  precision,
          "--out",         dir.path().string()};
}

std::vector<std::string> args_for(const ScratchDir& dir, const std::string& precision) {
  std::vector<std::string> a = args(dir, precision);
  if (precision == "fp16") a.insert(a.end(), {"--loss-scale-init", "1024"});
  return a;
}

TrainingData data() { return testing::token_data(testing::random_tokens(3000, kVocab, 5), kVocab); }

// The step as Trainer::train_step wrote it before (one rank, AdamW, no stop signal): the rate and the
// loss scale as host doubles, the loader's batches as they come. The gradient norm is today's (its own
// tests are in test_zero.cpp), over a synchronizer with the run's buckets.
std::vector<double> reference_losses(Trainer& run, int64_t steps) {
  const TrainOptions& o = run.options();
  const auto params = run.model()->parameters();
  LocalCommunicator local;
  GradientSynchronizer sync(params, local, static_cast<size_t>(o.bucket_mb * (1 << 20)), o.ddp_overlap);
  const GradientNorm norm(sync, local, /*sharded=*/false);
  const LrSchedule schedule{o.lr, o.min_lr.value(), o.warmup_steps, o.steps};
  const double loss_scale = o.precision == Precision::fp16 ? o.loss_scale_init : 1.0;
  std::vector<double> losses;
  for (int64_t step = 0; step < steps; ++step) {
    run.model()->train();
    const double lr = schedule.at(step);
    run.optimizer().set_lr(lr);
    sync.zero_grad();
    auto loss_sum = torch::zeros({});
    for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
      Batch batch = run.train_loader().next(torch::kCPU);
      sync.begin_micro_step(micro == o.grad_accum - 1);
      torch::Tensor loss;
      {
        AutocastScope autocast(torch::kCPU, o.precision);
        loss = run.model()->loss(batch.x, batch.y) / static_cast<double>(o.grad_accum);
      }
      loss_sum += loss.detach();
      (loss_scale == 1.0 ? loss : loss * loss_scale).backward();
    }
    sync.finish();
    std::vector<torch::Tensor> gradients;
    for (const auto& p : params) gradients.push_back(p.grad());
    if (loss_scale != 1.0) torch::_foreach_mul_(gradients, 1.0 / loss_scale);
    const torch::Tensor grad_norm = norm.compute();
    torch::_foreach_mul_(gradients, torch::clamp_max(o.grad_clip / (grad_norm + 1e-6), 1.0));
    const torch::Tensor found_inf =
        torch::logical_not(torch::isfinite(grad_norm) & torch::isfinite(loss_sum)).to(torch::kFloat);
    run.optimizer().step(found_inf);
    EXPECT_EQ(found_inf.item<float>(), 0) << "the reference does not model skipped steps";
    losses.push_back(loss_sum.item<double>());
  }
  return losses;
}

TEST(GraphReadyStep, LossesBitForBitAsTheHostScalarStep) {
  for (const std::string precision : {"fp32", "fp16"}) {
    ScratchDir dir;
    // One run after the other: dropout draws from the one global generator, which building a run seeds.
    std::vector<double> ours;
    {
      auto run = testing::cpu_trainer(args_for(dir, precision), data());
      for (int64_t step = 0; step < 5; ++step) {
        const StepResult r = run->train_step(step);
        ASSERT_FALSE(r.skipped) << precision << " step " << step;
        EXPECT_EQ(r.loss_scale, precision == "fp16" ? 1024 : 1);
        ours.push_back(r.loss);
      }
    }
    auto reference_run = testing::cpu_trainer(args_for(dir, precision), data());
    const std::vector<double> expected = reference_losses(*reference_run, 5);
    for (size_t step = 0; step < 5; ++step) EXPECT_EQ(ours[step], expected[step]) << precision << " step " << step;
    EXPECT_LT(ours.back(), ours.front()) << "the runs must learn for the comparison to mean something";
  }
}

}  // namespace
}  // namespace mygpt::graph_ready_step_test
