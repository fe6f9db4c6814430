#pragma once
// Character-level tokenizer: the vocabulary is the sorted set of Unicode code points in the training
// text, so ids are stable for a given text and the tokenizer can be stored as a plain string.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mygpt {

class CharTokenizer {
 public:
  // Builds the vocabulary from text (UTF-8). Throws std::invalid_argument for empty or invalid UTF-8 text.
  static CharTokenizer from_text(std::string_view text);
  // Rebuilds a tokenizer from vocabulary() (every code point once, in id order).
  static CharTokenizer from_vocabulary(std::string_view vocabulary);

  // Throws std::invalid_argument naming the first character that is not in the vocabulary.
  std::vector<int64_t> encode(std::string_view text) const;
  // Ids outside the vocabulary throw std::invalid_argument.
  std::string decode(const std::vector<int64_t>& ids) const;

  int64_t vocab_size() const { return static_cast<int64_t>(chars_.size()); }
  // The vocabulary as one UTF-8 string, code points in id order.
  std::string vocabulary() const;

 private:
  std::vector<char32_t> chars_;
  std::unordered_map<char32_t, int64_t> ids_;
};

// UTF-8 helpers shared by the tokenizer and its tests. decode throws std::invalid_argument on bad UTF-8.
std::vector<char32_t> utf8_decode(std::string_view text);
void utf8_append(std::string& out, char32_t code_point);

}  // namespace mygpt
