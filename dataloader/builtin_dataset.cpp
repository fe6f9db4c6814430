#include "dataloader/builtin_dataset.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <unordered_set>

namespace mygpt {
namespace {

constexpr size_t kDigits = 6;  // 10^6 distinct prompts: the training text covers only a few percent

TaskExample sort_example(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> digit(0, 9);
  std::string digits;
  for (size_t i = 0; i < kDigits; ++i) digits += static_cast<char>('0' + digit(rng));
  std::string sorted = digits;
  std::sort(sorted.begin(), sorted.end());
  return {digits + "=", sorted + "\n"};
}

void require_known(const std::string& data_spec) {
  if (data_spec != "builtin:sort") {
    throw std::invalid_argument("unknown built-in dataset '" + data_spec + "' (known: builtin:sort)");
  }
}

}  // namespace

std::vector<std::string> builtin_dataset_names() { return {"sort"}; }

bool is_builtin_dataset(const std::string& data_spec) { return data_spec.rfind("builtin:", 0) == 0; }

std::string builtin_dataset_text(const std::string& data_spec, size_t lines, uint64_t seed) {
  require_known(data_spec);
  std::mt19937_64 rng(seed);
  std::string text;
  text.reserve(lines * (2 * kDigits + 2));
  for (size_t i = 0; i < lines; ++i) {
    const TaskExample e = sort_example(rng);
    text += e.prompt + e.answer;
  }
  return text;
}

std::vector<TaskExample> builtin_heldout_examples(const std::string& data_spec, size_t count, size_t training_lines,
                                                  uint64_t seed) {
  require_known(data_spec);
  std::unordered_set<std::string> seen;
  {
    std::mt19937_64 rng(seed);  // replays the training text's stream
    for (size_t i = 0; i < training_lines; ++i) seen.insert(sort_example(rng).prompt);
  }
  std::mt19937_64 rng(seed ^ 0xA5A5A5A5DEADBEEFULL);  // a stream disjoint from training in practice
  std::vector<TaskExample> out;
  while (out.size() < count) {
    TaskExample e = sort_example(rng);
    if (!seen.count(e.prompt)) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace mygpt
