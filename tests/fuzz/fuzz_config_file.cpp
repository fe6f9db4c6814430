// --config files through the options table: a table with a row of every field type the real tables
// use (integers, doubles with checks, bools, strings, enums, lists, optionals) parses the fuzzer's
// bytes as `--config FILE`. Bad files must be std::invalid_argument or Boost's parse errors.
#include <boost/program_options.hpp>
#include <stdexcept>

#include "launcher/option_table.h"
#include "tests/fuzz/fuzz_input_file.h"

namespace {

enum class Mode { first, second };

struct Fields {
  int64_t steps{};
  uint64_t seed{};
  double lr{};
  bool flag{};
  std::string name;
  Mode mode{};
  std::vector<std::string> inputs;
  std::optional<int64_t> size;
  std::optional<std::string> path;
};

const mygpt::OptionTable<Fields>& table() {
  static const mygpt::OptionTable<Fields> t = [] {
    mygpt::OptionTable<Fields> t;
    t.add("steps", &Fields::steps, "").init(10).check(mygpt::positive);
    t.add("seed", &Fields::seed, "").init(uint64_t{1});
    t.add("lr", &Fields::lr, "").init(1e-3).check(mygpt::positive);
    t.add("flag", &Fields::flag, "").init(false);
    t.add("name", &Fields::name, "").init("x");
    t.add("mode", &Fields::mode, "").names({{"first", Mode::first}, {"second", Mode::second}}).init(Mode::first);
    t.add("inputs", &Fields::inputs, "").init(std::vector<std::string>{"a"});
    t.add("size", &Fields::size, "").check(mygpt::non_negative);
    t.add("path", &Fields::path, "");
    return t;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mygpt::fuzz::write_input("options.cfg", data, size);
  try {
    const auto parsed = table().parse({"--config", path.string()});
    (void)table().to_text(parsed.config);
  } catch (const std::invalid_argument&) {
  } catch (const boost::program_options::error&) {
  }
  return 0;
}
