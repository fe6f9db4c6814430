#pragma once
// One table of options per command. A row holds everything about one option: its name, the field it
// fills, its default, its help, its check and the values of the presets' recipes (GPT-2's, nanoGPT's
// shakespeare-char). The Boost.Program_options
// description (and so --help), parsing of the command line and of --config files, the checks and the
// "name=value" text form all come from the rows, so they cannot disagree.
//
// Field types: bool, int64_t, uint64_t, double, std::string, std::vector<std::string> (several values),
// an enum (with its names), or std::optional of any of these for options that have no default and
// stay unset unless given. Every double must be finite; a row adds its own range check.
#include <boost/program_options.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launcher/config_file.h"
#include "launcher/option_checks.h"
#include "launcher/option_row.h"

namespace mygpt {

template <typename Config>
class OptionTable {
 public:
  // Rows added from here on are listed under this title in --help.
  OptionTable& group(std::string title) {
    group_ = std::move(title);
    return *this;
  }

  // A row filling config.*member (or config.*sub.*member).
  template <typename Field>
  Row<Config, Field>& add(std::string name, Field Config::*member, std::string help) {
    return add_row<Field>(
        std::move(name), [member](Config& c) -> Field& { return c.*member; }, std::move(help));
  }
  template <typename Sub, typename Field>
  Row<Config, Field>& add(std::string name, Sub Config::*sub, Field Sub::*member, std::string help) {
    return add_row<Field>(
        std::move(name), [sub, member](Config& c) -> Field& { return (c.*sub).*member; }, std::move(help));
  }

  // The first `count` bare arguments (-1: all) fill the option `name`.
  OptionTable& positional(std::string name, int count) {
    positional_.emplace_back(std::move(name), count);
    return *this;
  }
  // The recipe whose row values apply to a parsed config (empty: none), e.g. the one its preset brings.
  OptionTable& recipe_of(std::function<std::string(const Config&)> recipe) {
    recipe_of_ = std::move(recipe);
    return *this;
  }
  // A preset's recipe as one table: option name and value, taken where the flag is not given (recipe_of
  // picks the recipe). A name no row has, or a value of another type, is std::logic_error.
  OptionTable& recipe(const std::string& name, const std::vector<std::pair<std::string, RecipeValue>>& values) {
    for (const auto& [option, value] : values) row_named(option).add_recipe(name, value);
    return *this;
  }

  // The names that rows' declared refusals read are rows too (std::logic_error otherwise): called once the
  // table is built, so a misspelt dependency stops the program at its first use of the table.
  void check_declarations() const {
    for (const auto& row : rows_) {
      for (const auto& refusal : row->refusals()) {
        for (const auto& name : refusal.reads) {
          if (!has_row(name)) throw std::logic_error("option --" + row->name() + " depends on an unknown --" + name);
        }
      }
    }
  }

  // Each row of `rows` (all without it), in table order, that the user gave and whose declared refusal
  // applies to the run's options `run`: the first refused is std::invalid_argument, "--<name> has no effect
  // <why>".
  void refuse_unused(const Parsed<Config>& run, const RowFilter<Config>& rows = nullptr) const {
    for (const auto& row : rows_) {
      if ((rows && !rows(*row)) || !run.gave(row->name())) continue;
      for (const auto& refusal : row->refusals()) {
        if (refusal.applies(run)) run.refuse(row->name(), refusal.why(run));
      }
    }
  }

  // A run's options as a typed struct, none of them given (a test's, or a program's own): gave and refuse
  // know this table's names.
  Parsed<Config> typed(Config config) const {
    Parsed<Config> parsed;
    parsed.config = std::move(config);
    parsed.names = row_names();
    return parsed;
  }

  bool has_row(const std::string& name) const {
    return std::any_of(rows_.begin(), rows_.end(), [&](const auto& row) { return row->name() == name; });
  }

  // The rows that `shown` keeps (all without it), grouped, plus --config and --help: a table two
  // commands share shows each its own options. Parsing always takes every row.
  po::options_description description(const std::string& title, const RowFilter<Config>& shown = nullptr) const {
    po::options_description all(title);
    const auto listed = [&](const OptionRow<Config>& row) { return !shown || shown(row); };
    std::vector<std::string> order;
    for (const auto& row : rows_) {
      if (listed(*row) && std::find(order.begin(), order.end(), row->group()) == order.end()) {
        order.push_back(row->group());
      }
    }
    for (const auto& g : order) {
      po::options_description part(g);
      for (const auto& row : rows_) {
        if (row->group() == g && listed(*row)) row->describe(part);
      }
      all.add(part);
    }
    po::options_description general("General");
    general.add_options()("config", po::value<std::string>(),
                          "read options from FILE (lines `name = value`, the names above, values quoted or not, "
                          "`config = FILE` includes another); flags given here win")(
        "help,h", "show this help");
    all.add(general);
    return all;
  }

