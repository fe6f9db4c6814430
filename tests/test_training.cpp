// The single-process trainer: LR schedule, AdamW (fused, unfused, against LibTorch's), clipping,
// gradient accumulation, determinism and the training loop's outputs.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "dataloader/batch_loader.h"
#include "dataloader/token_source.h"
#include "distributed/communicator.h"
#include "model/gpt.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "tests/training_fixture.h"
#include "trainer/adamw.h"
#include "trainer/lr_schedule.h"
#include "trainer/run_output.h"
#include "trainer/train_options.h"
#include "trainer/trainer.h"
#include "eval/validation_batches.h"

namespace mygpt::training_test {
namespace {

namespace fs = std::filesystem;
using testing::cpu_trainer;

template <typename F>
std::string runtime_error_message(F&& f) {
  return testing::exception_message<std::runtime_error>(std::forward<F>(f));
}
using testing::token_data;

constexpr int64_t kVocab = 23;
constexpr int64_t kSeqLen = 16;

std::shared_ptr<InMemoryTokens> random_tokens(size_t n, uint64_t seed = 11) {
  return testing::random_tokens(n, kVocab, seed);
}

std::shared_ptr<InMemoryTokens> pattern_tokens(size_t n) { return testing::pattern_tokens(n, kVocab); }

// A tiny model (2 layers, 2 heads, 32 wide, block 16) and a short schedule; `changes` replace flags.
std::vector<std::string> small_args(const fs::path& out, const std::map<std::string, std::string>& changes = {}) {
  std::map<std::string, std::string> flags = {
      {"preset", "tiny"},      {"block-size", "16"},  {"steps", "10"},     {"batch-size", "4"},
      {"seq-len", "16"},       {"lr", "1e-3"},        {"min-lr", "1e-4"},  {"warmup-steps", "2"},
      {"weight-decay", "0.1"}, {"grad-clip", "1.0"},  {"eval-every", "0"},
      {"log-every", "1000"},   {"out", out.string()}, {"device", "cpu"},   {"seed", "0"}};
  for (const auto& [name, value] : changes) flags[name] = value;
  return testing::flag_args(flags);
}

double grad_norm(const std::vector<torch::Tensor>& params) {
  double sum = 0;
  for (const auto& p : params) {
    if (p.grad().defined()) sum += p.grad().pow(2).sum().item<double>();
  }
  return std::sqrt(sum);
}

void expect_same_parameters(Gpt& a, Gpt& b, double tolerance) {
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    const auto& other = pb[item.key()];
    const double diff = (item.value() - other).abs().max().item<double>();
    EXPECT_LE(diff, tolerance) << item.key();
  }
}

// ---------------------------------------------------------------------------------------------
// LrSchedule

TEST(LrSchedule, WarmupCosineAndFloor) {
  const LrSchedule s{1e-3, 1e-4, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 1e-3 / 10);  // the first step already trains
  EXPECT_DOUBLE_EQ(s.at(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);  // warmup end: the peak
  for (int64_t step = 1; step < 10; ++step) {
    EXPECT_NEAR(s.at(step) - s.at(step - 1), 1e-4, 1e-15) << step;  // linear
  }
  EXPECT_NEAR(s.at(60), (1e-3 + 1e-4) / 2, 1e-15);  // cosine midpoint
  for (int64_t step = 11; step <= 110; ++step) EXPECT_LT(s.at(step), s.at(step - 1)) << step;
  EXPECT_NEAR(s.at(35), 1e-4 + 0.5 * (1 + std::cos(std::numbers::pi * 0.25)) * 9e-4, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(110), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(111), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(100000), 1e-4);

  const LrSchedule no_warmup{2e-3, 0.0, 0, 50};
  EXPECT_DOUBLE_EQ(no_warmup.at(0), 2e-3);
  EXPECT_NEAR(no_warmup.at(25), 1e-3, 1e-15);
  EXPECT_DOUBLE_EQ(no_warmup.at(50), 0.0);
}

// ---------------------------------------------------------------------------------------------
// AdamW

struct ParamSet {
  std::vector<torch::Tensor> decay, no_decay;
  std::vector<torch::Tensor> all() const {
    auto out = decay;
    out.insert(out.end(), no_decay.begin(), no_decay.end());
    return out;
  }
};

ParamSet make_params(uint64_t seed) {
  torch::manual_seed(seed);
  ParamSet s;
  s.decay = {torch::randn({5, 7}).requires_grad_(), torch::randn({3, 4}).requires_grad_()};
  s.no_decay = {torch::randn({7}).requires_grad_(), torch::randn({4}).requires_grad_()};
  return s;
}

// The same pseudo-random gradients for every copy of the parameters, drawn per step.
void set_gradients(const std::vector<std::vector<torch::Tensor>>& copies, int step) {
  torch::manual_seed(1000 + step);
  const size_t n = copies.front().size();
  for (size_t i = 0; i < n; ++i) {
    auto g = torch::randn(copies.front()[i].sizes()) * (0.1 * (step + 1));
    for (const auto& params : copies) params[i].mutable_grad() = g.clone();
  }
}

TEST(AdamW, FusedUnfusedAndLibTorchAgree) {
  const AdamWOptions options{3e-3, 0.9, 0.95, 1e-8, 0.1};
  ParamSet fused_p = make_params(1), unfused_p = make_params(1), ref_p = make_params(1);
  AdamW fused(fused_p.decay, fused_p.no_decay, options, /*use_fused=*/true);
  AdamW unfused(unfused_p.decay, unfused_p.no_decay, options, /*use_fused=*/false);
  // LibTorch's own AdamW, one optimizer per group.
  torch::optim::AdamW ref_decay(ref_p.decay,
                                torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  torch::optim::AdamW ref_no_decay(ref_p.no_decay,
                                   torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.0));
  const auto initial = make_params(1).all();
  for (int step = 0; step < 6; ++step) {
    set_gradients({fused_p.all(), unfused_p.all(), ref_p.all()}, step);
    fused.step();
    unfused.step();
    ref_decay.step();
    ref_no_decay.step();
  }
  EXPECT_EQ(fused.steps_taken(), 6);
  const auto f = fused_p.all(), u = unfused_p.all(), r = ref_p.all();
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_GT((f[i] - initial[i]).abs().max().item<double>(), 1e-3) << i;  // the parameters did move
    EXPECT_LE((f[i] - u[i]).abs().max().item<double>(), 1e-6) << "fused vs unfused, tensor " << i;
    EXPECT_LE((f[i] - r[i]).abs().max().item<double>(), 1e-6) << "fused vs LibTorch, tensor " << i;
  }
}

// The rate reaches the fused kernel as a device tensor (ready for CUDA graph replay); on the CPU the
// update must stay bit for bit the one of the double overload it replaced, kept here as the reference.
TEST(AdamW, DeviceLearningRateUpdatesBitForBitLikeTheDoubleOverload) {
  const AdamWOptions options{3e-3, 0.9, 0.95, 1e-8, 0.1};
  ParamSet ours_p = make_params(2), ref_p = make_params(2);
  AdamW ours(ours_p.decay, ours_p.no_decay, options);
  std::vector<std::vector<torch::Tensor>> ref_groups{ref_p.decay, ref_p.no_decay}, exp_avg(2), exp_avg_sq(2), steps(2);
  for (size_t g = 0; g < 2; ++g) {
    for (const auto& p : ref_groups[g]) {
      exp_avg[g].push_back(torch::zeros_like(p));
      exp_avg_sq[g].push_back(torch::zeros_like(p));
      steps[g].push_back(torch::zeros({}));
    }
  }
  for (int step = 0; step < 5; ++step) {
    // A new rate every step: a rate the kernel did not see (set_lr not reaching the device) shows.
    const double lr = 3e-3 * (step + 1) / 7.0;
    set_gradients({ours_p.all(), ref_p.all()}, step);
    ours.set_lr(lr);
    ours.step();
    torch::NoGradGuard no_grad;
    for (size_t g = 0; g < 2; ++g) {
      std::vector<torch::Tensor> grads;
      for (const auto& p : ref_groups[g]) grads.push_back(p.grad());
      torch::_foreach_add_(steps[g], 1);
      at::_fused_adamw_(ref_groups[g], grads, exp_avg[g], exp_avg_sq[g], {}, steps[g], lr, 0.9, 0.95,
                        g == 0 ? 0.1 : 0.0, 1e-8, false, false);
    }
  }
  const auto o = ours_p.all(), r = ref_p.all();
  for (size_t i = 0; i < o.size(); ++i) EXPECT_TRUE(torch::equal(o[i], r[i])) << "tensor " << i;
}

TEST(AdamW, WeightDecayOnlyTouchesTheDecayGroup) {
  for (bool use_fused : {true, false}) {
    auto decayed = torch::full({4, 3}, 2.0).requires_grad_();
    auto undecayed = torch::full({3}, 2.0).requires_grad_();
    auto untouched = torch::full({2, 2}, 2.0).requires_grad_();  // decay group, but no gradient
    AdamW optimizer({decayed, untouched}, {undecayed}, AdamWOptions{0.1, 0.9, 0.95, 1e-8, 0.5}, use_fused);
    decayed.mutable_grad() = torch::zeros_like(decayed);
    undecayed.mutable_grad() = torch::zeros_like(undecayed);
    optimizer.step();
    // A zero gradient leaves Adam's update at zero; decoupled decay shrinks by lr * wd = 5%.
    EXPECT_TRUE(torch::allclose(decayed, torch::full({4, 3}, 2.0 * 0.95), 0, 1e-6)) << "fused " << use_fused;
    EXPECT_TRUE(torch::equal(undecayed, torch::full({3}, 2.0))) << "fused " << use_fused;
    EXPECT_TRUE(torch::equal(untouched, torch::full({2, 2}, 2.0))) << "fused " << use_fused;

    optimizer.set_lr(0.2);
    EXPECT_DOUBLE_EQ(optimizer.lr(), 0.2);
    optimizer.step();
    EXPECT_TRUE(torch::allclose(decayed, torch::full({4, 3}, 2.0 * 0.95 * 0.9), 0, 1e-6)) << "fused " << use_fused;

    optimizer.zero_grad();
    EXPECT_FALSE(decayed.grad().defined());
    EXPECT_FALSE(undecayed.grad().defined());
  }
}

// ---------------------------------------------------------------------------------------------
// Trainer

TEST(Trainer, ReportsThePreClipNormAndClips) {
  ScratchDir dir;
  auto tokens = random_tokens(2000);
  auto run = cpu_trainer(small_args(dir.path(), {{"grad-clip", "0.05"}, {"seed", "3"}}), token_data(tokens, kVocab));
  const TrainOptions& options = run->options();

  // The same model and first batch, by hand: the unclipped gradient norm.
  torch::manual_seed(3);
  Gpt reference(run->model()->config());
  ShardedBatchLoader loader(tokens, options.batch_size, options.seq_len);
  Batch batch = loader.next(torch::kCPU);
  reference->loss(batch.x, batch.y).backward();
  const double expected_norm = grad_norm(reference->parameters());
  ASSERT_GT(expected_norm, 2 * options.grad_clip) << "the test needs a gradient that gets clipped";

  const StepResult r = run->train_step(0);
  EXPECT_NEAR(r.grad_norm, expected_norm, 1e-4 * expected_norm);
  EXPECT_LE(grad_norm(run->model()->parameters()), options.grad_clip * (1 + 1e-5));
  EXPECT_NEAR(grad_norm(run->model()->parameters()), options.grad_clip, 1e-3 * options.grad_clip);
  EXPECT_DOUBLE_EQ(r.lr, (LrSchedule{options.lr, *options.min_lr, options.warmup_steps, options.steps}.at(0)));
  EXPECT_NEAR(r.loss, reference->loss(batch.x, batch.y).item<double>(), 1e-6);
}

TEST(Trainer, ClippingDisabledKeepsTheGradient) {
  ScratchDir dir;
  auto run = cpu_trainer(small_args(dir.path(), {{"grad-clip", "0"}}), token_data(random_tokens(2000), kVocab));
  const StepResult r = run->train_step(0);
  EXPECT_GT(r.grad_norm, 0);
  EXPECT_NEAR(grad_norm(run->model()->parameters()), r.grad_norm, 1e-5 * r.grad_norm);
}

TEST(Trainer, AccumulationEqualsOneBigBatch) {
  ScratchDir dir;
  const TrainingData data = token_data(random_tokens(16 * kSeqLen * 6 + 1), kVocab);
  // Sequential, to count chunks below (10 steps read these tokens 1.7 times, which auto would shuffle).
  auto a = cpu_trainer(small_args(dir.path(), {{"batch-size", "8"}, {"grad-accum", "2"}, {"data-order", "sequential"}}), data);
  auto b = cpu_trainer(small_args(dir.path(), {{"batch-size", "16"}, {"grad-accum", "1"}, {"data-order", "sequential"}}), data);
  for (int64_t step = 0; step < 4; ++step) {
    const StepResult ra = a->train_step(step);
    const StepResult rb = b->train_step(step);
    EXPECT_NEAR(ra.loss, rb.loss, 1e-5) << "step " << step;
    EXPECT_NEAR(ra.grad_norm, rb.grad_norm, 1e-5 * rb.grad_norm) << "step " << step;
    EXPECT_EQ(ra.lr, rb.lr);
  }
  expect_same_parameters(a->model(), b->model(), 1e-5);
  // Both read the same tokens: two half chunks per step against one whole chunk.
  EXPECT_EQ(static_cast<ShardedBatchLoader&>(a->train_loader()).position(), 8u);
  EXPECT_EQ(static_cast<ShardedBatchLoader&>(b->train_loader()).position(), 4u);
}

TEST(Trainer, ValidationScoresEachBatchOnceWhenAskedForMore) {
  // Three whole batches of validation data and --eval-steps 50: the loader would wrap around and weigh
  // the batches 17:17:16; the pass scores each once and says so.
  ScratchDir dir;
  const auto val = random_tokens(3 * 4 * kSeqLen + 1, 29);
  auto run = cpu_trainer(small_args(dir.path(), {{"eval-every", "5"}, {"eval-steps", "50"}}),
                         token_data(random_tokens(2000), kVocab, val));
  ShardedBatchLoader loader(val, 4, kSeqLen);
  const ValidationBatches batches = validation_batches(50, loader);
  EXPECT_EQ(batches.count, 3);
  EXPECT_NE(batches.note.find("--eval-steps 50"), std::string::npos) << batches.note;
  EXPECT_TRUE(validation_batches(3, loader).note.empty());
  torch::NoGradGuard no_grad;
  run->model()->eval();
  double by_hand = 0;
  for (int i = 0; i < 3; ++i) {
    const Batch batch = loader.next(torch::kCPU);
    by_hand += run->model()->loss(batch.x, batch.y).item<double>() / 3;
  }
  // fp32 losses summed in another order: a few units of fp32's rounding.
  EXPECT_NEAR(run->evaluate(), by_hand, 8 * std::numeric_limits<float>::epsilon() * by_hand);
}

std::vector<double> losses_of_run(uint64_t seed, const fs::path& out) {
  auto run = cpu_trainer(small_args(out, {{"data-order", "random"}, {"seed", std::to_string(seed)}}),
                         token_data(random_tokens(3000), kVocab));
  std::vector<double> losses;
  for (int64_t step = 0; step < 5; ++step) losses.push_back(run->train_step(step).loss);
  // The parameters' sum as a last, exact fingerprint of the run.
  double fingerprint = 0;
  for (const auto& p : run->model()->parameters()) fingerprint += p.sum().item<double>();
  losses.push_back(fingerprint);
  return losses;
}

TEST(Trainer, SameSeedSameLossesBitForBit) {
  ScratchDir dir;
  const auto first = losses_of_run(1337, dir.path());
  const auto second = losses_of_run(1337, dir.path());
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], second[i]) << "entry " << i;  // exact
  EXPECT_NE(losses_of_run(1338, dir.path()), first);                                          // the seed does matter
}

