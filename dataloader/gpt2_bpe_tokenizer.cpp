#include "dataloader/gpt2_bpe_tokenizer.h"
#include "common/file_io.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace mygpt {
namespace {

namespace fs = std::filesystem;

// OpenAI's bytes_to_unicode(): encoder.json and vocab.bpe spell every byte as a printable code
// point, so that tokens are readable strings. Bytes that are already printable (in Latin-1) stand
// for themselves; the other 68 get 256, 257, ... in byte order.
struct ByteAlphabet {
  std::array<char32_t, 256> code_point_of_byte{};
  std::array<int16_t, 256 + 68> byte_of_code_point{};
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet = [] {
    ByteAlphabet a;
    a.byte_of_code_point.fill(-1);
    char32_t next_substitute = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
      const char32_t code_point = printable ? static_cast<char32_t>(byte) : next_substitute++;
      a.code_point_of_byte[byte] = code_point;
      a.byte_of_code_point[code_point] = static_cast<int16_t>(byte);
    }
    return a;
  }();
  return alphabet;
}

// The alphabet's code points are all below 0x800, so one or two UTF-8 bytes each.
std::string alphabet_spelling_of_byte(unsigned char byte) {
  const char32_t cp = byte_alphabet().code_point_of_byte[byte];
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
}

// The raw bytes a vocabulary string stands for, or nullopt if it leaves the byte alphabet.
std::optional<std::string> bytes_of_alphabet_spelling(std::string_view spelling) {
  const auto& table = byte_alphabet().byte_of_code_point;
  std::string bytes;
  for (std::size_t i = 0; i < spelling.size();) {
    const auto lead = static_cast<unsigned char>(spelling[i]);
    char32_t cp = lead;
    if (lead >= 0x80) {
      const bool two_byte = (lead & 0xE0) == 0xC0 && i + 1 < spelling.size() &&
                            (static_cast<unsigned char>(spelling[i + 1]) & 0xC0) == 0x80;
      if (!two_byte) return std::nullopt;
      cp = ((lead & 0x1Fu) << 6) | (static_cast<unsigned char>(spelling[i + 1]) & 0x3Fu);
      ++i;
    }
    ++i;
    if (cp >= table.size() || table[cp] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(table[cp]));
  }
  return bytes;
}

struct TransparentStringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, TransparentStringHash, std::equal_to<>>;

// Reads encoder.json into id -> raw bytes; returns vocabulary string -> id for parsing the merges.
StringMap<int32_t> read_encoder_json(const fs::path& path, const std::string& text,
                                     std::vector<std::string>& token_bytes) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const bool ended_early = e.byte >= text.size();
    throw std::invalid_argument(path.string() + ": malformed JSON" + (ended_early ? " (file truncated?)" : "") + ": " +
                                e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for any type (found by fuzzing)
    throw std::invalid_argument(path.string() + ": malformed JSON: " + e.what());
  }
  const std::string where = path.string() + ": ";
  if (!json.is_object()) throw std::invalid_argument(where + "expected a JSON object of token -> id");
  if (json.size() != Gpt2BpeTokenizer::kVocabSize) {
    throw std::invalid_argument(where + "expected " + std::to_string(Gpt2BpeTokenizer::kVocabSize) + " tokens, found " +
                                std::to_string(json.size()));
  }
  token_bytes.assign(Gpt2BpeTokenizer::kVocabSize, std::string());
  StringMap<int32_t> ids_by_spelling;
  for (auto it = json.begin(); it != json.end(); ++it) {
    const std::string& spelling = it.key();
    const auto quoted = [&] { return nlohmann::json(spelling).dump(); };  // escaped, so the message stays one line
    const auto& value = it.value();
    const int64_t id = value.is_number_integer() ? value.get<int64_t>() : -1;
    if (id < 0 || id >= static_cast<int64_t>(Gpt2BpeTokenizer::kVocabSize)) {
      throw std::invalid_argument(where + "token " + quoted() + " has id " + value.dump() +
                                  ", expected an integer in 0.." + std::to_string(Gpt2BpeTokenizer::kVocabSize - 1));
    }
    std::optional<std::string> bytes;
    if (spelling == Gpt2BpeTokenizer::kEndOfText) {
      if (id != Gpt2BpeTokenizer::kEndOfTextId) {
        throw std::invalid_argument(where + "<|endoftext|> has id " + std::to_string(id) + ", expected 50256");
      }
      bytes = spelling;
    } else {
      bytes = bytes_of_alphabet_spelling(spelling);
      if (!bytes || bytes->empty()) {
        throw std::invalid_argument(where + "token " + quoted() + " is not spelled in GPT-2's byte alphabet");
      }
    }
    if (!token_bytes[id].empty()) throw std::invalid_argument(where + "id " + std::to_string(id) + " is used twice");
    token_bytes[id] = std::move(*bytes);
    ids_by_spelling.emplace(spelling, static_cast<int32_t>(id));
  }
  return ids_by_spelling;
}

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

