// common/: XXH64 against the reference implementation's values, hex formatting, whole-file reading
// that refuses non-regular files, and atomic writes that leave nothing behind on failure.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/file_io.h"
#include "common/progress.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"

namespace mygpt {
namespace {

namespace fs = std::filesystem;
using testing::invalid_argument_message;

TEST(Xxh64, MatchesTheReferenceImplementation) {
  // Values printed by the `xxhash` Python package (the reference C library) for the same inputs.
  std::string long_input;
  for (int r = 0; r < 3; ++r) {
    for (int b = 0; b < 256; ++b) long_input += static_cast<char>(b);
  }
  long_input += "xyz";
  const struct {
    std::string input;
    uint64_t seed0, seed12345;
  } cases[] = {
      {"", 0xef46db3751d8e999ULL, 0x95584af7701f808dULL},
      {"a", 0xd24ec4f1a98c6e5bULL, 0x747b860523d69ab6ULL},
      {"abc", 0x44bc2cf5ad770999ULL, 0x01700e64f6f23509ULL},
      {"0123456789abcdef0123456789abcdef0", 0xe87684f08d6d0816ULL, 0x29eeaeec2d1619d4ULL},
      {long_input, 0xe921a1b45bd779f8ULL, 0x6b1b5d671fb93b43ULL},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(xxh64(c.input), c.seed0) << c.input.size() << " bytes";
    EXPECT_EQ(xxh64(c.input, 12345), c.seed12345) << c.input.size() << " bytes";
  }
  EXPECT_EQ(hex64(0xef46db3751d8e999ULL), "ef46db3751d8e999");
  EXPECT_EQ(hex64(1), "0000000000000001");
}

TEST(FileIo, ReadsRegularFilesAndRefusesEverythingElse) {
  ScratchDir dir;
  EXPECT_EQ(read_whole_file(dir.write("a.txt", "hello"), "data file"), "hello");
  EXPECT_EQ(read_whole_file(dir.write("empty.txt", ""), "data file"), "");
  const fs::path fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, problem] :
       std::vector<std::pair<fs::path, std::string>>{{dir.path() / "absent", "does not exist"},
                                                     {dir.path(), "is a directory"},
                                                     {fifo, "not a regular file"},
                                                     {"/dev/zero", "not a regular file"}}) {
    const std::string message = invalid_argument_message([&] { read_whole_file(path, "data file"); });
    EXPECT_NE(message.find("data file '" + path.string() + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(problem), std::string::npos) << message;
  }
  const std::string big = invalid_argument_message([&] { read_whole_file(dir.write("b", "12345"), "config file", 4); });
  EXPECT_NE(big.find("too large"), std::string::npos) << big;
}

TEST(FileIo, AtomicWriterPublishesOnlyOnCommit) {
  ScratchDir dir;
  const fs::path target = dir.path() / "out.bin";
  write_file_atomically(target, "first");
  {
    AtomicFileWriter writer(target);
    writer.write("second, never committed");
  }  // destroyed without commit: the old file stays, no temporary is left
  EXPECT_EQ(read_whole_file(target, "file"), "first");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);

  AtomicFileWriter writer(target);
  writer.write("xxxx-body");
  writer.write_at(0, "head", 4);
  EXPECT_THROW(writer.write_at(8, "too far", 7), std::logic_error);
  writer.commit();
  EXPECT_EQ(read_whole_file(target, "file"), "head-body");
  EXPECT_FALSE(is_atomic_writer_temporary(target, "out.bin"));
  EXPECT_TRUE(is_atomic_writer_temporary(dir.path() / ".out.bin.tmp.123", "out.bin"));
}

TEST(FileIo, OutputFoldersAreCreatedOrRefusedByName) {
  ScratchDir dir;
  create_output_directory(dir.path() / "a" / "b", "--out");
  EXPECT_TRUE(fs::is_directory(dir.path() / "a" / "b"));
  const fs::path file = dir.write("file", "x");
  const std::string message = invalid_argument_message([&] { create_output_directory(file, "--out"); });
  EXPECT_NE(message.find("--out '" + file.string() + "'"), std::string::npos) << message;
  const std::string below = invalid_argument_message([&] { create_output_directory(file / "sub", "--out"); });
  EXPECT_NE(below.find("cannot be created"), std::string::npos) << below;
  EXPECT_THROW(write_file_atomically(dir.path() / "missing_folder" / "f", "x"), OutputFileError);
}

}  // namespace
}  // namespace mygpt

namespace mygpt {
namespace {

TEST(Progress, ALogGetsWholeLinesWithRateAndTimeLeftAndQuietGetsNone) {
  ::setenv("MYGPT_PROGRESS_SECONDS", "0", 1);
  std::ostringstream log;
  Progress progress("prepare", 10.0, "MB", /*quiet=*/false, log);
  progress.update(2.5, "file 1/2");
  progress.update(5.0);
  progress.finish();
  const std::string text = log.str();
  EXPECT_NE(text.find("prepare: 2.5/10.0 MB (25%)"), std::string::npos) << text;
  EXPECT_NE(text.find("file 1/2"), std::string::npos) << text;
  EXPECT_NE(text.find("prepare: 5.0/10.0 MB (50%)"), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << "a log gets no redrawn lines";
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  // Counts print as integers ("308/10042 examples", not "308.0/10042.0").
  std::ostringstream counts;
  Progress examples("hellaswag", 10042, "examples", /*quiet=*/false, counts);
  examples.update(308);
  EXPECT_NE(counts.str().find("hellaswag: 308/10042 examples (3%)"), std::string::npos) << counts.str();

  std::ostringstream quiet_log;
  Progress quiet("prepare", 10.0, "MB", /*quiet=*/true, quiet_log);
  quiet.update(5.0);
  quiet.finish();
  EXPECT_TRUE(quiet_log.str().empty());

  ::setenv("MYGPT_PROGRESS_SECONDS", "3600", 1);  // a log line at most every hour: none in a short task
  std::ostringstream sparse;
  Progress hourly("eval", 10.0, "batches", false, sparse);
  hourly.update(1.0);
  EXPECT_TRUE(sparse.str().empty());
  ::unsetenv("MYGPT_PROGRESS_SECONDS");
}

}  // namespace
}  // namespace mygpt
