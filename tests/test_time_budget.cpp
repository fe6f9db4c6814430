// train --time-budget: the durations it reads, its options, the schedule by the share of the budget spent, and
// runs under a test clock (MYGPT_TEST_BUDGET_CLOCK: each reading advances a fixed number of seconds), so that
// where a run stops is known and no test times anything.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/duration.h"
#include "distributed/communicator.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "tests/training_fixture.h"
#include "trainer/checkpoint.h"
#include "trainer/lr_schedule.h"
#include "trainer/time_budget.h"
#include "trainer/trainer.h"

namespace mygpt::time_budget_test {
namespace {

namespace fs = std::filesystem;
using testing::invalid_argument_message;

// --------------------------------------------------------------------------------------------------
// Durations

TEST(TimeBudgetDuration, ReadsSecondsAndHoursMinutesSeconds) {
  EXPECT_EQ(parse_duration("300").seconds, 300);
  EXPECT_EQ(parse_duration("300s").seconds, 300);
  EXPECT_EQ(parse_duration("5m").seconds, 300);
  EXPECT_EQ(parse_duration("1h30m").seconds, 5400);
  EXPECT_EQ(parse_duration("1h1m1s").seconds, 3661);
  EXPECT_EQ(parse_duration("2h5s").seconds, 7205);
  EXPECT_EQ(parse_duration("1.5h").seconds, 5400);
  EXPECT_EQ(parse_duration("0.25").seconds, 0.25);
}

TEST(TimeBudgetDuration, RefusesWhatIsNoDuration) {
  for (const char* bad : {"", "5x", "m", "-5", "+5", "5 m", "1m1h", "1h1h", "1.m", ".5", "5m3", "1e3", "5ms", " 5"}) {
    const std::string message = invalid_argument_message([&] { parse_duration(bad); });
    EXPECT_NE(message.find("is not a duration"), std::string::npos) << "'" << bad << "': " << message;
  }
  EXPECT_NE(invalid_argument_message([] { parse_duration("0s"); }).find("above zero"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { parse_duration("0"); }).find("above zero"), std::string::npos);
  EXPECT_NE(invalid_argument_message([] { parse_duration("400000h"); }).find("longer than"), std::string::npos);
}

TEST(TimeBudgetDuration, TextReadsBackAsTheSameDuration) {
  EXPECT_EQ(duration_text({5400}), "1h30m");
  EXPECT_EQ(duration_text({300}), "5m");
  EXPECT_EQ(duration_text({45}), "45s");
  EXPECT_EQ(duration_text({3601}), "1h1s");
  EXPECT_EQ(duration_text({1.5}), "1.5s");
  for (const double s : {0.001, 1.0, 59.0, 60.0, 61.5, 3599.0, 3600.0, 86400.0 * 3 + 7, 1e9, 0.1 + 0.2}) {
    EXPECT_EQ(parse_duration(duration_text({s})).seconds, s) << duration_text({s});
  }
}

// --------------------------------------------------------------------------------------------------
// The schedule by the share of the budget spent

TEST(TimeBudgetSchedule, WarmsUpThenDecaysByTheShareSpent) {
  const LrSchedule s{1e-3, 1e-4, /*warmup_steps=*/0, /*decay_steps=*/1, /*warmup_fraction=*/0.1};
  EXPECT_DOUBLE_EQ(s.at_fraction(0), 0);
  EXPECT_DOUBLE_EQ(s.at_fraction(0.05), 0.5e-3);           // half way through the warm-up
  EXPECT_DOUBLE_EQ(s.at_fraction(0.1), 1e-3);              // the peak
  EXPECT_DOUBLE_EQ(s.at_fraction(0.55), 1e-4 + 0.5 * 9e-4);  // half way through the decay: the mean
  EXPECT_DOUBLE_EQ(s.at_fraction(1.0), 1e-4);              // the budget spent: the floor
  EXPECT_DOUBLE_EQ(s.at_fraction(1.7), 1e-4);
  double previous = s.at_fraction(0.1);
  for (double p = 0.11; p < 1; p += 0.01) {  // never rises after the peak
    EXPECT_LE(s.at_fraction(p), previous) << p;
    previous = s.at_fraction(p);
  }
  // The same cosine as the step schedule's: 10 warm-up steps of 100, as 10% of the budget.
  const LrSchedule steps{1e-3, 1e-4, 10, 100, 0.1};
  for (const int64_t step : {10, 25, 50, 75, 99}) {
    EXPECT_NEAR(steps.at(step), steps.at_fraction(static_cast<double>(step) / 100), 1e-15) << step;
  }
  // No warm-up: the peak at once.
  EXPECT_DOUBLE_EQ((LrSchedule{1e-3, 0, 0, 1, 0}).at_fraction(0), 1e-3);
}

// --------------------------------------------------------------------------------------------------
// The options

Parsed<TrainFlags> flags_of(const std::vector<std::string>& args) { return testing::train_flags(args); }

TEST(TimeBudgetOptions, ReadTheBudgetAndRefuseABadOneNamingTheFlag) {
  const auto parsed = flags_of({"--time-budget", "1h30m"});
  ASSERT_TRUE(parsed.config.train.time_budget.has_value());
  EXPECT_EQ(parsed.config.train.time_budget->seconds, 5400);
  EXPECT_FALSE(flags_of({}).config.train.time_budget.has_value());
  const std::string message = invalid_argument_message([] { flags_of({"--time-budget", "5x"}); });
  EXPECT_EQ(message.rfind("--time-budget: '5x' is not a duration", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  // Stored as the checkpoint's options are, it reads back the same.
  const std::string stored = train_flag_table().to_text(parsed.config);
  EXPECT_NE(stored.find("time-budget=1h30m\n"), std::string::npos) << stored;
}

TEST(TimeBudgetOptions, StepsWithoutABudgetOrTheWarmUpOfTheOther) {
  const auto resolved = [](const std::vector<std::string>& args) {
    const auto flags = flags_of(args);
    DataSource source;
    source.assumed = DataFacts{65, nullptr};
    return resolve_run(flags, RunStart{}, source, RunPlace{torch::kCPU, 1, /*here=*/false, 0, {}}).train;
  };
  EXPECT_EQ(resolved({"--time-budget", "5m"}).steps, kUnboundedSteps);  // the budget alone ends the run
  EXPECT_EQ(resolved({"--time-budget", "5m", "--steps", "40"}).steps, 40);  // whichever comes first
  EXPECT_EQ(resolved({"--steps", "40"}).steps, 40);
  EXPECT_EQ(resolved({"--time-budget", "5m", "--steps", "40"}).warmup_steps, 100);  // not shrunk: not used
  EXPECT_NE(invalid_argument_message([&] { resolved({"--time-budget", "5m", "--warmup-steps", "10"}); })
                .find("--warmup-steps has no effect with --time-budget"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] { resolved({"--warmup-fraction", "0.1"}); })
                .find("--warmup-fraction has no effect without --time-budget"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] { resolved({"--time-budget", "5m", "--warmup-fraction", "1"}); })
                .find("--warmup-fraction"),
            std::string::npos);
}

// --------------------------------------------------------------------------------------------------
// The clock and its state

// MYGPT_TEST_BUDGET_CLOCK for the life of one test.
class TestClock {
 public:
  explicit TestClock(const std::string& ticks) { ::setenv("MYGPT_TEST_BUDGET_CLOCK", ticks.c_str(), 1); }
  ~TestClock() { ::unsetenv("MYGPT_TEST_BUDGET_CLOCK"); }
};

TEST(TimeBudgetClock, CountsFromItsStartAndKeepsWhatWasSpentBefore) {
  const TestClock ticks("2,7");
  LocalCommunicator single;
  TimeBudget budget(100, single, torch::kCPU, time_budget_clock(/*rank=*/0));  // 2 s a reading
  EXPECT_EQ(budget.agreed_spent(), 0);  // not started: nothing spent
  budget.start();
  EXPECT_EQ(budget.agreed_spent(), 2);
  EXPECT_EQ(budget.agreed_spent(), 4);
  const StateDict saved = budget.state_dict();  // reads the clock: 6 s
  EXPECT_EQ(saved.at("spent_us").item<int64_t>(), 6'000'000);

  TimeBudget resumed(100, single, torch::kCPU, time_budget_clock(/*rank=*/1));  // 7 s a reading
  resumed.load_state_dict(saved);
  EXPECT_EQ(resumed.spent_before(), 6);
  resumed.start();
  EXPECT_EQ(resumed.agreed_spent(), 13);  // 6 before, 7 since

  EXPECT_NE(invalid_argument_message([&] { resumed.load_state_dict({}); }).find("spent_us"), std::string::npos);
  EXPECT_NE(invalid_argument_message([&] { resumed.load_state_dict({{"spent_us", torch::tensor(int64_t{-1})}}); })
                .find("negative"),
            std::string::npos);
}

TEST(TimeBudgetClock, ABadTestClockIsRefusedNamingTheVariable) {
  const TestClock ticks("1,x");
  EXPECT_NE(invalid_argument_message([] { time_budget_clock(0); }).find("MYGPT_TEST_BUDGET_CLOCK"), std::string::npos);
}

// --------------------------------------------------------------------------------------------------
// Runs

constexpr int64_t kVocab = 23;

// Text data with its character tokenizer, so that validation has bits per byte.
TrainingData character_data() {
  TrainingData d = testing::token_data(testing::pattern_tokens(4000, kVocab), kVocab, testing::pattern_tokens(600, kVocab));
  d.tokenizer_kind = TokenizerKind::character;
  d.tokenizer_data = "abcdefghijklmnopqrstuvw";  // 23 characters, one byte each
  return d;
}

std::vector<std::string> budget_args(const fs::path& out, const std::vector<std::string>& more) {
  std::vector<std::string> args = {"--preset", "tiny", "--block-size", "16", "--batch-size", "4", "--seq-len", "16",
                                   "--lr", "1e-2", "--min-lr", "1e-3", "--eval-every", "0", "--eval-steps", "2",
                                   "--log-every", "1000", "--out", out.string(), "--device", "cpu", "--seed", "0"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The learning rate of each step metrics.jsonl recorded, and the seconds spent before it.
struct StepRecord {
  int64_t step;
  double lr, spent;
};
std::vector<StepRecord> step_records(const fs::path& out) {
  std::vector<StepRecord> records;
  std::ifstream metrics(out / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto r = nlohmann::json::parse(line);
    if (r.contains("lr")) records.push_back({r["step"], r["lr"], r["budget_spent_s"]});
  }
  return records;
}

TEST(TimeBudgetRun, StopsWhenTheBudgetIsSpentWithTheScheduleByItsShareAndALastValidation) {
  const TestClock ticks("1");  // one second a reading: the clock is read once before each step
  ScratchDir dir;
  auto run = testing::cpu_trainer(budget_args(dir.path(), {"--time-budget", "10s", "--warmup-fraction", "0.2"}),
                                  character_data());
  EXPECT_EQ(run->options().steps, kUnboundedSteps);
  run->output().open_metrics(/*append=*/false);
  const TrainSummary summary = run->run(0);
  EXPECT_EQ(summary.steps_run, 9);  // before step k, k + 1 seconds spent: 10 before step 9
  EXPECT_FALSE(summary.stopped_early);
  EXPECT_TRUE(std::isfinite(summary.last_val_bpb));  // the last validation ran, though --eval-every 0
  EXPECT_GT(summary.last_val_bpb, 0);
  EXPECT_TRUE(fs::exists(checkpoint_path(dir.path(), 9)));

  const LrSchedule schedule{1e-2, 1e-3, 0, 1, 0.2};
  const std::vector<StepRecord> records = step_records(dir.path());
  ASSERT_EQ(records.size(), 9u);
  for (const StepRecord& r : records) {
    EXPECT_EQ(r.spent, static_cast<double>(r.step + 1));
    EXPECT_DOUBLE_EQ(r.lr, schedule.at_fraction(r.spent / 10)) << "step " << r.step;
  }
}

TEST(TimeBudgetRun, WithStepsWhicheverComesFirst) {
  const TestClock ticks("1");
  ScratchDir dir;
  // --steps 4 comes first; the schedule follows whichever is further along: the steps from step 1 on (k/4
  // against (k+1)/100 of the budget).
  auto run = testing::cpu_trainer(budget_args(dir.path(), {"--time-budget", "100", "--steps", "4"}), character_data());
  run->output().open_metrics(/*append=*/false);
  EXPECT_EQ(run->run(0).steps_run, 4);
  const LrSchedule schedule{1e-2, 1e-3, 0, 1, 0.05};
  const std::vector<StepRecord> records = step_records(dir.path());
  ASSERT_EQ(records.size(), 4u);
  EXPECT_DOUBLE_EQ(records[0].lr, schedule.at_fraction(0.01));
  for (const StepRecord& r : records) {
    EXPECT_DOUBLE_EQ(r.lr, schedule.at_fraction(std::max(r.spent / 100, static_cast<double>(r.step) / 4)))
        << "step " << r.step;
  }
}

TEST(TimeBudgetRun, AResumedRunContinuesWithTheBudgetLeft) {
  const TestClock ticks("1");
  ScratchDir dir;
  // 4 steps of a 10 s budget, stopped by --steps: its checkpoint keeps the seconds spent (5: its clock's
  // start, a reading before each step, one at the save).
  auto first = testing::cpu_trainer(budget_args(dir.path(), {"--time-budget", "10s", "--steps", "4"}), character_data());
  EXPECT_EQ(first->run(0).steps_run, 4);
  const Checkpoint saved = load_checkpoint(checkpoint_path(dir.path(), 4));
  EXPECT_EQ(part_state(saved.tensors, "time_budget").at("spent_us").item<int64_t>(), 5'000'000);

  // Resumed with more steps and the budget taken from the checkpoint: 5 s left, one a step.
  auto resumed = testing::cpu_trainer(budget_args(dir.path(), {"--resume", "auto", "--steps", "1000"}), character_data());
  ASSERT_TRUE(resumed->options().time_budget.has_value());
  EXPECT_EQ(resumed->options().time_budget->seconds, 10);
  const int64_t start = resumed->restore(load_checkpoint(checkpoint_path(dir.path(), 4)));
  ASSERT_NE(resumed->time_budget(), nullptr);
  EXPECT_EQ(resumed->time_budget()->spent_before(), 5);
  const TrainSummary summary = resumed->run(start);
  EXPECT_EQ(summary.steps_run, 4);  // steps 4..7: 6, 7, 8, 9 s spent before them; 10 before step 8
  EXPECT_TRUE(fs::exists(checkpoint_path(dir.path(), 8)));

  // Resumed once more, the budget spent: nothing to train.
  auto spent = testing::cpu_trainer(budget_args(dir.path(), {"--resume", "auto"}), character_data());
  spent->restore(load_checkpoint(checkpoint_path(dir.path(), 8)));
  EXPECT_EQ(spent->run(8).steps_run, 0);
}

TEST(TimeBudgetRun, RefusedWhereNoBitsPerByteCanEndIt) {
  ScratchDir dir;
  TrainingData no_tokenizer = character_data();
  no_tokenizer.tokenizer_kind = TokenizerKind::none;
  no_tokenizer.tokenizer_data.clear();
  EXPECT_NE(invalid_argument_message([&] {
              testing::cpu_trainer(budget_args(dir.path(), {"--time-budget", "5m"}), no_tokenizer);
            }).find("--time-budget ends with the validation bits per byte (val_bpb), which need the data's tokenizer"),
            std::string::npos);
  TrainingData no_validation = character_data();
  no_validation.val = nullptr;
  EXPECT_NE(invalid_argument_message([&] {
              testing::cpu_trainer(budget_args(dir.path(), {"--time-budget", "5m"}), no_validation);
            }).find("no validation split"),
            std::string::npos);
}

}  // namespace
}  // namespace mygpt::time_budget_test
