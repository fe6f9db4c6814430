#pragma once
// The parts of byte-level BPE that GPT-2's tokenizer (encoder.json + vocab.bpe) and Hugging Face's
// tokenizer.json share: the byte alphabet tokens are spelled in, the merge table, the merging of one
// pre-token, a cache of merged pre-tokens and a PCRE2 pattern that splits text into pre-tokens.
// Internal to dataloader/; not thread-safe (each tokenizer serializes its own encode calls).
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mygpt::bpe {

// OpenAI's bytes_to_unicode(): vocabularies spell every byte as a printable code point, so that tokens
// are readable strings. Bytes that are already printable (in Latin-1) stand for themselves; the other
// 68 get 256, 257, ... in byte order. The spelling of one byte is one or two UTF-8 bytes.
std::string alphabet_spelling_of_byte(unsigned char byte);
// The raw bytes a vocabulary string stands for, or nullopt if it leaves the byte alphabet.
std::optional<std::string> bytes_of_alphabet_spelling(std::string_view spelling);

struct TransparentStringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, TransparentStringHash, std::equal_to<>>;

struct MergeRule {
  int32_t rank;    // line order in vocab.bpe: lower merges first
  int32_t merged;  // id of left + right
};

// Pair of token ids -> merge rule, as one flat open-addressing array: BPE on a fresh word is
// dominated by these lookups, and a node-based map costs two cache misses per lookup.
class MergeTable {
 public:
  explicit MergeTable(std::size_t max_rules) {
    std::size_t capacity = 1;
    while (capacity < 2 * max_rules) capacity *= 2;  // load factor <= 1/2 keeps probe runs short
    slots_.assign(capacity, Slot{kEmpty, {}});
    mask_ = capacity - 1;
  }

  // False if the pair already has a rule.
  bool insert(int32_t left, int32_t right, MergeRule rule) {
    const uint64_t key = pair_key(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return false;
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, rule};
        ++size_;
        return true;
      }
    }
  }

  // Replaces the pair's rule if it has one: tokenizers keeps a duplicated merge's last rank.
  void assign(int32_t left, int32_t right, MergeRule rule) {
    const uint64_t key = pair_key(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) {
        slots_[i].rule = rule;
        return;
      }
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, rule};
        ++size_;
        return;
      }
    }
  }

  const MergeRule* find(int32_t left, int32_t right) const {
    const uint64_t key = pair_key(left, right);
    for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].rule;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are below 2^31, so no pair has this key
  struct Slot {
    uint64_t key;
    MergeRule rule;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::size_t slot_of(uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;  // Fibonacci hashing
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

// How merges are applied to one pre-token, which differs between the two reference implementations
// only for merge lists where a merge's result ranks before the merge that makes it (never in a trained
// list, but tokenizer.json files are edited by hand).
enum class MergeOrder {
  // encoder.py's bpe(): every occurrence of the best pair is merged before the pairs they form compete.
  whole_rounds,
  // Hugging Face tokenizers' Word::merge_all: one merge at a time, by (rank, position); the pairs it
  // forms compete at once.
  one_at_a_time,
};

// Pre-token bytes -> its BPE tokens, in one open-addressing array over two arenas: once the
// cache is warm, a lookup here is most of what encoding a word costs, and a node-based map
// spends it on a modulo and pointer chasing.
class WordCache {
 public:
  static constexpr std::size_t kMaxWordBytes = 64;   // longer pre-tokens rarely repeat
  static constexpr std::size_t kMaxWords = 1 << 19;  // bounds memory on huge corpora: then start afresh

  WordCache() { clear(); }

  static uint64_t hash(std::string_view word) {
    uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a: pre-tokens are short
    for (const char c : word) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
    return h;
  }

  std::optional<std::span<const int32_t>> find(std::string_view word, uint64_t word_hash) const {
    for (std::size_t i = slot_of(word_hash);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.token_count == 0) return std::nullopt;
      if (slot.hash == word_hash && std::string_view(words_).substr(slot.word_offset, slot.word_size) == word) {
        return std::span<const int32_t>(tokens_).subspan(slot.tokens_offset, slot.token_count);
      }
    }
  }

  // `word` must be absent and no longer than kMaxWordBytes; `tokens` not empty.
  void insert(std::string_view word, uint64_t word_hash, std::span<const int32_t> tokens) {
    if (size_ == kMaxWords) clear();
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(Slot{word_hash, static_cast<uint32_t>(words_.size()), static_cast<uint32_t>(word.size()),
               static_cast<uint32_t>(tokens_.size()), static_cast<uint32_t>(tokens.size())});
    words_.append(word);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    ++size_;
  }

  void clear() {
    slots_.assign(4096, Slot{});
    mask_ = slots_.size() - 1;
    words_.clear();
    tokens_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t word_offset = 0, word_size = 0;
    uint32_t tokens_offset = 0, token_count = 0;  // 0 tokens marks an empty slot
  };

  std::size_t slot_of(uint64_t word_hash) const {
    return static_cast<std::size_t>((word_hash * 0x9E3779B97F4A7C15ull) >> 40) & mask_;
  }
  void place(const Slot& entry) {
    std::size_t i = slot_of(entry.hash);
    while (slots_[i].token_count != 0) i = (i + 1) & mask_;
    slots_[i] = entry;
  }
  void grow() {
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& entry : old) {
      if (entry.token_count != 0) place(entry);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::string words_;
  std::vector<int32_t> tokens_;
  std::size_t size_ = 0;
};

// Merges the bytes of pre-tokens into tokens, with a cache of the pre-tokens seen: the BPE of one word.
class WordEncoder {
 public:
  WordEncoder(const std::array<int32_t, 256>& byte_token, MergeTable merges, MergeOrder order)
      : byte_token_(byte_token), merges_(std::move(merges)), order_(order) {}

  // Appends the tokens of `word` (its raw bytes) to out.
  void encode(std::string_view word, std::vector<int32_t>& out);

 private:
  void merge(std::string_view word, std::vector<int32_t>& out);

  std::array<int32_t, 256> byte_token_;
  MergeTable merges_;
  MergeOrder order_;
  WordCache cache_;
  std::vector<int32_t> word_tokens_;
  // Merge working state, a doubly linked list of parts over the word's byte positions.
  std::vector<int32_t> part_token_;  // -1 once merged into its left neighbour
  std::vector<uint32_t> part_next_, part_prev_;
  std::vector<std::pair<int32_t, uint32_t>> candidate_heap_;  // (rank, left position), min-heap
  std::vector<uint32_t> merged_this_round_;
};

// A compiled PCRE2 pattern (UTF, Unicode properties, JIT where available) that finds pre-tokens; one
// match at a time. Bytes that are not UTF-8 never match, so they fall between matches.
class PretokenPattern {
 public:
  // A pattern that does not compile throws std::invalid_argument starting with `what`.
  PretokenPattern(const std::string& pattern, const std::string& what);
  PretokenPattern(PretokenPattern&&) noexcept;
  PretokenPattern& operator=(PretokenPattern&&) noexcept;
  ~PretokenPattern();

  // The first match [begin, end) at or after `offset`; nullopt when none is left. A match may be empty.
  std::optional<std::pair<std::size_t, std::size_t>> next(std::string_view text, std::size_t offset);

 private:
  struct Compiled;  // keeps pcre2.h out of this header
  std::unique_ptr<Compiled> compiled_;
};

// GPT-2's split pattern (also tokenizers' ByteLevel pre-tokenizer with use_regex), for PCRE2.
std::string gpt2_split_pattern();
// A pattern written for Oniguruma or Python's regex (as tokenizer.json's Split holds), made to split in
// PCRE2 as it does there: \s and \S spelled out as Unicode White_Space, which PCRE2's \s is not exactly,
// \w, \d and \b by Oniguruma's definitions (its \w takes marks and all connector punctuation), and each
// general category (\p{L}, \p{N}, ...) with the code points tokenizers' newer Unicode adds to it.
std::string pcre2_pattern_of(std::string_view pattern);

}  // namespace mygpt::bpe
