#include "launcher/command_line_check.h"

#include <boost/program_options/errors.hpp>

#include <algorithm>
#include <istream>
#include <ostream>
#include <stdexcept>

#include "launcher/commands.h"

namespace mygpt {

void check_command_line(const std::vector<std::string>& words) {
  if (words.empty()) throw std::invalid_argument("missing command (see mygpt-ddp --help)");
  const std::string& name = words.front();
  if (name == "--help" || name == "-h" || name == "help" || name == "--version" || name == "version") return;
  std::size_t used = 0;
  const Command& command = find_command(words, used);
  command.check_words(std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(used), words.end()));
}

namespace {

// One output line per command line, whatever the message holds.
std::string error_line(const std::string& message) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  return "error: " + line + "\n";
}

// Every tab separates two words, so an empty word (`--prompt ''`) stays one; an empty line has none.
std::vector<std::string> tab_separated(const std::string& line) {
  std::vector<std::string> words;
  if (line.empty()) return words;
  size_t start = 0;
  while (true) {
    const size_t end = line.find('\t', start);
    words.push_back(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return words;
    start = end + 1;
  }
}

}  // namespace

int check_command_lines(const std::vector<std::string>& args, std::istream& in, std::ostream& out) {
  if (!args.empty()) {
    check_command_line(args);
    return 0;
  }
  bool all_parsed = true;
  for (std::string line; std::getline(in, line);) {
    try {
      check_command_line(tab_separated(line));
      out << "ok\n";
    } catch (const boost::program_options::error& e) {
      out << error_line(e.what());
      all_parsed = false;
    } catch (const std::exception& e) {  // std::invalid_argument, and anything else: the next line still runs
      out << error_line(e.what());
      all_parsed = false;
    }
  }
  out << std::flush;
  return all_parsed ? 0 : 2;
}

}  // namespace mygpt