TEST(Trainer, RunLogsMetricsValidatesAndCheckpoints) {
  ScratchDir dir;
  auto run = cpu_trainer(
      small_args(dir.path() / "out", {{"steps", "6"}, {"lr", "1e-2"}, {"eval-every", "3"}, {"eval-steps", "2"}, {"checkpoint-every", "4"}}),
      token_data(pattern_tokens(4000), kVocab, pattern_tokens(500)));
  run->output().open_metrics(/*append=*/false);

  const double val_before = run->evaluate();
  EXPECT_EQ(run->evaluate(), val_before);  // the same validation batches each time
  const TrainSummary summary = run->run(0);
  EXPECT_EQ(summary.steps_run, 6);
  EXPECT_LT(summary.last_loss, summary.first_loss);
  EXPECT_GT(summary.last_val_loss, 0);
  EXPECT_LT(summary.last_val_loss, val_before);

  std::ifstream metrics(dir.path() / "out" / "metrics.jsonl");
  int loss_records = 0, val_records = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("val_loss")) {
      ++val_records;
    } else {
      ++loss_records;
      for (const char* key : {"step", "loss", "lr", "grad_norm", "dt_ms", "tok_per_sec"}) {
        EXPECT_TRUE(record.contains(key)) << key << " in " << line;
      }
    }
  }
  EXPECT_EQ(loss_records, 6);
  EXPECT_EQ(val_records, 3);  // steps 0, 3 and the last
  EXPECT_TRUE(fs::exists(checkpoint_path(dir.path() / "out", 4)));
  EXPECT_TRUE(fs::exists(checkpoint_path(dir.path() / "out", 6)));
  EXPECT_EQ(latest_checkpoint(dir.path() / "out").value_or("").string(),
            checkpoint_path(dir.path() / "out", 6).string());
}

