#pragma once
// One table of options per command. A row holds everything about one option: its name, the field it
// fills, its default, its help, its check and the values of the presets' recipes (GPT-2's, nanoGPT's
// shakespeare-char). The Boost.Program_options
// description (and so --help), parsing of the command line and of --config files, the checks and the
// "name=value" text form all come from the rows, so they cannot disagree.
//
// Field types: bool, int64_t, uint64_t, double, std::string, std::vector<std::string> (several values),
// an enum (with its names, or read and written by a text_form of its own), std::optional<double> with a
// text_form ("none" or a number), or std::optional of any of these for options that have no default and
// stay unset unless given. Every double must be finite; a row adds its own range check.
#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/file_io.h"
#include "common/number_text.h"
#include "launcher/config_file.h"

namespace mygpt {

namespace po = boost::program_options;

// How much of a command line parse() takes in. `whole`: all that a run needs (--config's files read, the
// required options asked for). `given_words`: only the words given, each option's name, its value's type and
// its own check; --config's FILE is not opened and a required option may be missing. That is the check of the
// command lines in the docs (launcher/command_line_check.h), where fragments and placeholders stand.
enum class ParseScope { whole, given_words };

// A command's typed options and which of them the user gave (on the command line or in --config).
template <typename Config>
struct Parsed {
  Config config{};
  std::set<std::string> given;
  bool help = false;
  bool gave(const std::string& name) const { return given.count(name) > 0; }
  // Flags are never silently ignored: a flag that the user gave and that this run does not use is an
  // error, "--<name> has no effect <why>".
  void refuse(const std::string& name, const std::string& why) const {
    if (gave(name)) throw std::invalid_argument("--" + name + " has no effect " + why);
  }
};

namespace option_detail {

template <typename T>
struct Unwrap {
  using type = T;
  static constexpr bool optional = false;
};
template <typename T>
struct Unwrap<std::optional<T>> {
  using type = T;
  static constexpr bool optional = true;
};

// How Boost stores a value: enums, unsigned numbers and values with a text form of their own (Row::text_form:
// a model config's "none"-able number) as text that we convert ourselves (Boost would wrap "-1" around to a huge
// unsigned number).
template <typename T>
using Stored = std::conditional_t<std::is_enum_v<T> || std::is_same_v<T, uint64_t> || Unwrap<T>::optional,
                                  std::string, T>;

// The shortest text that reads back as the same double (common/number_text.h: --help, the text form and the
// checkpoint agree).
using ::mygpt::number_text;

// A value as one line: newline, carriage return, tab and backslash written \n, \r, \t, \\ (as --help shows
// a default). The run's "name=value" lines (checkpoints, run.json) hold values so, or a prompt of "\n"
// would split its line and read back empty; unescaped_line is the inverse.
std::string escaped_line(const std::string& text);
std::string unescaped_line(const std::string& text);

}  // namespace option_detail

template <typename Config>
class OptionRow {
 public:
  virtual ~OptionRow() = default;
  virtual const std::string& name() const = 0;
  virtual const std::string& group() const = 0;
  virtual void describe(po::options_description& into) const = 0;
  // Fills the field from the parsed values; with a recipe (a name such as "gpt2"; empty: none), a row
  // that has a value for that recipe takes it when the flag was not given. Then checks the value; a bad
  // one throws std::invalid_argument naming the flag.
  virtual void fill(const po::variables_map& values, Config& config, const std::string& recipe) const = 0;
  // "value" of the field, or nullopt when an optional field is unset.
  virtual std::optional<std::string> text(const Config& config) const = 0;
  // The default as --help shows it; nullopt when the option has none.
  virtual std::optional<std::string> default_text() const = 0;
  // Whether `command` reads this option, beyond the one the table is for (Row::read_by): a command that
  // accepts another's whole command line (plan takes train's) lists only these in its --help.
  bool is_read_by(const std::string& command) const { return readers_.count(command) > 0; }
  // Whether a resumed run takes this option from its checkpoint when it is not given again: options of
  // the run do, those of the process (where and how it runs: device, threads, output, launch) do not.
  bool is_resumed() const { return resumed_; }

 protected:
  std::set<std::string> readers_;
  bool resumed_ = true;
};

// Which rows a command's --help lists; empty: all of them.
template <typename Config>
using RowFilter = std::function<bool(const OptionRow<Config>&)>;

template <typename Config, typename Field>
class Row final : public OptionRow<Config> {
  using Value = typename option_detail::Unwrap<Field>::type;
  static constexpr bool kOptional = option_detail::Unwrap<Field>::optional;
  using Stored = option_detail::Stored<Value>;