  // Parses the command line and, with --config FILE, that file (command-line values win). Bad usage
  // throws po::error or std::invalid_argument; both mean exit code 2.
  Parsed<Config> parse(const std::vector<std::string>& args, ParseScope scope = ParseScope::whole) const;

  // Every set option as "name=value" lines, in table order: stored in checkpoints, compared across ranks.
  // Values are escaped_line()s, so each option is one line whatever it holds.
  std::string to_text(const Config& config) const {
    std::string out;
    for (const auto& row : rows_) {
      if (const auto value = row->text(config)) out += row->name() + "=" + option_detail::escaped_line(*value) + "\n";
    }
    return out;
  }

  // The "name=value" entries of to_text's form, by name, their values unescaped (unescaped_line). A value
  // may span lines in what older versions stored (a prompt of "\n" unescaped): a line that does not begin
  // with a row's name and '=' continues the value before it.
  std::map<std::string, std::string> entries_of_text(const std::string& text) const {
    std::map<std::string, std::string> entries;
    std::string* last = nullptr;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      const size_t eq = line.find('=');
      const bool named = eq != std::string::npos && std::any_of(rows_.begin(), rows_.end(), [&](const auto& row) {
                           return row->name() == line.substr(0, eq);
                         });
      if (named) {
        last = &entries[line.substr(0, eq)];
        *last = line.substr(eq + 1);
      } else if (last != nullptr) {
        *last += "\n" + line;
      }
      start = end + 1;
    }
    for (auto& [name, value] : entries) value = option_detail::unescaped_line(value);
    return entries;
  }

  // Fills every row of parsed that the user did not give, that a resume takes (is_resumed) and that is
  // not in `keep` with its value in `stored` (to_text's form, as a checkpoint holds it), checked as a
  // given value is; rows `stored` lacks (options newer than it) keep theirs. A value the row refuses is
  // std::invalid_argument naming the option.
  void take_stored(const std::string& stored, Parsed<Config>& parsed, const std::set<std::string>& keep = {}) const {
    for (const auto& name : keep) parsed.require_option(name);
    const po::options_description desc = description("");
    const std::map<std::string, std::string> entries = entries_of_text(stored);
    po::parsed_options from_stored(&desc);
    for (const auto& row : rows_) {
      const auto entry = entries.find(row->name());
      if (!row->is_resumed() || parsed.gave(row->name()) || keep.count(row->name()) || entry == entries.end()) {
        continue;
      }
      po::option option(row->name(), {entry->second});
      option.original_tokens = {row->name(), entry->second};
      from_stored.options.push_back(std::move(option));
    }
    po::variables_map values;
    try {
      po::store(from_stored, values);
    } catch (const po::error& e) {
      throw std::invalid_argument(e.what());
    }
    // Boost also stores every other row's default: only the rows taken from `stored` are filled.
    for (const auto& row : rows_) {
      if (values.count(row->name()) > 0 && !values[row->name()].defaulted()) row->fill(values, parsed.config, "");
    }
  }

  const std::vector<std::unique_ptr<OptionRow<Config>>>& rows() const { return rows_; }

 private:
  OptionRow<Config>& row_named(const std::string& name) const {
    for (const auto& row : rows_) {
      if (row->name() == name) return *row;
    }
    throw std::logic_error("no option --" + name + " in the table");
  }
  std::shared_ptr<const std::set<std::string>> row_names() const {
    auto names = std::make_shared<std::set<std::string>>();
    for (const auto& row : rows_) names->insert(row->name());
    return names;
  }

  template <typename Field>
  Row<Config, Field>& add_row(std::string name, std::function<Field&(Config&)> field, std::string help) {
    for (const auto& row : rows_) {
      if (row->name() == name) throw std::logic_error("option --" + name + " is defined twice");
    }
    auto row = std::make_unique<Row<Config, Field>>(group_, std::move(name), std::move(field), std::move(help));
    auto& ref = *row;
    rows_.push_back(std::move(row));
    return ref;
  }