// Benchmarks end without the final checkpoint (GPT-2's is 1.5 GB); periodic ones are still written.
TEST(Trainer, NoFinalCheckpointWhenAskedForNone) {
  ScratchDir dir;
  auto run = cpu_trainer(small_args(dir.path(), {{"steps", "3"}, {"checkpoint-every", "2"}, {"final-checkpoint", "false"}}),
                         token_data(random_tokens(2000), kVocab));
  EXPECT_FALSE(run->options().final_checkpoint);
  EXPECT_EQ(run->run(0).steps_run, 3);
  EXPECT_TRUE(fs::exists(checkpoint_path(dir.path(), 2)));
  EXPECT_FALSE(fs::exists(checkpoint_path(dir.path(), 3)));
  EXPECT_EQ(list_checkpoints(dir.path()).size(), 1u);
}

TEST(Trainer, NonFiniteStepsAreSkippedAndTooManyStopTheRun) {
  ScratchDir dir;
  auto run = cpu_trainer(small_args(dir.path(), {{"max-bad-steps", "2"}, {"checkpoint-every", "0"}}),
                         token_data(random_tokens(2000), kVocab));
  Gpt& model = run->model();
  torch::Tensor cell = model->wte->weight[0][0];
  const float original = cell.item<float>();
  auto snapshot = [&] {
    std::vector<torch::Tensor> copies;
    for (const auto& p : model->parameters()) copies.push_back(p.detach().clone());
    return copies;
  };
  {
    torch::NoGradGuard no_grad;
    cell.fill_(std::numeric_limits<float>::quiet_NaN());  // every logit of token 0 becomes NaN
  }
  const auto before = snapshot();
  const StepResult bad = run->train_step(0);
  EXPECT_TRUE(bad.skipped);
  EXPECT_FALSE(std::isfinite(bad.loss));
  const auto after = snapshot();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i].nan_to_num(), after[i].nan_to_num()));
  EXPECT_EQ(run->optimizer().steps_taken(), 0);
  {
    torch::NoGradGuard no_grad;
    cell.fill_(original);
  }
  const StepResult good = run->train_step(1);
  EXPECT_FALSE(good.skipped);
  EXPECT_TRUE(std::isfinite(good.loss));
  EXPECT_EQ(run->optimizer().steps_taken(), 1);

  // Two bad steps in a row end the run; weights that are not finite are no good weights to save.
  {
    torch::NoGradGuard no_grad;
    cell.fill_(std::numeric_limits<float>::quiet_NaN());
  }
  run->output().open_metrics(/*append=*/false);
  const std::string message = runtime_error_message([&] { run->run(2); });
  EXPECT_NE(message.find("2 steps in a row had a non-finite loss or gradient norm (lower --lr?); stopped; the weights "
                         "themselves give a non-finite loss, so they were not saved (no checkpoint)"),
            std::string::npos) << message;
  EXPECT_FALSE(latest_checkpoint(dir.path()).has_value());
  EXPECT_EQ(run->optimizer().steps_taken(), 1);
}

