#include "eval/core_prompts.h"

#include <algorithm>
#include <stdexcept>

#include "common/python_random.h"
#include "tokenizer/text_codec.h"

namespace mygpt {
namespace {

// The seeds nanochat uses: one shuffle of each task's items, and one generator per item for its examples.
constexpr uint64_t kShuffleSeed = 1337;
constexpr uint64_t kFewshotSeed = 1234;

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The code point that starts at text[i] (text is UTF-8, checked when read) and its length.
std::pair<char32_t, size_t> code_point_at(std::string_view text, size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  const size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (i + n > text.size()) return {0xFFFD, 1};
  char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  return {c, n};
}

size_t common_prefix(const std::vector<std::vector<int64_t>>& rows) {
  size_t shortest = rows[0].size();
  for (const auto& r : rows) shortest = std::min(shortest, r.size());
  for (size_t i = 0; i < shortest; ++i) {
    for (const auto& r : rows) {
      if (r[i] != rows[0][i]) return i;
    }
  }
  return shortest;
}

size_t common_suffix(const std::vector<std::vector<int64_t>>& rows) {
  size_t shortest = rows[0].size();
  for (const auto& r : rows) shortest = std::min(shortest, r.size());
  for (size_t i = 0; i < shortest; ++i) {
    for (const auto& r : rows) {
      if (r[r.size() - 1 - i] != rows[0][rows[0].size() - 1 - i]) return i;
    }
  }
  return shortest;
}

}  // namespace

std::string python_strip(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end) {
    const auto [c, n] = code_point_at(text, begin);
    if (!is_python_space(c)) break;
    begin += n;
  }
  while (end > begin) {
    size_t start = end - 1;  // back to the first byte of the last code point
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    if (!is_python_space(code_point_at(text, start).first)) break;
    end = start;
  }
  return std::string(text.substr(begin, end - begin));
}

std::vector<size_t> core_item_order(size_t items, int64_t max_per_task) {
  std::vector<size_t> order(items);
  for (size_t i = 0; i < items; ++i) order[i] = i;
  PythonRandom(kShuffleSeed).shuffle(order);
  if (max_per_task > 0 && static_cast<size_t>(max_per_task) < items) order.resize(static_cast<size_t>(max_per_task));
  return order;
}

std::vector<size_t> core_fewshot(size_t count, size_t index, int64_t num_fewshot) {
  if (num_fewshot <= 0) return {};
  std::vector<size_t> others;
  others.reserve(count - 1);
  for (size_t i = 0; i < count; ++i) {
    if (i != index) others.push_back(i);
  }
  PythonRandom rng(kFewshotSeed + index);
  return rng.sample(others, std::min(others.size(), static_cast<size_t>(num_fewshot)));
}

std::vector<std::string> render_core_prompts(const CoreTask& task, const CoreItem& item,
                                             const std::vector<const CoreItem*>& fewshot) {
  const std::string& d = task.continuation_delimiter;
  std::string shots;
  std::vector<std::string> prompts;
  switch (task.type) {
    case CoreTaskType::multiple_choice:
      for (const CoreItem* e : fewshot) shots += e->query + d + e->choices[static_cast<size_t>(e->gold)] + "\n\n";
      for (const std::string& choice : item.choices) prompts.push_back(shots + item.query + d + choice);
      break;
    case CoreTaskType::schema:
      for (const CoreItem* e : fewshot) {
        shots += e->context_options[static_cast<size_t>(e->gold)] + d + e->continuation + "\n\n";
      }
      for (const std::string& option : item.context_options) prompts.push_back(shots + option + d + item.continuation);
      break;
    case CoreTaskType::language_modeling: {
      for (const CoreItem* e : fewshot) shots += python_strip(e->context) + d + e->continuation + "\n\n";
      const std::string without = shots + python_strip(item.context) + d;
      // Stripped so that trailing whitespace is not left to join the continuation's first token.
      prompts.push_back(python_strip(without));
      prompts.push_back(without + item.continuation);
      break;
    }
  }
  return prompts;
}

ScoringItem core_scoring_item(const CoreTask& task, const CoreItem& item, const std::vector<const CoreItem*>& fewshot,
                              const TextCodec& codec, int64_t bos) {
  const std::string where = task.file.string() + ":" + std::to_string(item.line);
  std::vector<std::vector<int64_t>> rows;
  for (const std::string& prompt : render_core_prompts(task, item, fewshot)) {
    std::vector<int64_t> ids;
    if (bos >= 0) ids.push_back(bos);
    try {
      const auto text = codec.encode_ordinary(prompt);
      ids.insert(ids.end(), text.begin(), text.end());
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ": the model's tokenizer cannot encode this item: " + e.what());
    }
    rows.push_back(std::move(ids));
  }
  ScoringItem out;
  out.gold = item.gold;
  switch (task.type) {
    case CoreTaskType::multiple_choice: {
      const auto start = static_cast<int64_t>(common_prefix(rows));
      for (auto& r : rows) {
        const auto end = static_cast<int64_t>(r.size());
        out.rows.push_back({std::move(r), start, end});
      }
      break;
    }
    case CoreTaskType::schema: {
      const auto suffix = static_cast<int64_t>(common_suffix(rows));
      for (auto& r : rows) {
        const auto end = static_cast<int64_t>(r.size());
        out.rows.push_back({std::move(r), end - suffix, end});
      }
      break;
    }
    case CoreTaskType::language_modeling: {
      const auto& without = rows[0];
      const auto& with = rows[1];
      if (without.size() >= with.size() || !std::equal(without.begin(), without.end(), with.begin())) {
        throw std::invalid_argument(where + ": the prompt without its continuation does not tokenize to a prefix of "
                                            "the prompt with it (language modeling needs one)");
      }
      out.rule = ScoringRule::greedy_match;
      out.rows.push_back({with, static_cast<int64_t>(without.size()), static_cast<int64_t>(with.size())});
      break;
    }
  }
  return out;
}

}  // namespace mygpt
