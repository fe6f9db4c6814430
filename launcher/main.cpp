// mygpt-ddp: one binary for training, sampling and evaluation. This file owns the exit codes:
// 0 success, 2 bad usage or bad input (one line naming the problem), 1 anything else.
#include <c10/util/Exception.h>

#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/cli.h"
#include "launcher/commands.h"
#include "distributed/mpi_world.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

// LibTorch messages can span lines (and carry backtraces); the contract is one line.
std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

int dispatch(int argc, char** argv, const mygpt::MpiSession& mpi) {
  if (argc < 2) {
    std::cerr << "mygpt-ddp: error: missing command (train, generate, eval, prepare, plan; see mygpt-ddp --help)"
              << std::endl;
    return kExitBadInput;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << mygpt::usage_text() << "\n";
    return 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  const mygpt::ParsedCommand parsed = mygpt::parse_command(command, args);
  if (parsed.help) {
    if (command == "train") std::cout << "usage: mygpt-ddp train [DATA] [options]\n\n" << mygpt::train_options_description();
    if (command == "generate") std::cout << "usage: mygpt-ddp generate --checkpoint PATH [options]\n\n" << mygpt::generate_options_description();
    if (command == "eval") std::cout << "usage: mygpt-ddp eval --checkpoint PATH [options]\n\n" << mygpt::eval_options_description();
    if (command == "prepare") std::cout << "usage: mygpt-ddp prepare --input FILE... --out DIR [options]\n\n" << mygpt::prepare_options_description();
    if (command == "plan") std::cout << "usage: mygpt-ddp plan [DATA] [train options]\n\n" << mygpt::train_options_description();
    std::cout << std::endl;
    return 0;
  }
  if (command == "train") return mygpt::run_train(parsed.values, mpi);
  if (mpi.world().world_size > 1) {
    throw std::invalid_argument("'" + command + "' runs in one process: start it without mpirun");
  }
  if (command == "generate") return mygpt::run_generate(parsed.values);
  if (command == "prepare") return mygpt::run_prepare(parsed.values);
  if (command == "plan") return mygpt::run_plan(parsed.values);
  return mygpt::run_eval(parsed.values);
}

// Reports an error in one line. In a job of several ranks the line names the rank, and the whole job
// is brought down, so that no other rank waits forever in a collective for this one.
int fail(const mygpt::MpiSession* mpi, int code, const std::string& message) {
  const bool several_ranks = mpi != nullptr && mpi->world().world_size > 1;
  // One write: std::cerr flushes after every <<, and pieces from several ranks would interleave.
  std::cerr << (several_ranks ? "rank " + std::to_string(mpi->world().rank) + ": " : std::string()) +
                   "mygpt-ddp: error: " + first_line(message) + "\n"
            << std::flush;
  if (several_ranks) mpi->abort_job(code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<mygpt::MpiSession> mpi;
  try {
    mpi = std::make_unique<mygpt::MpiSession>();
    return dispatch(argc, argv, *mpi);
  } catch (const boost::program_options::error& e) {
    return fail(mpi.get(), kExitBadInput, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(mpi.get(), kExitBadInput, e.what());
  } catch (const c10::Error& e) {
    return fail(mpi.get(), kExitFailure, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(mpi.get(), kExitFailure, e.what());
  }
}
