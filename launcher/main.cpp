// mygpt-ddp: one binary for training, sampling and evaluation. This file owns the exit codes:
// 0 success, 2 bad usage or bad input (one line naming the problem), 1 anything else.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "distributed/failure_notice.h"
#include "distributed/job_session.h"
#include "distributed/rank_zero_reports.h"
#include "launcher/command_line_check.h"
#include "launcher/commands.h"
#include "launcher/stop_signal.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

std::string command_names() {
  std::string names;
  for (const auto& c : mygpt::command_table()) names += (names.empty() ? "" : ", ") + c.name;
  return names;
}

int dispatch(int argc, char** argv, const mygpt::JobSession& job) {
  if (argc < 2) throw std::invalid_argument("missing command (" + command_names() + "; see mygpt-ddp --help)");
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << mygpt::usage_text() << std::endl;
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::cout << mygpt::version_text() << std::endl;
    return 0;
  }
  const std::vector<std::string> words(argv + 1, argv + argc);
  std::size_t used = 0;
  const mygpt::Command& command = mygpt::find_command(words, used);
  return command.run(std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(used), words.end()), job);
}

// LibTorch messages can span lines (and carry backtraces) or start with a line break; the contract is
// one line that says something: the first line with text, else what kind of failure it was.
std::string first_line(const std::string& message, const std::string& otherwise) {
  size_t start = 0;
  while (start < message.size()) {
    const size_t end = std::min(message.find('\n', start), message.size());
    const std::string line = message.substr(start, end - start);
    if (line.find_first_not_of(" \t\r") != std::string::npos) return line;
    start = end + 1;
  }
  return otherwise;
}

// Reports an error in one line. In a job of several ranks the line names the rank, and the whole job
// is brought down, so that no other rank waits forever in a collective for this one.
int fail(const mygpt::JobSession* job, int code, const std::string& message,
         const std::string& otherwise = "unexpected failure without a message") {
  const bool several_ranks = job != nullptr && job->world().world_size > 1;
  // One write: std::cerr flushes after every <<, and pieces from several ranks would interleave.
  std::cerr << (several_ranks ? "rank " + std::to_string(job->world().rank) + ": " : std::string()) +
                   "mygpt-ddp: error: " + first_line(message, otherwise) + "\n"
            << std::flush;
  // A GPU node's first contact with a CUDA error: the first line alone may lose its context (the GPU kit
  // sets this). The one line above stays first, whole.
  const char* full = std::getenv("MYGPT_FULL_ERRORS");
  if (full != nullptr && std::string(full) == "1" && message.find('\n') != std::string::npos) {
    std::cerr << "mygpt-ddp: the whole error (MYGPT_FULL_ERRORS=1):\n" + message + "\n" << std::flush;
  }
  if (several_ranks) job->abort_job(code);
  return code;
}

// The command, its job session (MPI finalized, NCCL torn down) and every file it wrote all ended here.
int run_command(int argc, char** argv) {
  std::unique_ptr<mygpt::JobSession> job;
  try {
    // Before the job starts: a parse-only check initializes no MPI and starts no rank.
    if (argc >= 2 && std::string(argv[1]) == mygpt::kParseOnlyFlag) {
      const int code = mygpt::check_command_lines(std::vector<std::string>(argv + 2, argv + argc), std::cin, std::cout);
      mygpt::check_standard_output();
      return code;
    }
    job = std::make_unique<mygpt::JobSession>();
    const int code = dispatch(argc, argv, *job);
    mygpt::check_standard_output();  // what exit would flush, with its failure named
    return code;
  } catch (const mygpt::EndedByRankZero& e) {
    return e.exit_code();  // rank 0 printed the job's one line for it
  } catch (const std::bad_alloc&) {
    return fail(job.get(), kExitFailure, "out of memory (a smaller --batch-size or model needs less)");
  } catch (const boost::program_options::error& e) {
    return fail(job.get(), kExitBadInput, e.what());
  } catch (const mygpt::RankRefused& e) {
    // This process's own launcher variables are wrong, the job's are not: its line first, then the same
    // line left for the other ranks, which would otherwise wait for this one until --comm-timeout.
    const int code = fail(job.get(), kExitBadInput, e.what(), "bad input (no details)");
    mygpt::tell_peers_of_refusal(e.job(), e.what());
    return code;
  } catch (const std::invalid_argument& e) {
    return fail(job.get(), kExitBadInput, e.what(), "bad input (no details)");
  } catch (const c10::Error& e) {
    return fail(job.get(), kExitFailure, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(job.get(), kExitFailure, e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A training run takes a stop (Slurm's SIGTERM before the time limit, a preemption, SIGUSR1 passed on by
  // the batch script) from its first instruction: one that came while it started up (MPI, the rendezvous,
  // reading the data) used to kill it (exit 143 or 138, and no requeue). It is kept until the first step.
  if (argc >= 2 && std::string(argv[1]) == "train") mygpt::install_stop_signal_handlers();
  const int code = run_command(argc, argv);
  // Leave without the static destructors: LibTorch's (its operator registry and the like) touch pages of
  // the library that nothing touched since start-up, and paged ~140 MiB of it back in at every exit,
  // after the run had freed its memory (measured: RssFile 350 -> 490 MiB in `--version`'s last 0.1 s;
  // `train` of a small model peaked there, 190 MiB above its training steps, so peak RSS said nothing of
  // the run). What they would do matters to no one: the OS takes the memory and closes the files, and
  // every file this program writes is published whole (and fsync'd) before run_command returns.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}
