// `mygpt-ddp --parse-only` (launcher/command_line_check.h): a command line is checked against today's
// options (names, value types, each option's check, the count of bare arguments) and nothing more, with no
// file read, so tests/docs_check.py can hold every command line of the docs to the code.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/command_line_check.h"
#include "launcher/commands.h"

namespace mygpt::command_line_check_test {
namespace {

// The message check_command_line throws for `words`, or "" when it passes.
std::string refusal(const std::vector<std::string>& words) {
  try {
    check_command_line(words);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

TEST(ParseOnly, AcceptsWhatTheOptionsTablesAccept) {
  EXPECT_EQ(refusal({"train", "DATA", "--steps", "10", "--batch-size", "4", "--precision", "fp32"}), "");
  EXPECT_EQ(refusal({"train", "--overwrite"}), "");  // a switch alone
  EXPECT_EQ(refusal({"generate", "--checkpoint", "DIR", "--max-new-tokens", "5"}), "");
  EXPECT_EQ(refusal({"train", "--help"}), "");
  EXPECT_EQ(refusal({"--help"}), "");
  EXPECT_EQ(refusal({"version"}), "");
}

TEST(ParseOnly, RefusesUnknownFlagsBadValuesAndUnknownCommands) {
  EXPECT_NE(refusal({"train", "DATA", "--no-such-flag", "3"}).find("no-such-flag"), std::string::npos);
  EXPECT_NE(refusal({"train", "--steps", "ten"}).find("ten"), std::string::npos);
  EXPECT_NE(refusal({"train", "--precision", "fp8"}).find("--precision"), std::string::npos);
  EXPECT_NE(refusal({"eval", "--batch-size", "0"}).find("--batch-size must be positive"), std::string::npos);
  EXPECT_NE(refusal({"train", "DATA", "MORE"}).find("positional"), std::string::npos);
  EXPECT_NE(refusal({"trian", "DATA"}).find("unknown command 'trian'"), std::string::npos);
  EXPECT_NE(refusal({}).find("missing command"), std::string::npos);
}

// --config's FILE is a name here (a run reads it), and a required option may be missing (docs show
// fragments such as `mygpt-ddp prepare --threads 2`); a run's parse of the same words refuses both.
TEST(ParseOnly, ReadsNoFileAndAsksForNoRequiredOption) {
  EXPECT_EQ(refusal({"train", "--config", "/nonexistent/run.conf", "--steps", "3"}), "");
  EXPECT_EQ(refusal({"prepare", "--threads", "2"}), "");
  const Command* prepare = nullptr;
  const Command* train = nullptr;
  for (const Command& c : command_table()) {
    if (c.name == "prepare") prepare = &c;
    if (c.name == "train") train = &c;
  }
  ASSERT_NE(prepare, nullptr);
  ASSERT_NE(train, nullptr);
  EXPECT_ANY_THROW(prepare->option_values({"--threads", "2"}));
  EXPECT_ANY_THROW(train->option_values({"--config", "/nonexistent/run.conf", "--steps", "3"}));
}

TEST(ParseOnly, ChecksOneCommandLinePerInputLine) {
  std::istringstream in("train\tDATA\t--steps\t3\ntrain\t--no-such-flag\ngenerate\t--prompt\t\t--max-new-tokens\t2\n"
                        "\n--version\n");
  std::ostringstream out;
  EXPECT_EQ(check_command_lines({}, in, out), 2);
  std::istringstream lines(out.str());
  std::vector<std::string> results;
  for (std::string line; std::getline(lines, line);) results.push_back(line);
  ASSERT_EQ(results.size(), 5u) << out.str();
  EXPECT_EQ(results[0], "ok");
  EXPECT_EQ(results[1].rfind("error: ", 0), 0u);
  EXPECT_NE(results[1].find("no-such-flag"), std::string::npos);
  // The empty word between two tabs is --prompt's value, refused by its own check (not taken as missing).
  EXPECT_NE(results[2].find("--prompt must not be empty"), std::string::npos) << results[2];
  EXPECT_NE(results[3].find("missing command"), std::string::npos);
  EXPECT_EQ(results[4], "ok");

  std::istringstream good("train\tDATA\neval\t--checkpoint\tDIR\n");
  std::ostringstream good_out;
  EXPECT_EQ(check_command_lines({}, good, good_out), 0);
  EXPECT_EQ(good_out.str(), "ok\nok\n");
  std::istringstream unused;
  EXPECT_EQ(check_command_lines({"train", "DATA"}, unused, good_out), 0);
  EXPECT_THROW(check_command_lines({"train", "--no-such-flag"}, unused, good_out), std::invalid_argument);
}

}  // namespace
}  // namespace mygpt::command_line_check_test
