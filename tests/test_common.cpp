// common/: XXH64 against the reference implementation's values, hex formatting, whole-file reading
// that refuses non-regular files, atomic writes that leave nothing behind on failure, and the claim that
// keeps a second process out of an output folder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/file_io.h"
#include "common/folder_claim.h"
#include "common/process_identity.h"
#include "common/progress.h"
#include "tests/expect_refused.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"

namespace mygpt::common_test {
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

TEST(FileIo, TextFilesMustBeUtf8AndTheErrorNamesTheFileAndTheByteOffset) {
  EXPECT_FALSE(first_invalid_utf8(""));
  EXPECT_FALSE(first_invalid_utf8("plain ascii\n"));
  EXPECT_FALSE(first_invalid_utf8("caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80 \xEF\xBB\xBF"));  // é — 😀 BOM
  // Latin-1, a stray continuation, overlong forms, a surrogate, beyond U+10FFFF, cut off at the end.
  for (const auto& [text, offset] : std::vector<std::pair<std::string, size_t>>{{"caf\xE9", 3},
                                                                                 {"ab\x80", 2},
                                                                                 {"\xC0\xAF", 0},
                                                                                 {"x\xE0\x80\xAF", 1},
                                                                                 {"xy\xED\xA0\x80", 2},
                                                                                 {"\xF4\x90\x80\x80", 0},
                                                                                 {"\xF5\x80\x80\x80", 0},
                                                                                 {"ok\xE2\x82", 2}}) {
    ASSERT_TRUE(first_invalid_utf8(text)) << text;
    EXPECT_EQ(*first_invalid_utf8(text), offset) << text;
  }
  ScratchDir dir;
  const fs::path latin1 = dir.write("latin1.txt", "na\xEFve text");
  expect_refused([&] { read_text_file(latin1, "data file"); },
                 {"data file '" + latin1.string() + "'", "not UTF-8", "byte 0xEF at byte offset 2"});
  EXPECT_EQ(read_text_file(dir.write("ok.txt", "na\xC3\xAFve"), "data file"), "na\xC3\xAFve");
}

// generate printed GPT-2 samples byte for byte, invalid UTF-8 included. The expected texts are Python's
// bytes.decode("utf-8", errors="replace") (what Hugging Face's and tiktoken's decode give), one U+FFFD
// per maximal subpart of a broken sequence.
TEST(FileIo, BytesThatNeverBecomeUtf8AreShownAsReplacementCharacters) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", ""},
      {"plain", "plain"},
      {"caf\xC3\xA9 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xF0\x9F\x98\x80"},
      {"caf\xE9", "caf" + r},
      {"ab\x80", "ab" + r},
      {"\xC0\xAF", r + r},                        // an overlong form: two bytes that start nothing
      {"x\xE0\x80\xAF", "x" + r + r + r},         // E0 needs A0..BF next
      {"xy\xED\xA0\x80", "xy" + r + r + r},       // a surrogate
      {"\xF4\x90\x80\x80", r + r + r + r},       // beyond U+10FFFF
      {"\xF5\x80", r + r},
      {"ok\xE2\x82", "ok" + r},                   // a character cut by the end of the sample: one
      {"\xF0\x9F\x98" "A", r + "A"},             // three bytes of an emoji, then a letter: one
      {"\xE2\x82\xE2\x82\xAC", r + "\xE2\x82\xAC"},  // a cut character, then a whole one
      {"\xFF\xFE", r + r}};
  for (const auto& [bytes, text] : cases) {
    EXPECT_EQ(with_invalid_utf8_replaced(bytes), text) << bytes;
    EXPECT_FALSE(first_invalid_utf8(with_invalid_utf8_replaced(bytes)));
  }
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
}  // namespace mygpt::common_test

namespace mygpt::common_test {
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
}  // namespace mygpt::common_test