MergeTable read_vocab_bpe(const fs::path& path, const std::string& text, const StringMap<int32_t>& ids_by_spelling,
                          const std::string& vocabulary_name) {
  MergeTable merges(Gpt2BpeTokenizer::kMergeCount);
  std::size_t line_number = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t newline = text.find('\n', pos);
    const bool terminated = newline != std::string::npos;
    std::string_view line = std::string_view(text).substr(pos, (terminated ? newline : text.size()) - pos);
    pos = terminated ? newline + 1 : text.size();
    ++line_number;
    if (line.ends_with('\r')) line.remove_suffix(1);  // tolerate a CRLF copy
    const std::string where = path.string() + ":" + std::to_string(line_number) + ": ";
    const std::string hint = terminated ? "" : " (file truncated?)";
    if (line_number == 1) {
      if (!line.starts_with("#version")) throw std::invalid_argument(where + "expected a '#version' header line");
      continue;
    }
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      throw std::invalid_argument(where + "expected two tokens separated by one space" + hint);
    }
    const std::string_view left = line.substr(0, space);
    const std::string_view right = line.substr(space + 1);
    const std::string merged = std::string(left) + std::string(right);
    const auto left_it = ids_by_spelling.find(left);
    const auto right_it = ids_by_spelling.find(right);
    const auto merged_it = ids_by_spelling.find(merged);
    if (left_it == ids_by_spelling.end() || right_it == ids_by_spelling.end() || merged_it == ids_by_spelling.end()) {
      throw std::invalid_argument(where + "merge '" + std::string(line) + "' uses a token missing from " + vocabulary_name +
                                  hint);
    }
    if (merges.size() == Gpt2BpeTokenizer::kMergeCount) {
      throw std::invalid_argument(where + "more than " + std::to_string(Gpt2BpeTokenizer::kMergeCount) + " merges");
    }
    const MergeRule rule{static_cast<int32_t>(merges.size()), merged_it->second};
    if (!merges.insert(left_it->second, right_it->second, rule)) {
      throw std::invalid_argument(where + "duplicate merge '" + std::string(line) + "'");
    }
  }
  if (line_number == 0) throw std::invalid_argument(path.string() + ": empty file, expected a '#version' header line");
  if (!text.ends_with('\n')) {
    throw std::invalid_argument(path.string() + ": does not end with a newline (file truncated?)");
  }
  if (merges.size() != Gpt2BpeTokenizer::kMergeCount) {
    throw std::invalid_argument(path.string() + ": expected " + std::to_string(Gpt2BpeTokenizer::kMergeCount) +
                                " merges, found " + std::to_string(merges.size()));
  }
  return merges;
}

template <auto FreeFunction>
struct Pcre2Deleter {
  template <typename T>
  void operator()(T* object) const noexcept {
    FreeFunction(object);
  }
};

