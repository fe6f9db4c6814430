#pragma once
// Where the tests find the public data (Tiny Shakespeare, GPT-2's encoder.json and vocab.bpe, HellaSwag),
// one lookup for every test (the shell tests' is tests/lib.sh's test_data_dir, the same order):
//   $MYGPT_TEST_DATA when set (scripts/test.sh sets it to its download cache where ../shared/data is absent);
//   else ../shared/data beside the checkout, where it exists;
//   else the download cache scripts/fetch_test_data.sh fills: $XDG_CACHE_HOME/mygpt-ddp/data, or
//   ~/.cache/mygpt-ddp/data.
// And text that tests can make themselves where the data is absent.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#ifndef MYGPT_SHARED_DATA_DIR
#define MYGPT_SHARED_DATA_DIR "../shared/data"
#endif

namespace mygpt::testing {

inline std::filesystem::path test_data_dir() {
  if (const char* chosen = std::getenv("MYGPT_TEST_DATA"); chosen != nullptr && *chosen != '\0') return chosen;
  std::error_code ec;
  if (std::filesystem::is_directory(MYGPT_SHARED_DATA_DIR, ec)) return MYGPT_SHARED_DATA_DIR;
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::filesystem::path base = cache != nullptr && *cache != '\0' ? std::filesystem::path(cache)
                                     : home != nullptr                  ? std::filesystem::path(home) / ".cache"
                                                                        : std::filesystem::path(".cache");
  return base / "mygpt-ddp" / "data";
}

// English-like text of about `bytes` bytes (words, punctuation, lines, paragraphs), the same every run: for
// training a small tokenizer where Tiny Shakespeare is absent.
inline std::string generated_english(std::size_t bytes) {
  static const char* const words[] = {
      "the",   "king",   "queen", "and",    "of",    "to",    "my",     "lord",   "thou",  "art",    "what",
      "is",    "this",   "that",  "with",   "not",   "for",   "your",   "have",   "be",    "he",     "she",
      "we",    "they",   "will",  "shall",  "would", "good",  "night",  "day",    "love",  "death",  "heart",
      "sweet", "come",   "go",    "speak",  "hear",  "know",  "man",    "woman",  "time",  "world",  "there",
      "here",  "now",    "then",  "upon",   "against", "friend", "enemy", "crown", "blood", "honour", "fortune",
      "Romeo", "Juliet", "First", "Citizen", "MENENIUS", "Rome", "I'll", "don't", "'tis", "o'er", "1", "42", "1600"};
  static const char* const marks[] = {",", ".", ";", ":", "!", "?", "", "", "", ""};
  std::string text;
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  const auto next = [&](uint64_t n) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    return state % n;
  };
  // Made-up words of 1 to 4 syllables beside the common ones: enough distinct words that a BPE trained on
  // the text finds thousands of merges (the tests' tokenizers have 1024 and 2048 tokens).
  static const char* const syllables[] = {"ka", "lo", "mi", "ther", "an", "st", "re", "qu", "on", "ph", "ul",
                                          "ze", "brö", "in", "gh", "ed", "ou", "vy", "ch", "ar", "té", "wn"};
  const auto word = [&] {
    if (next(2) == 0) return std::string(words[next(std::size(words))]);
    std::string made;
    for (uint64_t s = 0, n = 1 + next(4); s < n; ++s) made += syllables[next(std::size(syllables))];
    return next(8) == 0 ? std::string(1, static_cast<char>(made[0] - 'a' + 'A')) + made.substr(1) : made;
  };
  while (text.size() < bytes) {
    const uint64_t length = 3 + next(10);
    for (uint64_t i = 0; i < length; ++i) {
      text += word();
      text += i + 1 < length ? marks[next(std::size(marks))] + std::string(" ") : std::string(".");
    }
    text += next(5) == 0 ? "\n\n" : "\n";
  }
  return text;
}

// A text to train a test's tokenizer on: Tiny Shakespeare where the data has it, else generated English
// written into `scratch`.
inline std::filesystem::path tokenizer_training_text(const std::filesystem::path& scratch) {
  const std::filesystem::path shakespeare = test_data_dir() / "tinyshakespeare.txt";
  std::error_code ec;
  if (std::filesystem::exists(shakespeare, ec)) return shakespeare;
  const std::filesystem::path made = scratch / "generated_english.txt";
  std::ofstream(made, std::ios::binary) << generated_english(400000);
  return made;
}

}  // namespace mygpt::testing