namespace mygpt::common_test {
namespace {

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// A claim as another process left it; mtime_age_s in the past.
void plant_claim(const fs::path& folder, const std::string& host, long pid, std::time_t mtime_age_s) {
  const fs::path claim = folder / FolderClaim::kFileName;
  write_file_atomically(claim, "host=" + host + "\npid=" + std::to_string(pid) +
                                   "\nsince=2026-01-01T00:00:00Z\ntoken=0123456789abcdef\n");
  if (mtime_age_s > 0) {
    const struct timespec times[2] = {{std::time(nullptr) - mtime_age_s, 0}, {std::time(nullptr) - mtime_age_s, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, claim.c_str(), times, 0), 0);
  }
}

// A pid that no process has: a child that has exited and been reaped.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// A claim on this host naming `pid`, written `since`, with a process identity (none: an older claim).
void plant_claim_of(const fs::path& folder, long pid, const std::string& since, const std::string& process) {
  write_file_atomically(folder / FolderClaim::kFileName,
                        "host=" + this_host() + "\npid=" + std::to_string(pid) + "\nsince=" + since +
                            "\ntoken=0123456789abcdef\n" + (process.empty() ? "" : "process=" + process + "\n"));
}

// Issue 40: PID 1 of a restarted container and pids reused after a reboot are alive but are not the holder.
TEST(FolderClaim, ALivePidThatIsNotTheHolderIsTakenOver) {
  const std::string identity = process_start_identity(1);
  if (identity.empty()) GTEST_SKIP() << "no /proc process start times here";
  ScratchDir dir;
  // Older claims name no process: PID 1 started after 2000, so it cannot have written this one then.
  plant_claim_of(dir.path(), 1, "2000-01-01T00:00:00Z", "");
  {
    FolderClaim claim(dir.path(), "--out");
    EXPECT_NE(claim.takeover_note().find("pid 1 is now another process, started at"), std::string::npos)
        << claim.takeover_note();
  }
  // This boot, another start than PID 1's.
  const std::string boot = identity.substr(0, identity.find('/'));
  plant_claim_of(dir.path(), 1, "2026-01-01T00:00:00Z", boot + "/1");
  {
    FolderClaim claim(dir.path(), "--out");
    EXPECT_NE(claim.takeover_note().find("started after the holder's"), std::string::npos) << claim.takeover_note();
  }
  // Another boot: every pid of the claim is reused.
  plant_claim_of(dir.path(), 1, "2026-01-01T00:00:00Z", "another-boot/" + identity.substr(identity.find('/') + 1));
  {
    FolderClaim claim(dir.path(), "--out");
    EXPECT_NE(claim.takeover_note().find("the host has restarted"), std::string::npos) << claim.takeover_note();
  }
  // The holder itself (this process, its own identity), however old its heartbeat: refused.
  plant_claim_of(dir.path(), ::getpid(), "2026-01-01T00:00:00Z", process_start_identity(::getpid()));
  const struct timespec old[2] = {{std::time(nullptr) - 3600, 0}, {std::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir.path() / FolderClaim::kFileName).c_str(), old, 0), 0);
  expect_refused([&] { FolderClaim claim(dir.path(), "--out"); }, {"is in use by another run", "pid " + std::to_string(::getpid())});
}

// A run refused before it wrote anything leaves no --out it created (issue 40: an empty folder read as a
// run that started); a folder that was there stays.
TEST(FolderClaim, FoldersTheClaimCreatedGoWhenLeftEmpty) {
  ScratchDir dir;
  const fs::path out = dir.path() / "a" / "b";
  { FolderClaim claim(out, "--out"); }
  EXPECT_FALSE(fs::exists(dir.path() / "a")) << "the created folders were left behind";
  {
    FolderClaim claim(out, "--out");
    write_file_atomically(out / "metrics.jsonl", "{}\n");
  }
  EXPECT_TRUE(fs::exists(out / "metrics.jsonl"));
  { FolderClaim claim(dir.path(), "--out"); }
  EXPECT_TRUE(fs::exists(dir.path())) << "a folder the claim did not create was removed";
}

TEST(FolderClaim, ASecondClaimIsRefusedNamingTheHolderAndTheFirstIsReleased) {
  ScratchDir dir;
  const fs::path out = dir.path() / "run";
  {
    FolderClaim first(out, "--out");
    EXPECT_TRUE(first.takeover_note().empty());
    EXPECT_TRUE(fs::exists(out / FolderClaim::kFileName));
    expect_refused([&] { FolderClaim second(out, "--out"); },
                   {"--out '" + out.string() + "' is in use", "host " + this_host(),
                    "pid " + std::to_string(::getpid()), "since 20"});
    EXPECT_TRUE(fs::exists(out / FolderClaim::kFileName)) << "the refused claim removed the holder's";
  }
  EXPECT_FALSE(fs::exists(out / FolderClaim::kFileName)) << "not released";
  // The folder the claim created went with it, empty (no temporaries were left in it).
  EXPECT_FALSE(fs::exists(out)) << "the claim's folder or temporaries were left";
  FolderClaim again(out, "--out");  // free once released
}

TEST(FolderClaim, ADeadHoldersClaimIsTakenOverWithANote) {
  ScratchDir dir;
  // Same host, no such process: gone at once, whatever its heartbeat.
  plant_claim(dir.path(), this_host(), dead_pid(), 0);
  {
    FolderClaim claim(dir.path(), "--out");
    EXPECT_NE(claim.takeover_note().find("no such process"), std::string::npos) << claim.takeover_note();
  }
  // Same host, a process that has exited but is not reaped yet (kill(pid, 0) still succeeds): gone. A rank
  // whose mpirun exited first is such a process until something reaps it.
  const pid_t zombie = ::fork();
  if (zombie == 0) ::_exit(0);
  for (int i = 0; i < 500 && !process_has_exited(zombie); ++i) ::usleep(10000);
  if (process_has_exited(zombie)) {
    plant_claim(dir.path(), this_host(), zombie, 0);
    FolderClaim claim(dir.path(), "--out");
    EXPECT_NE(claim.takeover_note().find("has exited (not yet reaped)"), std::string::npos) << claim.takeover_note();
  }
  int status = 0;
  ::waitpid(zombie, &status, 0);
  // Another host: alive while its heartbeat is fresh, gone once it is stale.
  plant_claim(dir.path(), "some-other-node", 1, 0);
  expect_refused([&] { FolderClaim claim(dir.path(), "--out"); }, {"host some-other-node", "pid 1"});
  plant_claim(dir.path(), "some-other-node", 1, FolderClaim::kStaleSeconds + 30);
  FolderClaim claim(dir.path(), "--out");
  EXPECT_NE(claim.takeover_note().find("no heartbeat"), std::string::npos) << claim.takeover_note();
  EXPECT_NE(claim.takeover_note().find("some-other-node"), std::string::npos) << claim.takeover_note();
}

// Issue 59: a requeued Slurm job may start on another node seconds after its killed start, whose claim's
// heartbeat is still fresh there. The claim names its batch job and start: an earlier start of the same
// job is gone (Slurm ends it before the requeue); the same start, or another job, is not.
TEST(FolderClaim, AClaimOfAnEarlierStartOfTheSameBatchJobIsTakenOver) {
  ScratchDir dir;
  const ClaimingJob first{"slurm job 36 on cluster c", 0};
  {
    FolderClaim claim(dir.path(), "--out", first);
    const std::string text = read_text_file(dir.path() / FolderClaim::kFileName, "claim");
    EXPECT_NE(text.find("\njob=slurm job 36 on cluster c\nrestart=0\n"), std::string::npos) << text;
  }
  // What the killed start left on node7, its heartbeat fresh.
  const auto plant = [&](const std::string& job, long long restart) {
    write_file_atomically(dir.path() / FolderClaim::kFileName,
                          "host=node7\npid=4242\nsince=2026-01-01T00:00:00Z\ntoken=0123456789abcdef\njob=" + job +
                              "\nrestart=" + std::to_string(restart) + "\n");
  };
  plant(first.id, 0);
  expect_refused([&] { FolderClaim claim(dir.path(), "--out", first); }, {"host node7"});  // the same start: alive
  expect_refused([&] { FolderClaim claim(dir.path(), "--out", {"slurm job 37 on cluster c", 1}); }, {"host node7"});
  expect_refused([&] { FolderClaim claim(dir.path(), "--out"); }, {"host node7"});  // not in a batch job
  {
    FolderClaim claim(dir.path(), "--out", {first.id, 1});
    EXPECT_NE(claim.takeover_note().find("an earlier start of slurm job 36 on cluster c (restart 0; this is restart 1)"),
              std::string::npos)
        << claim.takeover_note();
  }
  plant(first.id, 3);  // a later start holds it: this one is the stale one
  expect_refused([&] { FolderClaim claim(dir.path(), "--out", {first.id, 2}); }, {"host node7"});
}

}  // namespace
}  // namespace mygpt::common_test