// GPT-2's split pattern. Python's `regex` \s is Unicode White_Space, while PCRE2's \s with UCP also
// takes U+180E; spelling the class out keeps the split identical. Possessive repeats are
// equivalent here (nothing follows them) and spare the matcher backtracking.
constexpr std::string_view kWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string gpt2_split_pattern() {
  const std::string ws(kWhiteSpace);
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}++| ?\p{N}++| ?[^)" + ws + R"(\p{L}\p{N}]++|[)" + ws + "]+(?![^" + ws +
         "])|[" + ws + "]+";
}

// The compiled pattern plus its match buffers; one match at a time (the caller holds the lock).
class PretokenSplitter {
 public:
  PretokenSplitter() {
    const std::string pattern = gpt2_split_pattern();
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    // MATCH_INVALID_UTF: bytes that are not UTF-8 never match instead of failing the whole call.
    code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset, nullptr));
    if (!code_) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error_code, message.data(), message.size());
      throw std::runtime_error("GPT-2 split pattern does not compile: " +
                               std::string(reinterpret_cast<char*>(message.data())));
    }
    jit_ = pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE) == 0;
    match_data_.reset(pcre2_match_data_create(1, nullptr));
    context_.reset(pcre2_match_context_create(nullptr));
    if (!match_data_ || !context_) throw std::bad_alloc();
    if (jit_) {
      jit_stack_.reset(pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr));
      if (!jit_stack_) throw std::bad_alloc();
      pcre2_jit_stack_assign(context_.get(), nullptr, jit_stack_.get());
    }
  }

  // The next pre-token [begin, end) at or after `offset`; nullopt when none is left.
  std::optional<std::pair<std::size_t, std::size_t>> next(std::string_view text, std::size_t offset) {
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const int result =
        jit_ ? pcre2_jit_match(code_.get(), subject, text.size(), offset, 0, match_data_.get(), context_.get())
             : pcre2_match(code_.get(), subject, text.size(), offset, 0, match_data_.get(), context_.get());
    if (result == PCRE2_ERROR_NOMATCH) return std::nullopt;
    if (result < 0) throw std::runtime_error("GPT-2 pre-tokenizer: PCRE2 match error " + std::to_string(result));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data_.get());
    return std::pair{static_cast<std::size_t>(ovector[0]), static_cast<std::size_t>(ovector[1])};
  }

 private:
  std::unique_ptr<pcre2_code, Pcre2Deleter<pcre2_code_free>> code_;
  std::unique_ptr<pcre2_match_data, Pcre2Deleter<pcre2_match_data_free>> match_data_;
  std::unique_ptr<pcre2_match_context, Pcre2Deleter<pcre2_match_context_free>> context_;
  std::unique_ptr<pcre2_jit_stack, Pcre2Deleter<pcre2_jit_stack_free>> jit_stack_;
  bool jit_ = false;
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

}  // namespace

struct Gpt2BpeTokenizer::Impl {
  std::vector<std::string> token_bytes;  // id -> raw bytes
  std::array<int32_t, 256> byte_token{};
  MergeTable merges{0};

  std::mutex encode_mutex;  // guards everything below: encode() reuses it all between calls
  PretokenSplitter splitter;
  WordCache word_cache;
  std::vector<int32_t> word_tokens;
  // BPE working state, a doubly linked list of parts over the word's byte positions.
  std::vector<int32_t> part_token;  // -1 once merged into its left neighbour
  std::vector<uint32_t> part_next, part_prev;
  std::vector<std::pair<int32_t, uint32_t>> candidate_heap;  // (rank, left position), min-heap
  std::vector<uint32_t> merged_this_round;

  void encode_ordinary(std::string_view text, std::vector<int32_t>& out);
  void encode_word(std::string_view word, std::vector<int32_t>& out);
  void merge_word(std::string_view word, std::vector<int32_t>& out);
};

void Gpt2BpeTokenizer::Impl::encode_ordinary(std::string_view text, std::vector<int32_t>& out) {
  std::size_t offset = 0;
  while (offset < text.size()) {
    const auto match = splitter.next(text, offset);
    const auto [begin, end] = match.value_or(std::pair{text.size(), text.size()});
    // Bytes that no alternative matches are invalid UTF-8; they become their own piece so that
    // decode(encode(s)) == s holds for any bytes.
    if (begin > offset) encode_word(text.substr(offset, begin - offset), out);
    if (end > begin) encode_word(text.substr(begin, end - begin), out);
    offset = end;
  }
}