// The case: an update blew the weights up to 1e30, finite, but the loss on them is not. They
// are not saved as "the last good weights" (generate could not sample from them); the message names the
// newest checkpoint there is instead.
TEST(Trainer, WeightsThatGiveANonFiniteLossAreNotSavedAsGood) {
  ScratchDir dir;
  auto run = cpu_trainer(small_args(dir.path(), {{"max-bad-steps", "2"}, {"checkpoint-every", "1"}, {"steps", "6"}}),
                         token_data(random_tokens(2000), kVocab));
  run->output().open_metrics(/*append=*/false);
  run->run(0);  // ckpt 1 .. 6
  {
    torch::NoGradGuard no_grad;
    for (auto& p : run->model()->parameters()) p.fill_(1e30);
  }
  const std::string message = runtime_error_message([&] { run->run(6 - 3); });
  EXPECT_NE(message.find("so they were not saved (the newest checkpoint is " + checkpoint_path(dir.path(), 6).string() +
                         ")"),
            std::string::npos) << message;
  // What was there is untouched: step 4's file (the two bad steps 3 and 4 would have written it) is the
  // good run's.
  EXPECT_EQ(load_checkpoint(checkpoint_path(dir.path(), 4)).tensors.at("model.wte.weight").abs().max().item<float>() <
                1e29,
            true);
}

