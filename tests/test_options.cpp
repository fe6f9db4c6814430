// The options tables: the GPT-2 recipe the gpt2 presets bring, what --help shows against what a run
// uses, --config files, checks of every kind of value, and the text form.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/run_plan.h"
#include "tests/expect_refused.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"

namespace mygpt::options_test {
namespace {

// ------------------------------------------------------------------------------------------------
// The GPT-2 recipe that the gpt2 presets bring to `train` and `plan`

struct Recipe {
  GptConfig model;
  TrainOptions options;
};

Recipe recipe(const std::vector<std::string>& args, int world = 1, torch::Device device = torch::kCPU) {
  const Parsed<TrainFlags> parsed = train_flag_table().parse(args);
  Recipe r;
  r.model = parsed.config.model.resolve(50304);
  r.options = resolve_train_options(parsed, r.model, device, world);
  return r;
}

bool bf16(const Recipe& r) { return r.options.precision == Precision::bf16; }

TEST(Gpt2Recipe, PresetBringsTheRecipeDefaults) {
  const Recipe r = recipe({"--preset", "gpt2"});
  EXPECT_EQ(r.model.n_layer, 12);
  EXPECT_EQ(r.model.n_embd, 768);
  EXPECT_EQ(r.model.vocab_size, 50304);
  EXPECT_EQ(r.options.steps, 19073);
  EXPECT_DOUBLE_EQ(r.options.lr, 6e-4);
  EXPECT_DOUBLE_EQ(*r.options.min_lr, 6e-5);
  EXPECT_EQ(r.options.warmup_steps, 715);
  EXPECT_EQ(r.options.seq_len, 1024);
  EXPECT_EQ(r.options.batch_size, 16);
  EXPECT_EQ(r.options.grad_accum, 32);  // 524288 / (16 x 1024 x 1)
  EXPECT_EQ(r.options.checkpoint_every, 5000);
  EXPECT_EQ(r.options.batch_size * r.options.seq_len * r.options.grad_accum, 524288);
  // The other GPT-2 sizes bring the same recipe.
  EXPECT_EQ(recipe({"--preset", "gpt2-medium"}).options.steps, 19073);
  EXPECT_EQ(recipe({"--preset", "gpt2-xl"}).options.grad_accum, 32);
}

TEST(Gpt2Recipe, AccumulationKeepsTheTotalBatchForAnyWorldAndMicroBatch) {
  EXPECT_EQ(recipe({"--preset", "gpt2", "--batch-size", "16"}, 8).options.grad_accum, 4);
  EXPECT_EQ(recipe({"--preset", "gpt2", "--batch-size", "16"}, 2).options.grad_accum, 16);
  EXPECT_EQ(recipe({"--preset", "gpt2", "--batch-size", "8"}, 1).options.grad_accum, 64);
  EXPECT_EQ(recipe({"--preset", "gpt2", "--batch-size", "64"}, 8).options.grad_accum, 1);
  EXPECT_EQ(recipe({"--preset", "gpt2", "--seq-len", "512"}).options.grad_accum, 64);
  // The total batch applies to any preset when given explicitly: 4096 / (4 x 16 x 2) = 32.
  const Recipe tiny =
      recipe({"--preset", "tiny", "--batch-size", "4", "--seq-len", "16", "--total-batch-tokens", "4096"}, 2);
  EXPECT_EQ(tiny.options.grad_accum, 32);
}

TEST(Gpt2Recipe, ExplicitFlagsOverrideTheRecipe) {
  const Recipe r = recipe({"--preset", "gpt2", "--steps", "50", "--lr", "1e-3", "--min-lr", "0", "--warmup-steps", "10",
                           "--seq-len", "256", "--checkpoint-every", "7", "--n-layer", "2", "--dropout", "0.1"});
  EXPECT_EQ(r.options.steps, 50);
  EXPECT_DOUBLE_EQ(r.options.lr, 1e-3);
  EXPECT_DOUBLE_EQ(*r.options.min_lr, 0.0);
  EXPECT_EQ(r.options.warmup_steps, 10);
  EXPECT_EQ(r.options.seq_len, 256);
  EXPECT_EQ(r.options.checkpoint_every, 7);
  EXPECT_EQ(r.options.grad_accum, 128);  // 524288 / (16 x 256)
  EXPECT_EQ(r.model.n_layer, 2);
  EXPECT_EQ(r.model.n_head, 12);
  EXPECT_DOUBLE_EQ(r.model.dropout, 0.1);
  // --grad-accum given: the recipe's total batch no longer applies.
  EXPECT_EQ(recipe({"--preset", "gpt2", "--grad-accum", "3"}).options.grad_accum, 3);
  // An explicit value equal to the non-recipe default still counts as explicit.
  EXPECT_DOUBLE_EQ(recipe({"--preset", "gpt2", "--lr", "1e-3"}).options.lr, 1e-3);
  EXPECT_EQ(recipe({"--preset", "gpt2", "--steps", "2000"}).options.steps, 2000);
}

TEST(Gpt2Recipe, ConfigFileValuesOverrideTheRecipeAndFlagsOverrideTheFile) {
  ScratchDir dir;
  const auto path = dir.write("recipe.cfg", "preset = gpt2\nlr = 0.002\nwarmup-steps = 5\n");
  const Recipe r = recipe({"--config", path.string(), "--warmup-steps", "9"});
  EXPECT_EQ(r.model.n_layer, 12);
  EXPECT_DOUBLE_EQ(r.options.lr, 0.002);
  EXPECT_EQ(r.options.warmup_steps, 9);
  EXPECT_EQ(r.options.steps, 19073);
}

TEST(Gpt2Recipe, OtherPresetsKeepTheCommandLineDefaults) {
  const Recipe r = recipe({"--preset", "small"});
  EXPECT_EQ(r.options.steps, 2000);
  EXPECT_DOUBLE_EQ(r.options.lr, 1e-3);
  EXPECT_DOUBLE_EQ(*r.options.min_lr, 1e-4);
  EXPECT_EQ(r.options.warmup_steps, 100);
  EXPECT_EQ(r.options.grad_accum, 1);
  EXPECT_EQ(r.options.seq_len, r.model.block_size);  // --seq-len 0: the block size
  EXPECT_EQ(r.options.checkpoint_every, 250);  // at each evaluation (--eval-every's default)
  EXPECT_EQ(r.options.keep_checkpoints, 2);
  EXPECT_EQ(recipe({"--eval-every", "0"}).options.checkpoint_every, 0);  // no evaluations: only at the end
  EXPECT_EQ(recipe({"--checkpoint-every", "9"}).options.keep_checkpoints, 0);  // set: all are kept
}

TEST(Gpt2Recipe, RejectsInconsistentBatchSettings) {
  // 524288 is not a multiple of 3 x 1024.
  EXPECT_THROW(recipe({"--preset", "gpt2", "--batch-size", "3"}), std::invalid_argument);
  // ... nor of 16 x 1024 x 3 ranks.
  EXPECT_THROW(recipe({"--preset", "gpt2"}, 3), std::invalid_argument);
  EXPECT_THROW(recipe({"--preset", "tiny", "--batch-size", "4", "--seq-len", "16", "--total-batch-tokens", "1000"}),
               std::invalid_argument);
  EXPECT_THROW(recipe({"--preset", "gpt2", "--grad-accum", "2", "--total-batch-tokens", "524288"}),
               std::invalid_argument);
  EXPECT_THROW(recipe({"--preset", "tiny", "--grad-accum", "2", "--total-batch-tokens", "4096", "--seq-len", "16"}),
               std::invalid_argument);
  EXPECT_THROW(recipe({"--preset", "tiny", "--total-batch-tokens", "-64"}), std::invalid_argument);
  EXPECT_THROW(recipe({"--preset", "gpt2", "--seq-len", "2048"}), std::invalid_argument);  // beyond the block
  try {
    recipe({"--preset", "gpt2", "--batch-size", "3"});
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("total-batch-tokens"), std::string::npos) << e.what();
  }
}

TEST(Gpt2Recipe, PrecisionAutoIsBf16OnlyOnCuda) {
  // Only inspected here, never used: a CUDA device this machine may not have is taken to have bf16 (plan's
  // case); a real pre-Ampere GPU resolves auto to fp16 (tests/cuda/test_cuda.cpp).
  const torch::Device cuda(torch::kCUDA, 0);  // only inspected, never used
  EXPECT_FALSE(bf16(recipe({"--preset", "gpt2"})));
  EXPECT_TRUE(bf16(recipe({"--preset", "gpt2"}, 1, cuda)));
  EXPECT_FALSE(bf16(recipe({"--preset", "tiny", "--precision", "auto"}, 1, torch::Device(torch::kMPS))));
  EXPECT_FALSE(bf16(recipe({"--preset", "gpt2", "--precision", "fp32"}, 1, cuda)));
  EXPECT_TRUE(bf16(recipe({"--preset", "tiny", "--precision", "bf16"})));
  EXPECT_EQ(recipe({"--preset", "tiny", "--precision", "fp16"}).options.precision, Precision::fp16);
  EXPECT_THROW(recipe({"--preset", "tiny", "--precision", "fp8"}), std::invalid_argument);
  EXPECT_THROW(recipe({"--preset", "tiny", "--loss-scale-init", "1024"}), std::invalid_argument);  // not fp16
}

// ------------------------------------------------------------------------------------------------
// The tables themselves

// "name" -> "value" of the "--name arg (=value)" entries of a command's --help.
std::map<std::string, std::string> help_defaults(const Command& c) {
  std::ostringstream help;
  help << c.options();
  std::map<std::string, std::string> defaults;
  // "--name arg (=default)", and for switches "--name [=arg(=true)] (=default)".
  const std::regex entry(R"(--([a-z0-9-]+)(?:\s+arg|\s+\[=arg\(=[^)]*\)\])?\s+\(=([^)]*)\))");
  const std::string text = help.str();
  for (auto it = std::sregex_iterator(text.begin(), text.end(), entry); it != std::sregex_iterator(); ++it) {
    defaults[(*it)[1]] = (*it)[2];
  }
  return defaults;
}

std::map<std::string, std::string> values_of(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    values[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return values;
}

TEST(OptionTables, EveryDefaultInHelpIsTheDefaultARunUses) {
  // The fewest arguments each command accepts; every other option keeps its default.
  const std::map<std::string, std::vector<std::string>> minimal = {{"train", {}},
                                                                   {"plan", {}},
                                                                   {"generate", {"--checkpoint", "c"}},
                                                                   {"eval", {"--checkpoint", "c"}},
                                                                   {"prepare", {"--input", "a", "--out", "o"}},
                                                                   {"export", {"--checkpoint", "c", "--out", "o"}},
                                                                   {"chat", {"--checkpoint", "c"}},
                                                                   {"serve", {"--checkpoint", "c"}},
                                                                   {"tokenizer train", {"--input", "a", "--vocab-size", "300", "--out", "o"}},
                                                                   {"tokenizer eval", {"--vocab", "v", "--input", "a"}}};
  for (const Command& c : command_table()) {
    const auto shown = help_defaults(c);
    const auto used = values_of(c.option_values(minimal.at(c.name)));
    // export has one defaulted option; tokenizer eval none (every option of it is a path given or left out).
    EXPECT_GE(shown.size(), c.name == "export" ? 1u : c.name == "tokenizer eval" ? 0u : 3u) << c.name;
    for (const auto& [name, value] : shown) {
      ASSERT_TRUE(used.count(name)) << c.name << " --" << name << " has a default in --help but none in a run";
      // Control characters show escaped (the sample prompt "\n" as a backslash and an n), never raw, and
      // a run records them escaped alike (its "name=value" lines once split there and kept an empty prompt).
      EXPECT_EQ(value.find('\n'), std::string::npos) << c.name << " --" << name << " breaks the help line";
      EXPECT_EQ(used.at(name), value) << c.name << " --" << name;
    }
  }
}

TEST(OptionTables, HelpShowsDefaultsOnOneLineAndTheTopLevelHelpIsShort) {
  const Command& train = command_table().front();
  std::ostringstream help;
  help << train.options();
  EXPECT_NE(help.str().find("--sample-prompt arg (=\\n)"), std::string::npos) << help.str();
  const std::string top = usage_text();
  EXPECT_LT(std::count(top.begin(), top.end(), '\n'), 30) << top;
  EXPECT_EQ(top.find("--steps"), std::string::npos) << "the options belong to each command's --help";
  EXPECT_NE(top.find("  shakespeare-char    6 layers,  6 heads,  384 wide, block  256"), std::string::npos) << top;
  // The command table is aligned: every summary starts in the same column.
  std::set<size_t> columns;
  for (const Command& c : command_table()) {
    const auto line_start = top.rfind('\n', top.find(c.summary)) + 1;
    columns.insert(top.find(c.summary) - line_start);
  }
  EXPECT_EQ(columns.size(), 1u) << top;
  EXPECT_NE(version_text().find("mygpt-ddp "), std::string::npos);
  // train's help leaves out what only plan reads; plan's shows it.
  std::ostringstream plan_help;
  for (const Command& c : command_table()) {
    if (c.name == "plan") plan_help << c.options();
  }
  EXPECT_EQ(help.str().find("--gpu-memory"), std::string::npos);
  EXPECT_NE(plan_help.str().find("--gpu-memory"), std::string::npos);
}

// plan takes train's whole command line (a user pastes their train flags after it), but its --help lists
// only the options that change the plan.
TEST(OptionTables, PlanHelpListsOnlyWhatPlanReads) {
  const auto plan = std::find_if(command_table().begin(), command_table().end(),
                                 [](const Command& c) { return c.name == "plan"; });
  ASSERT_NE(plan, command_table().end());
  std::ostringstream help;
  help << plan->options();
  const auto lists = [&](const std::string& flag) {
    return std::regex_search(help.str(), std::regex("\\s--" + flag + "(\\s|\\[)"));
  };
  for (const char* read : {"data", "preset", "n-layer", "batch-size", "seq-len", "grad-accum", "total-batch-tokens",
                           "steps", "lr", "device", "precision", "zero", "recompute", "fused-loss", "ranks",
                           "gpu-memory", "init-from", "resume", "config", "bucket-mb", "keep-freed-memory",
                           "loss-chunk-rows",
                           // plan prints the disk the checkpoints need: their cadence (--eval-every's without
                           // --checkpoint-every), how many are kept, and the final one
                           "checkpoint-every", "keep-checkpoints", "final-checkpoint", "eval-every"}) {
    EXPECT_TRUE(lists(read)) << "plan --help lacks --" << read << ":\n" << help.str();
  }
  for (const char* unread : {"sample-prompt", "sample-every", "hellaswag", "hellaswag-every", "log-every", "overwrite",
                             "seed", "loss-scale-init", "weight-decay", "comm-timeout"}) {
    EXPECT_FALSE(lists(unread)) << "plan --help lists --" << unread;
  }
  // ... and it still accepts them, as train does.
  const std::vector<std::string> train_line = {"--preset", "tiny", "--sample-every", "10", "--sample-prompt", "hi",
                                               "--checkpoint-every", "5", "--keep-checkpoints", "2", "--seed", "7"};
  const auto values = values_of(plan->option_values(train_line));
  EXPECT_EQ(values.at("checkpoint-every"), "5");
  EXPECT_EQ(values.at("sample-prompt"), "hi");
}

TEST(OptionTables, NanoGptStyleNamesGetAHint) {
  ScratchDir dir;
  const auto cfg = dir.write("nanogpt.cfg", "n_layer = 2\n");
  EXPECT_NE(testing::invalid_argument_message([&] { train_flag_table().parse({"--config", cfg.string()}); })
                .find("unrecognised option 'n_layer' (names use dashes: n-layer)"),
            std::string::npos);
  const auto lr = dir.write("lr.cfg", "learning_rate = 0.001\n");
  EXPECT_NE(testing::invalid_argument_message([&] { train_flag_table().parse({"--config", lr.string()}); })
                .find("(nanoGPT's learning_rate is lr here)"),
            std::string::npos);
  EXPECT_NE(testing::invalid_argument_message([] { train_flag_table().parse({"--max_iters", "5"}); })
                .find("unrecognised option '--max_iters' (nanoGPT's max_iters is steps here)"),
            std::string::npos);
  EXPECT_EQ(unknown_option_hint("--stepz", {"steps"}), "");
}

// nanoGPT's config/*.py are Python: strings quoted, True/False, comments after values.
TEST(OptionTables, ConfigValuesMayBeQuotedAsNanoGptWritesThem) {
  ScratchDir dir;
  const auto cfg = dir.write("quoted.cfg",
                             "out = \"o/cfg run\"  # a comment after the value\n"
                             "sample-prompt = ' # not a comment '\n"
                             "data = 'builtin:sort'\n"
                             "overwrite = True\n"
                             "lr = 1e-3 # unquoted values are trimmed\n");
  const auto parsed = train_flag_table().parse({"--config", cfg.string()});
  EXPECT_EQ(parsed.config.train.out, "o/cfg run");
  EXPECT_EQ(parsed.config.train.sample_prompt, " # not a comment ");
  EXPECT_EQ(parsed.config.data.data, "builtin:sort");
  EXPECT_TRUE(parsed.config.runtime.overwrite);
  EXPECT_DOUBLE_EQ(parsed.config.train.lr, 1e-3);
  const auto included = dir.write("includes.cfg", "config = \"quoted.cfg\"\n");
  EXPECT_EQ(train_flag_table().parse({"--config", included.string()}).config.train.out, "o/cfg run");

  const auto open_quote = dir.write("open.cfg", "steps = 3\nout = \"o/run\n");
  expect_refused([&] { train_flag_table().parse({"--config", open_quote.string()}); },
                 {"open.cfg' line 2", "never closed"});
  const auto trailing = dir.write("trailing.cfg", "out = 'a' 'b'\n");
  expect_refused([&] { train_flag_table().parse({"--config", trailing.string()}); },
                 {"trailing.cfg' line 1", "after the quoted value"});
  const auto section = dir.write("section.cfg", "[train]\nsteps = 3\n");
  expect_refused([&] { train_flag_table().parse({"--config", section.string()}); },
                 {"section.cfg' line 1 is not a `name = value` line"});
}

// nanoGPT's Shakespeare config took one run per unknown name when only the first was reported.
TEST(OptionTables, EveryUnknownNameOfAConfigIsReportedAtOnceWithItsHint) {
  ScratchDir dir;
  dir.write("more.cfg", "wandb_log = False\n");
  const auto cfg = dir.write("train_shakespeare_char.py",
                             "config = more.cfg\n"
                             "out_dir = 'out-shakespeare-char'\n"
                             "always_save_checkpoint = False\n"
                             "n_layer = 6\n"
                             "learning_rate = 1e-3 # with baby networks can afford to go a bit higher\n"
                             "n_layer = 6\n"
                             "stepz = 5\n"
                             "compile = False\n");
  expect_refused([&] { train_flag_table().parse({"--config", cfg.string()}); },
                 {"train_shakespeare_char.py': unrecognised options 'out_dir' (nanoGPT's out_dir is out here), "
                  "'always_save_checkpoint' (nanoGPT's always_save_checkpoint: checkpoints are written every "
                  "--checkpoint-every steps",
                  "'n_layer' (names use dashes: n-layer), 'learning_rate' (nanoGPT's learning_rate is lr here), "
                  "'stepz', 'compile' (nanoGPT's compile: no torch.compile",
                  "; config file '" + (dir.path() / "more.cfg").string() + "': unrecognised option 'wandb_log' "
                  "(nanoGPT's wandb_log: no Weights & Biases"});
  // Unknown names come before bad values: all of them in the first run.
  const auto both = dir.write("both.cfg", "steps = many\nbogus = 1\n");
  expect_refused([&] { train_flag_table().parse({"--config", both.string()}); }, {"unrecognised option 'bogus'"});
}

TEST(OptionTables, NamesAreUniqueAndTheTextFormListsEverySetOption) {
  const auto& rows = train_flag_table().rows();
  std::set<std::string> names;
  for (const auto& row : rows) EXPECT_TRUE(names.insert(row->name()).second) << row->name();
  const auto values = values_of(train_flag_table().to_text(train_flag_table().parse({"--vocab-size", "99"}).config));
  for (const auto& row : rows) {
    EXPECT_EQ(values.count(row->name()) > 0, row->default_text().has_value() || row->name() == "vocab-size")
        << row->name();
  }
  EXPECT_EQ(values.at("vocab-size"), "99");
  // Any value stays on its line and reads back whole (run.json unescapes it).
  const std::string prompt = "a\nb\\n\tc\r\\";
  const auto odd = values_of(train_flag_table().to_text(train_flag_table().parse({"--sample-prompt", prompt}).config));
  EXPECT_EQ(odd.at("sample-prompt"), "a\\nb\\\\n\\tc\\r\\\\");
  EXPECT_EQ(option_detail::unescaped_line(odd.at("sample-prompt")), prompt);
  // What a resume reads back (entries_of_text, take_stored) is the value itself, not its escaped line.
  const std::string stored = train_flag_table().to_text(train_flag_table().parse({"--sample-prompt", prompt}).config);
  EXPECT_EQ(train_flag_table().entries_of_text(stored).at("sample-prompt"), prompt);
  auto resumed = train_flag_table().parse({});
  train_flag_table().take_stored(stored, resumed);
  EXPECT_EQ(resumed.config.train.sample_prompt, prompt);
}

TEST(OptionTables, BadValuesAreRefusedNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lr", "inf"}, "--lr"},
      {{"--min-lr", "nan"}, "--min-lr"},
      {{"--grad-clip", "nan"}, "--grad-clip"},
      {{"--comm-timeout", "-1"}, "--comm-timeout"},
      {{"--seed", "-1"}, "--seed"},
      {{"--seed", "12x"}, "--seed"},
      {{"--steps", "0"}, "--steps"},
      {{"--data-order", "shuffle"}, "--data-order"},
      {{"--precision", "fp8"}, "--precision"},
      {{"--precision", "fp16", "--loss-scale-init", "0.5"}, "--loss-scale-init"},
      {{"--dropout", "1"}, "--dropout"},
      {{"--val-fraction", "-0.1"}, "--val-fraction"},
      {{"--beta2", "1"}, "--beta2"},
      {{"--preset", "nope"}, "nope"},
      {{"--out", ""}, "--out"}};
  for (const auto& [args, named] : cases) {
    try {
      train_flag_table().parse(args);
      ADD_FAILURE() << args[0] << " " << args[1] << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  }
  // Boost's own errors (missing values, repeats) are po::error, also exit code 2; unknown flags come
  // back as std::invalid_argument with Boost's message and a hint where one fits.
  EXPECT_THROW(train_flag_table().parse({"--no-such-flag", "1"}), std::invalid_argument);
  EXPECT_THROW(train_flag_table().parse({"--steps"}), po::error);
  EXPECT_THROW(train_flag_table().parse({"--steps", "1", "--steps", "2"}), po::error);
}

TEST(OptionTables, ConfigFilesMustBeRegularFilesOfKnownOptions) {
  ScratchDir dir;
  EXPECT_THROW(train_flag_table().parse({"--config", dir.path().string()}), std::invalid_argument);
  EXPECT_THROW(train_flag_table().parse({"--config", (dir.path() / "absent.cfg").string()}), std::invalid_argument);
  const auto unknown = dir.write("unknown.cfg", "stepz = 3\n");
  const std::string message =
      mygpt::testing::invalid_argument_message([&] { train_flag_table().parse({"--config", unknown.string()}); });
  EXPECT_NE(message.find("config file '" + unknown.string() + "': unrecognised option 'stepz'"), std::string::npos)
      << message;
  // Found by fuzzing: Boost's error formatting never ends on text that holds its own %name% tokens.
  const auto placeholder = dir.write("placeholder.cfg", "st%canonical_option%s = 2\n");
  EXPECT_THROW(train_flag_table().parse({"--config", placeholder.string()}), std::invalid_argument);
  EXPECT_THROW(train_flag_table().parse({"--x%canonical_option%y"}), std::invalid_argument);
  EXPECT_THROW(train_flag_table().parse({"--steps", "%value%x"}), std::invalid_argument);
  EXPECT_NO_THROW(train_flag_table().parse({"--sample-prompt", "100% sure, 5 %"}));
  // A bad value in the file is refused even where a flag overrides it.
  const auto bad_value = dir.write("bad_value.cfg", "steps = many\n");
  EXPECT_THROW(train_flag_table().parse({"--steps", "3", "--config", bad_value.string()}), std::invalid_argument);
  const auto good = dir.write("good.cfg", "steps = 3\ndata-order = random\n");
  const auto parsed = train_flag_table().parse({"--config", good.string()});
  EXPECT_EQ(parsed.config.train.steps, 3);
  EXPECT_EQ(parsed.config.data.data_order, DataOrder::random);
  EXPECT_TRUE(parsed.gave("steps"));
  EXPECT_FALSE(parsed.gave("lr"));
}

TEST(OptionTables, AModelTooLargeToBuildNamesTheFlagsThatMadeIt) {
  const auto parsed = train_flag_table().parse({"--preset", "gpt2", "--n-layer", "20000000"});
  expect_refused([&] { parsed.config.model.resolve(50304); },
                 {"beyond the 2^40", "--preset gpt2", "--n-layer 20000000", "vocabulary 50304"});
  const auto heads = train_flag_table().parse({"--preset", "tiny", "--n-head", "3"});
  expect_refused([&] { heads.config.model.resolve(65); }, {"does not divide", "--n-head 3"});
}

TEST(OptionTables, ConfigFilesIncludeOthersRelativeToThemselvesAndRefuseCycles) {
  ScratchDir dir;
  // base.cfg in a sub-folder, named relative to the including file (not to the working folder).
  dir.write("recipes/base.cfg", "steps = 7\nlr = 0.002\nwarmup-steps = 2\n");
  dir.write("recipes/more.cfg", "warmup-steps = 4\n");
  const auto run = dir.write("run.cfg", "config = recipes/base.cfg  # the shared recipe\nconfig = recipes/more.cfg\nlr = 0.005\n");
  const auto parsed = train_flag_table().parse({"--config", run.string(), "--steps", "9"});
  EXPECT_EQ(parsed.config.train.steps, 9);           // the command line wins
  EXPECT_DOUBLE_EQ(parsed.config.train.lr, 0.005);   // the including file wins over its includes
  EXPECT_EQ(parsed.config.train.warmup_steps, 4);    // a later include wins over an earlier one
  EXPECT_TRUE(parsed.gave("warmup-steps"));
  // A cycle, a missing include and an empty include are refused by name.
  const auto a = dir.write("a.cfg", "config = b.cfg\n");
  dir.write("b.cfg", "steps = 1\nconfig = ./a.cfg\n");
  expect_refused([&] { train_flag_table().parse({"--config", a.string()}); }, {"b.cfg", "a.cfg", "cycle"});
  const auto self = dir.write("self.cfg", "config = self.cfg\n");
  expect_refused([&] { train_flag_table().parse({"--config", self.string()}); }, {"self.cfg", "cycle"});
  const auto missing = dir.write("missing.cfg", "config = nowhere.cfg\n");
  expect_refused([&] { train_flag_table().parse({"--config", missing.string()}); }, {"nowhere.cfg", "does not exist"});
  const auto empty = dir.write("empty.cfg", "config =\n");
  expect_refused([&] { train_flag_table().parse({"--config", empty.string()}); }, {"empty.cfg", "names no file"});
  // A bad value inside an include names the included file.
  dir.write("bad.cfg", "steps = many\n");
  const auto outer = dir.write("outer.cfg", "config = bad.cfg\n");
  expect_refused([&] { train_flag_table().parse({"--config", outer.string()}); }, {"bad.cfg"});
}

TEST(DeviceChoice, EachRankGetsItsOwnGpuOrIsRefused) {
  EXPECT_EQ(cuda_index_for_rank(0, 1, 1), 0);
  EXPECT_EQ(cuda_index_for_rank(3, 8, 8), 3);
  EXPECT_EQ(cuda_index_for_rank(1, 2, 4), 1);
  // Slurm's --gpus-per-task=1: every task sees one GPU of its own, cuda:0.
  EXPECT_EQ(cuda_index_for_rank(5, 8, 1), 0);
  // More ranks than the GPUs each sees, but more than one visible: oversubscription.
  EXPECT_THROW(cuda_index_for_rank(2, 4, 2), std::invalid_argument);
  EXPECT_THROW(cuda_index_for_rank(0, 3, 2), std::invalid_argument);
}

TEST(DeviceChoice, ThreadCountsFarAboveTheCoresAreRefused) {
  EXPECT_NO_THROW(require_sane_thread_count("threads", 8, 2));
  expect_refused([] { require_sane_thread_count("threads", 9, 2); }, {"--threads 9", "2 cores", "at most 8"});
  // 1024 at most, however many cores (a thread per core of a 512-core machine is still a sane run).
  EXPECT_NO_THROW(require_sane_thread_count("threads", 1024, 512));
  expect_refused([] { require_sane_thread_count("threads", 1025, 512); }, {"at most 1024"});
  expect_refused([] { require_sane_thread_count("threads", 1025, 0); }, {"at most 1024"});
  // Through the option table, before any thread is started.
  expect_refused([] { train_flag_table().parse({"--threads", "100000"}); }, {"--threads 100000"});
}

}  // namespace
}  // namespace mygpt::options_test
