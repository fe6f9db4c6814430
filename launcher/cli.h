#pragma once
// Command-line parsing (Boost.Program_options): subcommands, their flags with defaults, config files.
#include <boost/program_options.hpp>

#include <string>
#include <vector>

namespace mygpt {

namespace po = boost::program_options;

struct ParsedCommand {
  po::variables_map values;
  bool help = false;
};

// The options of each subcommand, with their defaults (shown by --help).
po::options_description train_options_description();
po::options_description generate_options_description();
po::options_description eval_options_description();
po::options_description prepare_options_description();

// Parses args (without the program and command names). Command-line values win over those of
// --config FILE, which uses Boost's "name = value" format with the same option names.
// Bad usage throws po::error or std::invalid_argument; both become exit code 2.
ParsedCommand parse_command(const std::string& command, const std::vector<std::string>& args);

// The top-level help: the commands and every option of each.
std::string usage_text();

// Every option's final value as "name=value" lines, sorted: what ranks compare at start.
std::string options_fingerprint(const po::variables_map& values);

// Accessors that reject non-positive / negative numbers with a message naming the flag.
int64_t positive(const po::variables_map& values, const std::string& name);
int64_t non_negative(const po::variables_map& values, const std::string& name);

}  // namespace mygpt
