#pragma once
// The commands of mygpt-ddp. One table drives both dispatch and help: each command has a name, a usage
// line, its options table and its run function. A run function returns the exit code; bad input throws
// std::invalid_argument (exit 2).
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/job_session.h"
#include "launcher/option_table.h"

namespace mygpt {

struct Command {
  std::string name;     // one word, or a group and a word ("tokenizer train"): argv[1] and argv[2]
  std::string usage;    // after "mygpt-ddp ": "train [DATA] [options]"
  std::string summary;  // one line in the command list
  std::function<po::options_description()> options;
  std::function<int(const std::vector<std::string>& args, const JobSession& job)> run;
  // The value of every option a run with these arguments uses, as "name=value" lines.
  std::function<std::string(const std::vector<std::string>& args)> option_values;
  // Parses args as run does, ParseScope::given_words (names, types, each option's check; no file read);
  // throws what run's parse would.
  std::function<void(const std::vector<std::string>& args)> check_words;
};

const std::vector<Command>& command_table();
// The command that `words` (the arguments after the program's name) start with: its one-word name, or a
// group and a word ("tokenizer train"); `used` is how many words named it. An unknown name, or a group
// without one of its words, throws std::invalid_argument naming what was expected.
const Command& find_command(const std::vector<std::string>& words, std::size_t& used);
// `mygpt-ddp --help`: the commands, one line each, and the model presets (each command's --help lists
// its options).
std::string usage_text();
// `mygpt-ddp --version`.
std::string version_text();

// A Command from an options table and a function of the parsed options. Commands that are not
// multi_rank refuse to run in a world of several ranks. --help lists the rows `shown` keeps (all without it).
template <typename Config>
Command make_command(std::string name, std::string usage, std::string summary, bool multi_rank,
                     const OptionTable<Config>& (*table)(), int (*run)(const Parsed<Config>&, const JobSession&),
                     RowFilter<Config> shown = nullptr) {
  Command c{name, usage, std::move(summary), nullptr, nullptr, nullptr, nullptr};
  c.options = [name, table, shown] { return table().description(name + " options", shown); };
  c.option_values = [table](const std::vector<std::string>& args) {
    return table().to_text(table().parse(args).config);
  };
  c.check_words = [table](const std::vector<std::string>& args) { table().parse(args, ParseScope::given_words); };
  c.run = [name, usage, multi_rank, table, run, options = c.options](const std::vector<std::string>& args,
                                                                       const JobSession& job) {
    const Parsed<Config> parsed = table().parse(args);
    if (parsed.help) {
      std::cout << "usage: mygpt-ddp " << usage << "\n\n" << options() << std::endl;
      return 0;
    }
    if (!multi_rank && job.world().world_size > 1) {
      throw std::invalid_argument("'" + name + "' runs in one process: start it as a single process (not under mpirun, torchrun or srun)");
    }
    return run(parsed, job);
  };
  return c;
}

// Each command's Command, defined beside its run function.
Command train_command();
Command plan_command();
Command generate_command();
Command eval_command();
Command prepare_command();
Command export_command();
Command chat_command();
Command serve_command();
Command tokenizer_train_command();
Command tokenizer_eval_command();

}  // namespace mygpt
