// fp16 training: the dynamic loss scale (against PyTorch's rule), its checkpoint state, and the trainer
// with --precision fp16 on the CPU: close to fp32, overflows skipped with the scale backing off and
// growing again, overflow-only skips not counted as bad steps, and bit-exact resume with the scale.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/reference_python.h"
#include "tests/scratch_dir.h"
#include "tests/training_fixture.h"
#include "trainer/checkpoint.h"
#include "trainer/loss_scaler.h"
#include "trainer/trainer.h"

namespace mygpt::loss_scaler_test {
namespace {

namespace fs = std::filesystem;
using testing::cpu_trainer;
using testing::token_data;

constexpr int64_t kVocab = 23;

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterTheInterval) {
  LossScaler scaler({.init_scale = 1024, .growth_interval = 3});
  EXPECT_EQ(scaler.scale(), 1024);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512);
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_EQ(scaler.good_steps(), 2);
  scaler.update(true);  // an overflow restarts the count
  EXPECT_EQ(scaler.good_steps(), 0);
  for (int i = 0; i < 3; ++i) scaler.update(false);
  EXPECT_EQ(scaler.scale(), 512);  // 256 after the overflow, doubled after 3 good steps
  EXPECT_EQ(scaler.good_steps(), 0);
  // Growth stops where fp32 ends, as GradScaler's fp32 scale does.
  LossScaler big({.init_scale = 2e38, .growth_interval = 1});
  big.update(false);
  EXPECT_EQ(big.scale(), 2e38);
}

TEST(LossScaler, FollowsPyTorchsUpdateRule) {
  if (!testing::python_imports("torch")) GTEST_SKIP() << "no Python with torch to compare with";
  ScratchDir dir;
  // A pattern of overflows with runs of good steps shorter than, equal to and longer than the interval.
  std::string pattern;
  for (int i = 0; i < 60; ++i) pattern += (i % 11 == 3 || i % 17 == 0 || i == 40 || i == 41) ? '1' : '0';
  const fs::path script = dir.path() / "update_scale.py";
  std::ofstream(script) << "import json, sys, torch\n"
                           "scale = torch.full((1,), 32768.0); tracker = torch.zeros(1, dtype=torch.int32)\n"
                           "out = []\n"
                           "for c in sys.argv[1]:\n"
                           "    torch._amp_update_scale_(scale, tracker, torch.full((1,), float(c)), 2.0, 0.5, 4)\n"
                           "    out.append([scale.item(), int(tracker.item())])\n"
                           "print(json.dumps(out))\n";
  const auto expected = testing::run_python_json(script.string(), {pattern}, dir.path());
  ASSERT_EQ(expected.size(), pattern.size());
  LossScaler scaler({.init_scale = 32768, .growth_interval = 4});
  for (size_t i = 0; i < pattern.size(); ++i) {
    scaler.update(pattern[i] == '1');
    EXPECT_EQ(scaler.scale(), expected[i][0].get<double>()) << "step " << i;
    EXPECT_EQ(scaler.good_steps(), expected[i][1].get<int64_t>()) << "step " << i;
  }
}

TEST(LossScaler, StateRoundTripsAndBadStateIsRefused) {
  LossScaler a({.init_scale = 1024, .growth_interval = 5});
  a.update(true);
  a.update(false);
  a.update(false);
  LossScaler b({.init_scale = 8, .growth_interval = 5});
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.scale(), 512);
  EXPECT_EQ(b.good_steps(), 2);
  auto with = [&](const std::string& key, torch::Tensor value) {
    StateDict state = a.state_dict();
    state[key] = std::move(value);
    return state;
  };
  EXPECT_THROW(b.load_state_dict({}), std::invalid_argument);
  EXPECT_THROW(b.load_state_dict(with("scale", torch::tensor({0.0}, torch::kDouble))), std::invalid_argument);
  EXPECT_THROW(b.load_state_dict(with("scale", torch::tensor({NAN}, torch::kDouble))), std::invalid_argument);
  EXPECT_THROW(b.load_state_dict(with("scale", torch::tensor({1e39}, torch::kDouble))), std::invalid_argument);
  EXPECT_THROW(b.load_state_dict(with("scale", torch::tensor({512.0f}))), std::invalid_argument);  // fp32, not fp64
  EXPECT_THROW(b.load_state_dict(with("good_steps", torch::tensor({int64_t{-1}}))), std::invalid_argument);
  EXPECT_THROW(b.load_state_dict(with("extra", torch::tensor({1.0}))), std::invalid_argument);
  EXPECT_EQ(b.scale(), 512);  // a refused state changes nothing
}

std::shared_ptr<InMemoryTokens> pattern_tokens(size_t n) { return testing::pattern_tokens(n, kVocab); }

