#include "launcher/commands.h"

#include <torch/version.h>

#include <algorithm>
#include <sstream>

#include "common/strprintf.h"
#include "model/gpt_config.h"
#include "mygpt/build_config.h"

namespace mygpt {

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {train_command(), generate_command(), eval_command(), prepare_command(),
                                             plan_command(), export_command(), chat_command(), serve_command(),
                                             tokenizer_train_command(), tokenizer_eval_command()};
  return table;
}

const Command& find_command(const std::vector<std::string>& words, std::size_t& used) {
  const std::string name = words.empty() ? std::string() : words.front();
  std::string names, subcommands;  // subcommands: of a group such as "tokenizer"
  for (const Command& command : command_table()) {
    names += (names.empty() ? "" : ", ") + command.name;
    if (command.name == name) {
      used = 1;
      return command;
    }
    if (command.name.rfind(name + " ", 0) == 0) {
      const std::string word = command.name.substr(name.size() + 1);
      if (words.size() > 1 && words[1] == word) {
        used = 2;
        return command;
      }
      subcommands += (subcommands.empty() ? "" : ", ") + word;
    }
  }
  if (name.empty()) throw std::invalid_argument("missing command (" + names + "; see mygpt-ddp --help)");
  if (!subcommands.empty()) {
    throw std::invalid_argument("'" + name + "' needs one of: " + subcommands +
                                (words.size() > 1 ? " (not '" + words[1] + "')" : ""));
  }
  throw std::invalid_argument("unknown command '" + name + "' (expected " + names + ")");
}

std::string usage_text() {
  std::ostringstream out;
  out << "usage: mygpt-ddp <command> [options]\n\ncommands:\n";
  std::vector<std::string> usages;
  size_t width = 0;
  for (const Command& c : command_table()) {
    usages.push_back(c.usage.substr(0, c.usage.find(" [options]")));
    width = std::max(width, usages.back().size());
  }
  for (size_t i = 0; i < usages.size(); ++i) {
    out << "  " << usages[i] << std::string(width + 2 - usages[i].size(), ' ') << command_table()[i].summary << "\n";
  }
  out << "\nmodel presets (--preset):\n";
  for (const std::string& name : preset_names()) {
    // nanochat's depth dial is one line (its members differ only in depth); the family's others name
    // their architecture in `plan` and at the start of a run.
    const bool dial = name.rfind("nanochat-d", 0) == 0;
    if (dial && name != "nanochat-d12") continue;
    const GptConfig c = preset_config(name);
    if (dial) {
      out << "  nanochat-dN        nanochat's depth dial (nanochat-d12 ... -d32): N layers, 64N wide, heads of 128, "
             "block 2048\n";
      continue;
    }
    out << strprintf("  %-18s %2lld layers, %2lld heads, %4lld wide, block %4lld, dropout %.1f\n", name.c_str(),
                     static_cast<long long>(c.n_layer), static_cast<long long>(c.n_head),
                     static_cast<long long>(c.n_embd), static_cast<long long>(c.block_size), c.dropout);
  }
  out << "\n`mygpt-ddp <command> --help` lists that command's options; `mygpt-ddp --version` the build.";
  return out.str();
}

std::string version_text() {
  return strprintf("mygpt-ddp %s (LibTorch %d.%d.%d)", MYGPT_VERSION, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                   TORCH_VERSION_PATCH);
}

}  // namespace mygpt