void Gpt2BpeTokenizer::Impl::encode_word(std::string_view word, std::vector<int32_t>& out) {
  if (word.size() == 1) {
    out.push_back(byte_token[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (word.size() > WordCache::kMaxWordBytes) {
    merge_word(word, out);
    return;
  }
  const uint64_t hash = WordCache::hash(word);
  if (const auto tokens = word_cache.find(word, hash)) {
    out.insert(out.end(), tokens->begin(), tokens->end());
    return;
  }
  word_tokens.clear();
  merge_word(word, word_tokens);
  word_cache.insert(word, hash, word_tokens);
  out.insert(out.end(), word_tokens.begin(), word_tokens.end());
}

// encoder.py's bpe(): repeatedly take the lowest-ranked adjacent pair and merge every
// non-overlapping occurrence of it, left to right, before looking at pairs those merges create.
// A heap of candidate pairs (stale entries skipped on pop) makes it O(n log n) instead of
// encoder.py's O(n^2), which matters for long pre-tokens.
void Gpt2BpeTokenizer::Impl::merge_word(std::string_view word, std::vector<int32_t>& out) {
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  if (word.size() >= kNone) throw std::length_error("GPT-2 tokenizer: a pre-token of 4 GiB or more");
  const auto n = static_cast<uint32_t>(word.size());
  if (n == 0) return;
  part_token.resize(n);
  part_next.resize(n);
  part_prev.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    part_token[i] = byte_token[static_cast<unsigned char>(word[i])];
    part_prev[i] = i == 0 ? kNone : i - 1;
    part_next[i] = i + 1 == n ? kNone : i + 1;
  }
  const auto rule_at = [&](uint32_t left) -> const MergeRule* {
    const uint32_t right = part_next[left];
    if (right == kNone) return nullptr;
    return merges.find(part_token[left], part_token[right]);
  };
  const auto push_candidate = [&](uint32_t left) {
    if (const MergeRule* rule = rule_at(left)) {
      candidate_heap.emplace_back(rule->rank, left);
      std::push_heap(candidate_heap.begin(), candidate_heap.end(), std::greater<>{});
    }
  };
  candidate_heap.clear();
  for (uint32_t i = 0; i + 1 < n; ++i) push_candidate(i);

  while (!candidate_heap.empty()) {
    const int32_t rank = candidate_heap.front().first;
    merged_this_round.clear();
    // Same rank means same pair; the heap hands its occurrences over left to right.
    while (!candidate_heap.empty() && candidate_heap.front().first == rank) {
      std::pop_heap(candidate_heap.begin(), candidate_heap.end(), std::greater<>{});
      const uint32_t left = candidate_heap.back().second;
      candidate_heap.pop_back();
      if (part_token[left] < 0) continue;  // swallowed by an earlier merge
      const MergeRule* rule = rule_at(left);
      if (rule == nullptr || rule->rank != rank) continue;  // stale: the pair here has changed
      const uint32_t right = part_next[left];
      part_token[left] = rule->merged;
      part_token[right] = -1;
      part_next[left] = part_next[right];
      if (part_next[right] != kNone) part_prev[part_next[right]] = left;
      merged_this_round.push_back(left);
    }
    // Pairs formed by this round compete only from the next round on, as in encoder.py.
    for (const uint32_t left : merged_this_round) {
      if (part_prev[left] != kNone) push_candidate(part_prev[left]);
      push_candidate(left);
    }
  }
  for (uint32_t i = 0; i != kNone; i = part_next[i]) out.push_back(part_token[i]);
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gpt2BpeTokenizer::Gpt2BpeTokenizer(Gpt2BpeTokenizer&&) noexcept = default;
Gpt2BpeTokenizer& Gpt2BpeTokenizer::operator=(Gpt2BpeTokenizer&&) noexcept = default;
Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

std::optional<Gpt2TokenizerFiles> Gpt2BpeTokenizer::find_files(const std::filesystem::path& dir) {
  std::error_code error;
  const auto has = [&](const char* name) { return fs::exists(dir / name, error); };
  // OpenAI's names win whenever one of them is there, so that a damaged pair is reported as such.
  if (has("encoder.json") || has("vocab.bpe")) return Gpt2TokenizerFiles{dir / "encoder.json", dir / "vocab.bpe"};
  if (has("vocab.json") || has("merges.txt")) return Gpt2TokenizerFiles{dir / "vocab.json", dir / "merges.txt"};
  if (has("tokenizer.json")) return Gpt2TokenizerFiles{dir / "tokenizer.json", dir / "tokenizer.json", true};
  return std::nullopt;
}

Gpt2TokenizerTexts read_gpt2_tokenizer_texts(const Gpt2TokenizerFiles& files) {
  if (!files.tokenizer_json) {
    return {read_whole_file(files.vocabulary, "GPT-2 vocabulary file"),
            read_whole_file(files.merges, "GPT-2 vocabulary file")};
  }
  const std::string where = files.vocabulary.string() + ": ";
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_whole_file(files.vocabulary, "Hugging Face tokenizer file"));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(where + "malformed JSON: " + e.what());
  }
  const auto model = json.is_object() ? json.find("model") : json.end();
  if (model == json.end() || !model->is_object() || model->value("type", std::string()) != "BPE" ||
      !model->contains("vocab") || !(*model)["vocab"].is_object() || !model->contains("merges") ||
      !(*model)["merges"].is_array()) {
    throw std::invalid_argument(where + "not a BPE tokenizer (expected model.type \"BPE\" with vocab and merges)");
  }
  // Merges are "a b" strings, or [a, b] pairs in the newer format; vocab.bpe writes them as "a b".
  std::string merges = "#version: 0.2\n";
  for (const auto& merge : (*model)["merges"]) {
    if (merge.is_string()) {
      merges += merge.get<std::string>() + "\n";
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      merges += merge[0].get<std::string>() + " " + merge[1].get<std::string>() + "\n";
    } else {
      throw std::invalid_argument(where + "a merge is neither \"a b\" nor [a, b]: " + merge.dump().substr(0, 80));
    }
  }
  return {(*model)["vocab"].dump(), merges};
}

Gpt2BpeTokenizer Gpt2BpeTokenizer::load(const std::filesystem::path& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    throw std::invalid_argument(dir.string() + ": GPT-2 tokenizer directory not found (it must hold encoder.json and "
                                               "vocab.bpe, or vocab.json and merges.txt)");
  }
  const auto files = find_files(dir);
  if (!files) {
    throw std::invalid_argument(dir.string() + ": no GPT-2 tokenizer files (encoder.json and vocab.bpe, vocab.json and "
                                               "merges.txt, or tokenizer.json)");
  }
  auto impl = std::make_unique<Impl>();
  const Gpt2TokenizerTexts texts = read_gpt2_tokenizer_texts(*files);
  const StringMap<int32_t> ids_by_spelling = read_encoder_json(files->vocabulary, texts.vocabulary, impl->token_bytes);
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = ids_by_spelling.find(alphabet_spelling_of_byte(static_cast<unsigned char>(byte)));
    if (it == ids_by_spelling.end()) {
      throw std::invalid_argument(files->vocabulary.string() + ": no token for the single byte " +
                                  std::to_string(byte));
    }
    impl->byte_token[byte] = it->second;
  }
  impl->merges = read_vocab_bpe(files->merges, texts.merges, ids_by_spelling, files->vocabulary.filename().string());
  return Gpt2BpeTokenizer(std::move(impl));
}

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);  // English runs at about 4 bytes per token
  encode_append(text, ids, allow_special);
  return ids;
}

void Gpt2BpeTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out, bool allow_special) const {
  const std::lock_guard lock(impl_->encode_mutex);
  if (!allow_special) {
    impl_->encode_ordinary(text, out);
    return;
  }
  // Like tiktoken: the text between special tokens is split and merged on its own.
  for (std::size_t start = 0;;) {
    const std::size_t found = text.find(kEndOfText, start);
    impl_->encode_ordinary(text.substr(start, found == std::string_view::npos ? found : found - start), out);
    if (found == std::string_view::npos) return;
    out.push_back(kEndOfTextId);
    start = found + kEndOfText.size();
  }
}

std::string_view Gpt2BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= kVocabSize) {
    throw std::invalid_argument("GPT-2 token id " + std::to_string(id) + " is outside 0.." +
                                std::to_string(kVocabSize - 1));
  }
  return impl_->token_bytes[static_cast<std::size_t>(id)];
}

std::string Gpt2BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size() * 4);
  for (const int32_t id : ids) text += token_bytes(id);
  return text;
}

}  // namespace mygpt
