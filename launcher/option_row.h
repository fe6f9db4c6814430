#pragma once
// One row of an options table (launcher/option_table.h): everything about one option, its name, the field it
// fills, its default, its help, its checks, the values of the presets' recipes and the options it needs; and
// Parsed, a command's typed options with the names the user gave.
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
#include <variant>
#include <vector>

#include "common/number_text.h"

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
  // The names of the table's rows (OptionTable::parse and ::typed set them): gave and refuse take only these,
  // so that a misspelt name in the code fails loudly (std::logic_error) rather than never being true.
  std::shared_ptr<const std::set<std::string>> names;
  bool gave(const std::string& name) const {
    require_option(name);
    return given.count(name) > 0;
  }
  // Flags are never silently ignored: a flag that the user gave and that this run does not use is an
  // error, "--<name> has no effect <why>".
  void refuse(const std::string& name, const std::string& why) const {
    if (gave(name)) throw std::invalid_argument("--" + name + " has no effect " + why);
  }
  void require_option(const std::string& name) const {
    if (names && names->count(name) == 0) {
      throw std::logic_error("no option --" + name + " in the table (a misspelt name in the code)");
    }
  }
};

// A value of a preset's recipe as its table (OptionTable::recipe) writes it; the row it names converts it.
struct RecipeValue {
  std::variant<int64_t, double, std::string> value;
  RecipeValue(int v) : value(int64_t{v}) {}  // NOLINT: a recipe table lists plain literals
  RecipeValue(int64_t v) : value(v) {}       // NOLINT
  RecipeValue(double v) : value(v) {}        // NOLINT
  RecipeValue(const char* v) : value(std::string(v)) {}  // NOLINT
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

// A type of our own (a struct such as common/duration.h's Duration), read and written only by its Row::text_form.
template <typename T>
inline constexpr bool kOwnType = std::is_class_v<T> && !std::is_same_v<T, std::string> &&
                                 !std::is_same_v<T, std::vector<std::string>> && !Unwrap<T>::optional;

// How Boost stores a value: enums, unsigned numbers and values with a text form of their own (Row::text_form:
// a model config's "none"-able number, a type of our own) as text that we convert ourselves (Boost would wrap
// "-1" around to a huge unsigned number).
template <typename T>
using Stored = std::conditional_t<std::is_enum_v<T> || std::is_same_v<T, uint64_t> || Unwrap<T>::optional ||
                                      kOwnType<T>,
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
  // The value `recipe` (a preset's recipe table, OptionTable::recipe) gives this option; a value of another
  // type is std::logic_error.
  virtual void add_recipe(const std::string& recipe, const RecipeValue& value) = 0;

  // A declared dependency (Row::only_with, Row::refused_with): the option, given, is refused with
  // "--<name> has no effect <why>" where `applies` holds of the run's options. `reads` names the options
  // the condition reads; OptionTable::check_declarations finds each among the rows.
  struct Refusal {
    std::vector<std::string> reads;
    std::function<bool(const Parsed<Config>&)> applies;
    std::function<std::string(const Parsed<Config>&)> why;
  };
  const std::vector<Refusal>& refusals() const { return refusals_; }

 protected:
  std::set<std::string> readers_;
  bool resumed_ = true;
  std::vector<Refusal> refusals_;
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
  // Given, the option needs `holds` of the run's options (which read the option `reads`); where that
  // fails it is refused: "--<name> has no effect <why>".
  Row& only_with(std::string reads, std::function<bool(const Parsed<Config>&)> holds, std::string why) {
    return refused_with({std::move(reads)}, [holds](const Parsed<Config>& run) { return !holds(run); },
                        std::move(why));
  }
  // Given, the option is refused where `applies` holds of the run's options (which read the options `reads`).
  Row& refused_with(std::vector<std::string> reads, std::function<bool(const Parsed<Config>&)> applies,
                    std::string why) {
    return refused_with(std::move(reads), std::move(applies), [why](const Parsed<Config>&) { return why; });
  }
  // The same, with a reason that names a value of the run's (e.g. its precision).
  Row& refused_with(std::vector<std::string> reads, std::function<bool(const Parsed<Config>&)> applies,
                    std::function<std::string(const Parsed<Config>&)> why) {
    this->refusals_.push_back({std::move(reads), std::move(applies), std::move(why)});
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

  void add_recipe(const std::string& recipe, const RecipeValue& given) override {
    std::optional<Value> value;
    if constexpr (std::is_same_v<Value, int64_t>) {
      if (const auto* v = std::get_if<int64_t>(&given.value)) value = *v;
    } else if constexpr (std::is_same_v<Value, double>) {
      if (const auto* v = std::get_if<double>(&given.value)) value = *v;
      if (const auto* v = std::get_if<int64_t>(&given.value)) value = static_cast<double>(*v);
    } else if constexpr (std::is_same_v<Value, std::string>) {
      if (const auto* v = std::get_if<std::string>(&given.value)) value = *v;
    }
    if (!value) throw std::logic_error("recipe " + recipe + ": its value of --" + name_ + " is of another type");
    recipes_.emplace_back(recipe, std::move(*value));
  }

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
    if constexpr (option_detail::Unwrap<Value>::optional || option_detail::kOwnType<Value>) {
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
    if constexpr (option_detail::Unwrap<Value>::optional || option_detail::kOwnType<Value>) {
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

}  // namespace mygpt