 public:
  using Check = std::function<void(const std::string& flag, const Value& value)>;

  Row(std::string group, std::string name, std::function<Field&(Config&)> field, std::string help)
      : group_(std::move(group)), name_(std::move(name)), field_(std::move(field)), help_(std::move(help)) {}

  // The value a run uses when the flag is not given (required unless the field is std::optional).
  Row& init(Value value) {
    default_ = std::move(value);
    return *this;
  }
  Row& check(Check check) {
    checks_.push_back(std::move(check));
    return *this;
  }
  // The value of a preset's recipe (the table's recipe_of names it), taken when the flag is not given.
  Row& recipe(std::string name, Value value) {
    recipes_.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  // The command cannot run without this option (for std::optional fields).
  Row& required() {
    required_ = true;
    return *this;
  }
  // `command` reads this option too (see OptionRow::is_read_by).
  Row& read_by(std::string command) {
    this->readers_.insert(std::move(command));
    return *this;
  }
  // A setting of the process, not of the run: a resume does not take it from the checkpoint.
  Row& of_process() {
    this->resumed_ = false;
    return *this;
  }
  // The names of an enum's values, in the order --help lists them.
  Row& names(std::vector<std::pair<std::string, Value>> names) {
    names_ = std::move(names);
    return *this;
  }
  // A value read and written by functions of its own (a model config field's, model/gpt_config.h) instead of
  // names(): its parse's std::invalid_argument becomes "--<name>: <its message>"; --help adds no list.
  Row& text_form(std::function<Value(const std::string&)> parse, std::function<std::string(const Value&)> text) {
    parse_ = std::move(parse);
    text_ = std::move(text);
    return *this;
  }

  const std::string& name() const override { return name_; }
  const std::string& group() const override { return group_; }

  void describe(po::options_description& into) const override {
    auto* semantic = po::value<Stored>();
    if constexpr (std::is_same_v<Value, std::vector<std::string>>) semantic->multitoken();
    // A switch alone means true (`--overwrite`); `--overwrite false` and `--overwrite=false` still work.
    if constexpr (std::is_same_v<Value, bool>) semantic->implicit_value(true, "true");
    if (required_) semantic->required();
    if (default_) semantic->default_value(stored(*default_), option_detail::escaped_line(to_text(*default_)));
    std::string help = help_;
    if constexpr (std::is_enum_v<Value>) {
      if (!names_.empty()) help += " (" + choices_text() + ")";
    }
    std::string recipes;
    for (const auto& [recipe_name, value] : recipes_) {
      recipes += (recipes.empty() ? "" : "; ") + recipe_name + ": " + to_text(value);
    }
    if (!recipes.empty()) help += " [" + recipes + "]";
    into.add_options()(name_.c_str(), semantic, help.c_str());
  }

  void fill(const po::variables_map& values, Config& config, const std::string& recipe) const override {
    const bool given = values.count(name_) > 0 && !values[name_].defaulted();
    const auto from_recipe = std::find_if(recipes_.begin(), recipes_.end(),
                                          [&](const auto& entry) { return !recipe.empty() && entry.first == recipe; });
    std::optional<Value> value;
    if (from_recipe != recipes_.end() && !given) {
      value = from_recipe->second;
    } else if (values.count(name_) > 0) {
      value = from_stored(values[name_].template as<Stored>());
    } else if (default_) {
      value = *default_;
    }
    if (!value) {
      if constexpr (kOptional) {
        field_(config) = std::nullopt;
        return;
      } else {
        throw std::logic_error("option --" + name_ + " has no default");
      }
    }
    if constexpr (std::is_same_v<Value, double>) {
      if (!std::isfinite(*value))
        throw std::invalid_argument("--" + name_ + " must be a finite number, got " + to_text(*value));
    }
    for (const auto& c : checks_) c(name_, *value);
    field_(config) = *value;
  }

  std::optional<std::string> text(const Config& config) const override {
    const Field& field = field_(const_cast<Config&>(config));
    if constexpr (kOptional) {
      if (!field) return std::nullopt;
      return to_text(*field);
    } else {
      return to_text(field);
    }
  }

  std::optional<std::string> default_text() const override {
    if (!default_) return std::nullopt;
    return to_text(*default_);
  }

 private:
  std::string to_text(const Value& v) const {
    if (text_) return text_(v);
    if constexpr (option_detail::Unwrap<Value>::optional) {
      throw std::logic_error("option --" + name_ + " has no text form");
    } else if constexpr (std::is_enum_v<Value>) {
      for (const auto& [n, e] : names_) {
        if (e == v) return n;
      }
      throw std::logic_error("option --" + name_ + " has an enum value without a name");
    } else if constexpr (std::is_same_v<Value, double>) {
      return option_detail::number_text(v);
    } else if constexpr (std::is_same_v<Value, bool>) {
      return v ? "true" : "false";
    } else if constexpr (std::is_same_v<Value, std::string>) {
      return v;
    } else if constexpr (std::is_same_v<Value, std::vector<std::string>>) {
      std::string joined;
      for (const auto& s : v) joined += (joined.empty() ? "" : " ") + s;
      return joined;
    } else {
      return std::to_string(v);
    }
  }

  Stored stored(const Value& v) const {
    if constexpr (std::is_same_v<Stored, std::string> && !std::is_same_v<Value, std::string>) {
      return to_text(v);
    } else {
      return v;
    }
  }

  Value from_stored(const Stored& s) const {
    if constexpr (std::is_same_v<Stored, std::string> && !std::is_same_v<Value, std::string>) {
      if (parse_) {
        try {
          return parse_(s);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument("--" + name_ + ": " + e.what());
        }
      }
    }
    if constexpr (option_detail::Unwrap<Value>::optional) {
      throw std::logic_error("option --" + name_ + " has no text form");
    } else if constexpr (std::is_enum_v<Value>) {
      for (const auto& [n, e] : names_) {
        if (n == s) return e;
      }
      throw std::invalid_argument("--" + name_ + " must be " + choices_text() + ", got '" + s + "'");
    } else if constexpr (std::is_same_v<Value, uint64_t>) {
      uint64_t v = 0;
      const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (error != std::errc() || end != s.data() + s.size()) {
        throw std::invalid_argument("--" + name_ + " must be a non-negative integer, got '" + s + "'");
      }
      return v;
    } else {
      return s;
    }
  }

  std::string choices_text() const {
    std::string text;
    for (size_t i = 0; i < names_.size(); ++i)
      text += (i == 0 ? "" : i + 1 == names_.size() ? " or " : ", ") + names_[i].first;
    return text;
  }

  std::string group_, name_;
  std::function<Field&(Config&)> field_;
  std::string help_;
  std::optional<Value> default_;
  std::vector<std::pair<std::string, Value>> recipes_;
  std::vector<Check> checks_;
  std::vector<std::pair<std::string, Value>> names_;
  std::function<Value(const std::string&)> parse_;
  std::function<std::string(const Value&)> text_;
  bool required_ = false;
};

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
  }
  Parsed<Config> parsed;
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

// Checks shared by many rows; each throws std::invalid_argument naming the flag.
struct PositiveCheck {
  template <typename T>
  void operator()(const std::string& flag, const T& v) const {
    if (!(v > 0)) {
      std::ostringstream value;
      value << v;
      throw std::invalid_argument("--" + flag + " must be positive, got " + value.str());
    }
  }
};
struct NonNegativeCheck {
  template <typename T>
  void operator()(const std::string& flag, const T& v) const {
    if (v < 0) {
      std::ostringstream value;
      value << v;
      throw std::invalid_argument("--" + flag + " must not be negative, got " + value.str());
    }
  }
};
inline constexpr PositiveCheck positive{};
inline constexpr NonNegativeCheck non_negative{};
inline std::function<void(const std::string&, const double&)> in_range(double lo, double hi, bool hi_inclusive) {
  return [=](const std::string& flag, const double& v) {
    if (v < lo || v > hi || (!hi_inclusive && v == hi)) {
      throw std::invalid_argument("--" + flag + " must be in [" + option_detail::number_text(lo) + ", " +
                                  option_detail::number_text(hi) + (hi_inclusive ? "]" : ")") + ", got " +
                                  option_detail::number_text(v));
    }
  };
}
// lo < v < hi, both ends open (NaN fails too).
inline std::function<void(const std::string&, const double&)> in_open_range(double lo, double hi) {
  return [=](const std::string& flag, const double& v) {
    if (!(v > lo && v < hi)) {
      throw std::invalid_argument("--" + flag + " must be above " + option_detail::number_text(lo) +
                                  (std::isinf(hi) ? "" : " and below " + option_detail::number_text(hi)) + ", got " +
                                  option_detail::number_text(v));
    }
  };
}
inline void not_empty(const std::string& flag, const std::string& v) {
  if (v.empty()) throw std::invalid_argument("--" + flag + " must not be empty");
}
// Text that a tokenizer reads (prompts) is UTF-8, as text files are (common/file_io.h).
inline void utf8_text(const std::string& flag, const std::string& v) { require_utf8(v, "--" + flag); }

}  // namespace mygpt