// Gradients that overflow on finite weights with a finite loss (as an fp16 backward's do) leave the
// weights good: then the run stops with a checkpoint of them.
TEST(Trainer, BadGradientsOnGoodWeightsStopWithTheirCheckpoint) {
  ScratchDir dir;
  ::setenv("MYGPT_TEST_INJECT_OVERFLOW", "0:2,0:3", 1);
  auto run = cpu_trainer(small_args(dir.path(), {{"max-bad-steps", "2"}, {"checkpoint-every", "0"}}),
                         token_data(random_tokens(2000), kVocab));
  ::unsetenv("MYGPT_TEST_INJECT_OVERFLOW");
  run->output().open_metrics(/*append=*/false);
  const std::string message = runtime_error_message([&] { run->run(0); });
  EXPECT_NE(message.find("stopped with a checkpoint of the last good weights at step 4"), std::string::npos) << message;
  EXPECT_EQ(run->optimizer().steps_taken(), 2);
  const Checkpoint saved = load_checkpoint(checkpoint_path(dir.path(), 4));
  for (const auto& [name, tensor] : part_state(saved.tensors, "model")) {
    EXPECT_TRUE(torch::isfinite(tensor).all().item<bool>()) << name;
  }
}

// By default a run checkpoints at each evaluation (a kill -9 loses one interval at most) and keeps the
// newest two of those.
TEST(Trainer, CheckpointsFollowTheEvaluationsByDefault) {
  ScratchDir dir;
  auto args = small_args(dir.path(), {{"steps", "7"}, {"eval-every", "2"}, {"eval-steps", "1"}});
  auto run = cpu_trainer(args, token_data(pattern_tokens(4000), kVocab, pattern_tokens(500)));
  run->output().open_metrics(/*append=*/false);
  run->run(0);
  EXPECT_EQ(list_checkpoints(dir.path()),
            (std::vector<fs::path>{checkpoint_path(dir.path(), 6), checkpoint_path(dir.path(), 7)}));
}

