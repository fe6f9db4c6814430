// mygpt-ddp: one binary for training, sampling and evaluation. This file owns the exit codes:
// 0 success, 2 bad usage or bad input (one line naming the problem), 1 anything else.
#include <c10/util/Exception.h>

#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/cli.h"
#include "launcher/commands.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

// LibTorch messages can span lines (and carry backtraces); the contract is one line.
std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "mygpt-ddp: missing command\n" << mygpt::usage_text() << "\n";
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
    std::cout << std::endl;
    return 0;
  }
  if (command == "train") return mygpt::run_train(parsed.values);
  if (command == "generate") return mygpt::run_generate(parsed.values);
  return mygpt::run_eval(parsed.values);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const boost::program_options::error& e) {
    std::cerr << "mygpt-ddp: error: " << first_line(e.what()) << std::endl;
    return kExitBadInput;
  } catch (const std::invalid_argument& e) {
    std::cerr << "mygpt-ddp: error: " << first_line(e.what()) << std::endl;
    return kExitBadInput;
  } catch (const c10::Error& e) {
    std::cerr << "mygpt-ddp: error: " << first_line(e.what_without_backtrace()) << std::endl;
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "mygpt-ddp: error: " << first_line(e.what()) << std::endl;
    return kExitFailure;
  }
}
