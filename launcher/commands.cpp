#include "launcher/commands.h"

#include <sstream>

namespace mygpt {

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {train_command(), generate_command(), eval_command(), prepare_command(),
                                             plan_command(), export_command()};
  return table;
}

std::string usage_text() {
  std::ostringstream out;
  out << "usage: mygpt-ddp <command> [options]\n\ncommands:\n";
  for (const Command& c : command_table()) {
    std::string usage = c.usage.substr(0, c.usage.find(" [options]"));
    out << "  " << usage << std::string(usage.size() < 28 ? 28 - usage.size() : 1, ' ') << c.summary << "\n";
  }
  out << "\n`mygpt-ddp <command> --help` shows one command's options.\n";
  for (const Command& c : command_table()) out << "\n" << c.options();
  return out.str();
}

}  // namespace mygpt