std::vector<std::string> fp16_args(const fs::path& out, const std::map<std::string, std::string>& changes = {}) {
  std::map<std::string, std::string> flags = {
      {"preset", "tiny"},    {"block-size", "16"},  {"steps", "12"},
      {"batch-size", "4"},   {"seq-len", "16"},     {"lr", "1e-2"},
      {"min-lr", "1e-3"},    {"warmup-steps", "2"}, {"eval-every", "0"},
      {"log-every", "1000"}, {"device", "cpu"},     {"seed", "5"},
      {"out", out.string()}, {"precision", "fp16"}, {"data-order", "sequential"}};
  for (const auto& [name, value] : changes) flags[name] = value;
  return testing::flag_args(flags);
}

// MYGPT_TEST_INJECT_OVERFLOW for the trainers built while it lives (launcher/run_builder.cpp reads it).
class InjectedOverflows {
 public:
  explicit InjectedOverflows(const std::string& spec) { ::setenv("MYGPT_TEST_INJECT_OVERFLOW", spec.c_str(), 1); }
  ~InjectedOverflows() { ::unsetenv("MYGPT_TEST_INJECT_OVERFLOW"); }
};

std::vector<torch::Tensor> snapshot(Gpt& model) {
  std::vector<torch::Tensor> copies;
  for (const auto& p : model->parameters()) copies.push_back(p.detach().clone());
  return copies;
}

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

TEST(Fp16Training, TrainsLikeFp32OnTheCpu) {
  ScratchDir dir;
  const TrainingData data = token_data(pattern_tokens(6000), kVocab);
  auto half = cpu_trainer(fp16_args(dir.path() / "a"), data);
  auto full = cpu_trainer(fp16_args(dir.path() / "b", {{"precision", "fp32"}}), data);
  EXPECT_EQ(half->options().precision, Precision::fp16);
  std::vector<double> half_losses;
  for (int64_t step = 0; step < 12; ++step) {
    const StepResult h = half->train_step(step);
    const StepResult f = full->train_step(step);
    EXPECT_FALSE(h.skipped) << "step " << step;
    EXPECT_EQ(h.loss_scale, 65536) << "step " << step;
    EXPECT_EQ(f.loss_scale, 1) << "step " << step;
    // fp16 rounding of activations, not more: the same run to 1%.
    EXPECT_NEAR(h.loss, f.loss, 1e-2 * f.loss) << "step " << step;
    half_losses.push_back(h.loss);
  }
  EXPECT_LT(half_losses.back(), half_losses.front() - 0.3);
}

TEST(Fp16Training, AnOverflowSkipsTheStepHalvesTheScaleAndGoodStepsGrowIt) {
  ScratchDir dir;
  InjectedOverflows inject("0:1,1:2,0:4");  // rank 1 does not exist here: only steps 1 and 4
  auto run = cpu_trainer(fp16_args(dir.path(), {{"loss-scale-init", "1024"}, {"loss-scale-growth-interval", "2"}}),
                         token_data(pattern_tokens(6000), kVocab));
  const std::vector<double> expected_scale = {1024, 1024, 512, 512, 1024, 512, 512};
  const std::vector<bool> expected_skip = {false, true, false, false, true, false, false};
  for (int64_t step = 0; step < 7; ++step) {
    const auto before = snapshot(run->model());
    const int64_t taken = run->optimizer().steps_taken();
    const StepResult r = run->train_step(step);
    EXPECT_EQ(r.loss_scale, expected_scale[step]) << "step " << step;
    EXPECT_EQ(r.skipped, expected_skip[step]) << "step " << step;
    EXPECT_TRUE(std::isfinite(r.loss)) << "step " << step;  // the loss itself never overflowed
    // A skipped step leaves the weights and AdamW's step count as they were.
    EXPECT_EQ(same(before, snapshot(run->model())), r.skipped) << "step " << step;
    EXPECT_EQ(run->optimizer().steps_taken(), taken + (r.skipped ? 0 : 1)) << "step " << step;
  }
}

TEST(Fp16Training, OverflowsAreNotBadStepsUntilTheScaleIsDownToOne) {
  ScratchDir dir;
  InjectedOverflows inject("0:0,0:1,0:2,0:3");
  const TrainingData data = token_data(pattern_tokens(6000), kVocab);
  // Four overflows in a row with --max-bad-steps 2: the scale backs off from 64 to 4, and the run goes on.
  auto run = cpu_trainer(
      fp16_args(dir.path() / "a", {{"loss-scale-init", "64"}, {"max-bad-steps", "2"}, {"steps", "6"}}), data);
  run->output().open_metrics(/*append=*/false);
  const TrainSummary summary = run->run(0);
  EXPECT_EQ(summary.steps_run, 6);
  EXPECT_EQ(summary.steps_skipped, 4);
  // At scale 1 and below an overflow is a bad step: two of them stop the run.
  auto low = cpu_trainer(
      fp16_args(dir.path() / "b", {{"loss-scale-init", "2"}, {"max-bad-steps", "2"}, {"steps", "6"}}), data);
  low->output().open_metrics(/*append=*/false);
  EXPECT_THROW(low->run(0), std::runtime_error);  // 2 (not bad), 1 (bad), 0.5 (bad): stopped
  EXPECT_EQ(low->optimizer().steps_taken(), 0);
}