TEST(Trainer, TheLastEvaluationSeesTheSavedWeights) {
  ScratchDir dir;
  auto run = cpu_trainer(small_args(dir.path() / "out", {{"steps", "4"}, {"eval-every", "2"}, {"eval-steps", "2"}, {"lr", "1e-2"}}),
                         token_data(pattern_tokens(4000), kVocab, pattern_tokens(500)));
  run->output().open_metrics(/*append=*/false);
  const TrainSummary summary = run->run(0);
  std::vector<int64_t> val_steps;
  std::ifstream metrics(dir.path() / "out" / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("val_loss")) val_steps.push_back(record["step"].get<int64_t>());
  }
  EXPECT_EQ(val_steps, (std::vector<int64_t>{0, 2, 4}));  // 4: after the last step
  // The final validation loss is that of the saved model.
  const Checkpoint saved = load_checkpoint(checkpoint_path(dir.path() / "out", 4));
  auto fresh = cpu_trainer(small_args(dir.path() / "other", {{"steps", "4"}, {"eval-every", "2"}, {"eval-steps", "2"}}),
                           token_data(pattern_tokens(4000), kVocab, pattern_tokens(500)));
  fresh->restore(saved);
  EXPECT_EQ(fresh->evaluate(), summary.last_val_loss);
}

}  // namespace
}  // namespace mygpt::training_test