  std::string group_ = "Options";
  std::vector<std::unique_ptr<OptionRow<Config>>> rows_;
  std::vector<std::pair<std::string, int>> positional_;
  std::function<std::string(const Config&)> recipe_of_;
};

// For an option name nobody defined (as Boost reports it: "--n_layer", "learning_rate"), the name it
// most likely means among `known`, as a hint to append: " (names use dashes: n-layer)", " (nanoGPT's
// learning_rate is lr here)"; empty when there is none.
std::string unknown_option_hint(const std::string& unknown, const std::vector<std::string>& known);

// Config files naming options that `known` lacks are refused in one line that lists every such name of
// every file, each with its hint: converting a nanoGPT config took one run per name when only the first
// was reported.
void refuse_unknown_config_names(const std::vector<ConfigFile>& files, const std::vector<std::string>& known);

// Boost.Program_options formats its error messages by replacing %name% tokens and never ends when the
// text it substitutes holds such a token again (found by fuzzing: `--x%canonical_option%` hung the
// program). Input holding a %word% sequence is refused (std::invalid_argument naming `where`) before
// Boost sees it.
void refuse_placeholder_text(const std::string& text, const std::string& where);

// The refusal of a command line with more positional arguments than the command's places (`places`: each
// positional option and how many arguments it takes), naming the first argument too many.
std::string extra_positional_message(const std::vector<std::string>& positional_arguments,
                                     const std::vector<std::pair<std::string, int>>& places);

template <typename Config>
Parsed<Config> OptionTable<Config>::parse(const std::vector<std::string>& args, ParseScope scope) const {
  const po::options_description desc = description("");
  po::positional_options_description positional;
  for (const auto& [name, count] : positional_) positional.add(name.c_str(), count);
  for (const auto& arg : args) refuse_placeholder_text(arg, "argument");
  std::vector<std::string> known;
  for (const auto& row : rows_) known.push_back(row->name());
  po::variables_map values;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), values);
  } catch (const po::unknown_option& e) {
    throw std::invalid_argument(e.what() + unknown_option_hint(e.get_option_name(), known));
  } catch (const po::too_many_positional_options_error&) {
    // Boost names no argument: the first one past the positional places is found and named.
    const po::parsed_options loose = po::command_line_parser(args).options(desc).allow_unregistered().run();
    throw std::invalid_argument(extra_positional_message(po::collect_unrecognized(loose.options, po::include_positional),
                                                         positional_));
  }
  Parsed<Config> parsed;
  parsed.names = row_names();
  parsed.help = values.count("help") > 0;
  if (parsed.help) return parsed;
  if (values.count("config") && scope == ParseScope::whole) {
    const std::vector<ConfigFile> files = read_config_files(values["config"].as<std::string>());
    refuse_unknown_config_names(files, known);
    for (const auto& [path, entries] : files) {
      po::parsed_options from_file(&desc);
      for (const auto& entry : entries) {
        refuse_placeholder_text(entry.name + " = " + entry.value, "config file '" + path + "'");
        po::option option(entry.name, {entry.value});
        option.original_tokens = {entry.name, entry.value};
        from_file.options.push_back(std::move(option));
      }
      try {
        // Every value of the file is checked, also those a flag overrides; then stored after the command
        // line (and the files before it), so values given there keep theirs.
        po::variables_map file_values;
        po::store(from_file, file_values);
        po::store(from_file, values);
      } catch (const po::error& e) {
        throw std::invalid_argument("config file '" + path + "': " + e.what());
      }
    }
  }
  if (scope == ParseScope::whole) po::notify(values);  // (asks for the required options)
  for (const auto& row : rows_) {
    if (values.count(row->name()) > 0 && !values[row->name()].defaulted()) parsed.given.insert(row->name());
  }
  // Plain values first (the recipe depends on the preset), then the recipe where it applies, then checks.
  // given_words leaves a row without any value (a required option not given) as the config has it.
  const auto fills = [&](const OptionRow<Config>& row) { return scope == ParseScope::whole || values.count(row.name()) > 0; };
  for (const auto& row : rows_) {
    if (fills(*row)) row->fill(values, parsed.config, /*recipe=*/"");
  }
  const std::string recipe = recipe_of_ ? recipe_of_(parsed.config) : "";
  if (!recipe.empty()) {
    for (const auto& row : rows_) {
      if (fills(*row)) row->fill(values, parsed.config, recipe);
    }
  }
  return parsed;
}

}  // namespace mygpt