// The losses, loss scales and skips of a run's metrics.jsonl, one line per step.
std::vector<std::string> step_records(const fs::path& metrics) {
  std::vector<std::string> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto r = nlohmann::json::parse(line);
    if (!r.contains("loss")) continue;
    out.push_back(std::to_string(r["step"].get<int64_t>()) + " " + r["loss"].dump() + " " + r["loss_scale"].dump() +
                  " " + r["skipped"].dump());
  }
  return out;
}

TEST(Fp16Training, ResumeContinuesBitForBitWithTheLossScale) {
  ScratchDir dir;
  InjectedOverflows inject("0:2,0:7");
  const TrainingData data = token_data(pattern_tokens(6000), kVocab);
  const std::map<std::string, std::string> flags = {
      {"loss-scale-init", "4096"}, {"loss-scale-growth-interval", "3"}, {"checkpoint-every", "5"}, {"steps", "10"}};
  auto straight = cpu_trainer(fp16_args(dir.path() / "straight", flags), data);
  straight->output().open_metrics(/*append=*/false);
  straight->run(0);

  // The same run stopped after its checkpoint at step 5 (scale 4096 -> 2048 at step 2, two of the three
  // good steps it needs to grow counted), then resumed in a new trainer.
  auto first = cpu_trainer(fp16_args(dir.path() / "resumed", flags), data);
  first->output().open_metrics(/*append=*/false);
  for (int64_t step = 0; step < 5; ++step) first->train_step(step);
  first->save_checkpoint_at(5);
  const Checkpoint at5 = load_checkpoint(checkpoint_path(dir.path() / "resumed", 5));
  EXPECT_EQ(part_state(at5.tensors, "loss_scaler").at("scale").item<double>(), 2048);
  EXPECT_EQ(part_state(at5.tensors, "loss_scaler").at("good_steps").item<int64_t>(), 2);
  auto resumed = cpu_trainer(fp16_args(dir.path() / "resumed", flags), data);
  ASSERT_EQ(resumed->restore(at5), 5);
  resumed->output().open_metrics(/*append=*/true, 5);
  resumed->run(5);

  const auto a = load_checkpoint(checkpoint_path(dir.path() / "straight", 10));
  const auto b = load_checkpoint(checkpoint_path(dir.path() / "resumed", 10));
  for (const char* part : {"model", "optimizer", "loss_scaler"}) {
    const StateDict sa = part_state(a.tensors, part), sb = part_state(b.tensors, part);
    ASSERT_FALSE(sa.empty()) << part;
    ASSERT_EQ(sa.size(), sb.size()) << part;
    for (const auto& [key, tensor] : sa) EXPECT_TRUE(torch::equal(tensor, sb.at(key))) << part << "." << key;
  }
  const auto straight_steps = step_records(dir.path() / "straight" / "metrics.jsonl");
  const auto resumed_steps = step_records(dir.path() / "resumed" / "metrics.jsonl");
  ASSERT_EQ(straight_steps.size(), 10u);
  EXPECT_EQ(std::vector<std::string>(straight_steps.begin() + 5, straight_steps.end()), resumed_steps);
}

TEST(Fp16Training, ACheckpointMovesBetweenPrecisions) {
  ScratchDir dir;
  const TrainingData data = token_data(pattern_tokens(6000), kVocab);
  auto half = cpu_trainer(fp16_args(dir.path() / "half", {{"steps", "4"}}), data);
  half->output().open_metrics(/*append=*/false);
  half->run(0);
  const Checkpoint from_fp16 = load_checkpoint(checkpoint_path(dir.path() / "half", 4));
  // fp32 resumes an fp16 checkpoint (its loss scale is left), and fp16 one without a loss scale.
  auto full = cpu_trainer(fp16_args(dir.path() / "full", {{"steps", "6"}, {"precision", "fp32"}}), data);
  EXPECT_EQ(full->restore(from_fp16), 4);
  full->output().open_metrics(/*append=*/true, 4);
  full->run(4);
  const Checkpoint from_fp32 = load_checkpoint(checkpoint_path(dir.path() / "full", 6));
  EXPECT_TRUE(part_state(from_fp32.tensors, "loss_scaler").empty());
  auto again = cpu_trainer(fp16_args(dir.path() / "again", {{"steps", "8"}, {"loss-scale-init", "256"}}), data);
  EXPECT_EQ(again->restore(from_fp32), 6);
  EXPECT_EQ(again->train_step(6).loss_scale, 256);
}

}  // namespace
}  // namespace mygpt::loss_scaler_test
