#pragma once
// `mygpt-ddp --parse-only`: checks command lines against today's options without running anything. The
// flag counts only as the very first argument, before the command, so no command line of a run can turn
// it on; main() looks for it before the job starts (no MPI, no rank, no device, no file). tests/docs_check.py
// sends every `mygpt-ddp` command line of README.md and docs/ through it, so a flag renamed or removed
// fails the test where the docs still name it.
//
//   mygpt-ddp --parse-only train DATA --steps 10    checks one command line: exit 0, or 2 and the one line
//   mygpt-ddp --parse-only < LINES                  one command line per input line, its words separated by
//                                                   tabs; one output line each, "ok" or "error: <message>";
//                                                   exit 2 when any failed (one process: LibTorch loads once)
//
// Checked: the command's name, every option's name, its value's type and the option's own check, and the
// count of bare arguments (ParseScope::given_words). Not checked: what only a run can tell (files, the data,
// combinations of options); --config's FILE is not read, and required options may be missing (docs
// show fragments). `--help`, `help`, `--version` and `version` pass as they are.
#include <iosfwd>
#include <string>
#include <vector>

namespace mygpt {

inline constexpr const char* kParseOnlyFlag = "--parse-only";

// Checks the command line `words` (the command, then its arguments); bad input throws as a run would
// (std::invalid_argument or boost::program_options::error: exit 2).
void check_command_line(const std::vector<std::string>& words);

// What `mygpt-ddp --parse-only ARGS` does (see above); returns the exit code.
int check_command_lines(const std::vector<std::string>& args, std::istream& in, std::ostream& out);

}  // namespace mygpt
