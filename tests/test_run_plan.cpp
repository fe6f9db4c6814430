// The run resolved once (launcher/run_plan.h): a run built from a typed struct, `plan`'s resolution and
// train's agreeing, and the options table's declarations checked (a misspelt option name in code, a
// dependency on an option that does not exist, a recipe's value of another type).
#include <algorithm>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/run_plan.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "tests/training_fixture.h"

namespace mygpt::run_plan_test {
namespace {

constexpr int64_t kVocab = 23;

std::vector<std::string> small_args(const std::string& out) {
  return {"--preset", "tiny", "--block-size", "16", "--seq-len", "16", "--batch-size", "4", "--steps", "4",
          "--warmup-steps", "1", "--eval-every", "0", "--lr", "3e-3", "--out", out, "--final-checkpoint", "false"};
}

// The same run, once from command-line words and once from a typed struct filled in code: the same
// resolved options and the same losses, step by step.
TEST(RunPlan, ATypedStructBuildsTheRunTheCommandLineBuilds) {
  ScratchDir dir;
  const TrainingData data = testing::token_data(testing::random_tokens(4000, kVocab), kVocab);
  auto from_words = testing::cpu_trainer(small_args(dir.path().string()), data);

  TrainFlags typed = train_flag_table().parse({}).config;  // every default, as a run without flags has them
  typed.model.preset = "tiny";
  typed.model.block_size = 16;
  typed.train.seq_len = 16;
  typed.train.batch_size = 4;
  typed.train.steps = 4;
  typed.train.warmup_steps = 1;
  typed.train.eval_every = 0;
  typed.train.lr = 3e-3;
  typed.train.out = dir.path().string();
  typed.train.final_checkpoint = false;
  LocalCommunicator single;
  auto from_struct = testing::trainer_of(train_flag_table().typed(typed), data, single, torch::kCPU);

  EXPECT_EQ(from_struct->checkpoint_meta().run_config, from_words->checkpoint_meta().run_config);
  EXPECT_DOUBLE_EQ(*from_struct->options().min_lr, 3e-4);  // derived, as from the command line
  for (int64_t step = 0; step < 4; ++step) {
    EXPECT_EQ(from_struct->train_step(step).loss, from_words->train_step(step).loss) << "step " << step;
  }
}

// The run's options with its training options as resolved.
std::string train_text(const RunPlan& plan) {
  TrainFlags flags = plan.flags.config;
  flags.train = plan.train;
  return train_flag_table().to_text(flags);
}

// `plan` (a run sized for a place that may be another machine, the data not loaded) and `train` (the data
// loaded here) resolve the same options through the same stage.
TEST(RunPlan, PlanAndTrainResolveTheSameOptions) {
  const Parsed<TrainFlags> flags = testing::train_flags({"--preset", "tiny", "--steps", "50", "--lr", "2e-3"});
  const RunStart start;
  const TrainingData data = testing::token_data(testing::random_tokens(4000, kVocab), kVocab);
  const RunPlan trained = plan_for_data(flags, start, data, torch::kCPU, 1);
  DataSource sized;
  sized.assumed = DataFacts{kVocab, nullptr};
  const RunPlan planned = resolve_run(flags, start, sized, RunPlace{torch::kCPU, 1, /*here=*/false, 0, {}});
  EXPECT_EQ(train_text(planned), train_text(trained));
  EXPECT_EQ(planned.model, trained.model);
  EXPECT_DOUBLE_EQ(*planned.train.min_lr, 2e-4);
  EXPECT_EQ(*planned.train.checkpoint_every, *trained.train.checkpoint_every);
  EXPECT_EQ(*trained.train.keep_checkpoints, 2);
  EXPECT_EQ(trained.train.precision, Precision::fp32);
  EXPECT_EQ(trained.train.grad_accum, planned.train.grad_accum);
  // The data order is resolved where the data is read: auto becomes an order.
  EXPECT_NE(trained.data_order, DataOrder::automatic);
}

// Issue 64: a run resumed on another number of ranks kept its accumulation, so 2 ranks trained twice the
// tokens per step of the run they continued, without a word. The checkpoint's batch is kept by recomputing
// the accumulation where the ranks divide it (and said), refused where they do not, and a batch chosen anew
// with --grad-accum is taken as given. The rule is the resolution's, so every data order has it.
TEST(RunPlan, AResumeOnOtherRanksKeepsTheTokensPerStep) {
  ScratchDir dir;
  const std::string out = (dir.path() / "run").string();
  const TrainingData data = testing::token_data(testing::random_tokens(4000, kVocab), kVocab);
  std::vector<std::string> args = small_args(out);
  args.back() = "true";  // --final-checkpoint: the checkpoint to resume
  const auto steps = std::find(args.begin(), args.end(), "--steps");
  if (steps == args.end()) {
    args.insert(args.end(), {"--steps", "1"});
  } else {
    *(steps + 1) = "1";
  }
  args.insert(args.end(), {"--grad-accum", "4"});
  testing::cpu_trainer(args, data)->run(0);

  const auto resumed = [&](std::vector<std::string> extra) {
    std::vector<std::string> words = {"--resume", "auto", "--out", out, "--steps", "2"};
    words.insert(words.end(), extra.begin(), extra.end());
    return testing::train_flags(words);
  };
  const Parsed<TrainFlags> flags = resumed({});
  const RunStart start = open_run_start(flags);
  ASSERT_TRUE(start.resume);
  const auto accumulation_on = [&](const Parsed<TrainFlags>& f, int ranks) {
    return plan_for_data(f, start, data, torch::kCPU, ranks).train.grad_accum;
  };
  EXPECT_EQ(accumulation_on(flags, 1), 4);
  EXPECT_EQ(accumulation_on(flags, 2), 2) << "4 x 4 rows x 16 tokens on 1 rank = 2 x 4 x 16 on 2 ranks";
  EXPECT_EQ(accumulation_on(flags, 4), 1);
  const RunPlan two = plan_for_data(flags, start, data, torch::kCPU, 2);
  EXPECT_NE(two.notes.batch.find("--grad-accum 2 (was 4) keeps its 256 tokens per step"), std::string::npos)
      << two.notes.batch;
  const std::string refused = testing::invalid_argument_message([&] { accumulation_on(flags, 3); });
  EXPECT_NE(refused.find("--resume: the checkpoint trained 256 tokens per step on 1 rank(s)"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("resume on 1 rank(s), or give --grad-accum"), std::string::npos) << refused;
  EXPECT_EQ(accumulation_on(resumed({"--grad-accum", "3"}), 3), 3) << "a batch chosen anew is the user's";
}

// gave and refuse take only the table's names: a misspelt one in the code is an error of the program, not a
// condition that is never true.
TEST(OptionNames, AMisspeltNameInCodeFailsLoudly) {
  const Parsed<TrainFlags> flags = testing::train_flags({"--lr", "1e-3"});
  EXPECT_TRUE(flags.gave("lr"));
  EXPECT_THROW(flags.gave("learning-rate"), std::logic_error);
  EXPECT_THROW(flags.refuse("min_lr", "ever"), std::logic_error);
  // The names resume keeps from a checkpoint are checked as well.
  Parsed<TrainFlags> resumed = flags;
  EXPECT_THROW(train_flag_table().take_stored("lr=0.002\n", resumed, {"min_lr"}), std::logic_error);
  // A typed struct knows the table's names too.
  EXPECT_THROW(train_flag_table().typed(flags.config).gave("stepz"), std::logic_error);
}

struct ToyConfig {
  int64_t steps = 0;
  double rate = 0;
  bool loud = false;
};

// A row's declared dependency names an option the table has, and a recipe's values fit their rows: checked
// once the table is built, so a misspelling stops the program before any command line is read.
TEST(OptionNames, DeclarationsNamingNoRowAreCaughtWhenTheTableIsBuilt) {
  const auto loud = [](const Parsed<ToyConfig>& run) { return run.config.loud; };
  OptionTable<ToyConfig> table;
  table.add("loud", &ToyConfig::loud, "loud").init(false);
  table.add("steps", &ToyConfig::steps, "steps").init(1).only_with("loud", loud, "without --loud");
  EXPECT_NO_THROW(table.check_declarations());
  table.add("rate", &ToyConfig::rate, "rate").init(0.5).only_with("loudness", loud, "without --loudness");
  EXPECT_THROW(table.check_declarations(), std::logic_error);
  EXPECT_THROW(table.recipe("fast", {{"stepz", 3}}), std::logic_error);     // no such row
  EXPECT_THROW(table.recipe("fast", {{"steps", 0.5}}), std::logic_error);   // a double for an integer
  EXPECT_NO_THROW(table.recipe("fast", {{"steps", 3}, {"rate", 1}}));      // an integer serves a double

  // The declared refusal: given without what it needs, the option is refused in its own words.
  const Parsed<ToyConfig> quiet = table.parse({"--steps", "5"});
  try {
    table.refuse_unused(quiet, [](const OptionRow<ToyConfig>& row) { return row.name() == "steps"; });
    ADD_FAILURE() << "--steps without --loud was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--steps has no effect without --loud");
  }
  EXPECT_NO_THROW(table.refuse_unused(table.parse({"--steps", "5", "--loud"}),
                                      [](const OptionRow<ToyConfig>& row) { return row.name() == "steps"; }));
}

}  // namespace
}  // namespace mygpt::run_plan_test
