#include "tokenizer/byte_level_bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <new>
#include <stdexcept>

namespace mygpt::bpe {
namespace {

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

template <auto FreeFunction>
struct Pcre2Deleter {
  template <typename T>
  void operator()(T* object) const noexcept {
    FreeFunction(object);
  }
};

// Python's `regex` and Oniguruma take \s as Unicode White_Space, while PCRE2's \s with UCP also takes
// U+180E; spelling the class out keeps splits identical.
constexpr std::string_view kWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Code points tokenizers' regex engine (Oniguruma) puts in a general category while Unicode 14.0, the
// oldest PCRE2's (10.42, Debian 12), leaves them unassigned: letters of CJK Extension H, Kawi, Garay, ...
// (scripts/gen_unicode_property_additions.py reads them off tokenizers). A newer PCRE2 has most of them
// already; adding them again changes nothing.
struct PropertyAddition {
  std::string_view category;
  char32_t first, last;
};
constexpr PropertyAddition kPropertyAdditions[] = {
#include "tokenizer/unicode_property_additions.inc"
};

// The members to add after \p{category} inside a class (empty when the category has none).
std::string added_members(std::string_view category) {
  std::string out;
  char buffer[32];
  for (const auto& a : kPropertyAdditions) {
    if (a.category != category) continue;
    std::snprintf(buffer, sizeof buffer, "\\x{%X}", static_cast<unsigned>(a.first));
    out += buffer;
    if (a.last != a.first) {
      std::snprintf(buffer, sizeof buffer, "-\\x{%X}", static_cast<unsigned>(a.last));
      out += buffer;
    }
  }
  return out;
}

// The members to add after each of `categories` inside a class (tokenizers' Unicode beyond PCRE2's).
std::string added_members(std::initializer_list<std::string_view> categories) {
  std::string out;
  for (const std::string_view category : categories) out += added_members(category);
  return out;
}

// Oniguruma's Unicode \w, read off tokenizers code point by code point: Alphabetic, marks, decimal digits
// and connector punctuation (PCRE2 10.42's is letters, numbers and '_'), and, from its Latin-1 table, the
// superscripts 2, 3, 1 and the fractions 1/4, 1/2, 3/4.
std::string word_members() {
  return R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})" +
         added_members({"L", "Nl", "M", "Nd", "Pc"});
}

}  // namespace

std::string alphabet_spelling_of_byte(unsigned char byte) {
  const char32_t cp = byte_alphabet().code_point_of_byte[byte];
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
}

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

void WordEncoder::encode(std::string_view word, std::vector<int32_t>& out) {
  if (word.size() == 1 && byte_token_[static_cast<unsigned char>(word[0])] >= 0) {
    out.push_back(byte_token_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (word.size() > WordCache::kMaxWordBytes) {
    merge(word, out);
    return;
  }
  const uint64_t hash = WordCache::hash(word);
  if (const auto tokens = cache_.find(word, hash)) {
    out.insert(out.end(), tokens->begin(), tokens->end());
    return;
  }
  word_tokens_.clear();
  merge(word, word_tokens_);
  if (!word_tokens_.empty()) cache_.insert(word, hash, word_tokens_);  // the cache marks empty slots by 0 tokens
  out.insert(out.end(), word_tokens_.begin(), word_tokens_.end());
}

// Repeatedly the lowest-ranked adjacent pair is merged (see MergeOrder for the two orders). A heap of
// candidate pairs (stale entries skipped on pop) makes it O(n log n) instead of encoder.py's O(n^2),
// which matters for long pre-tokens.
void WordEncoder::merge(std::string_view word, std::vector<int32_t>& out) {
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  if (word.size() >= kNone) throw std::length_error("BPE tokenizer: a pre-token of 4 GiB or more");
  part_token_.clear();
  for (const char c : word) {
    // A byte without a token (a tokenizer.json trained on few bytes, no unk token) is left out, as
    // tokenizers does: its neighbours then meet.
    const int32_t token = byte_token_[static_cast<unsigned char>(c)];
    if (token >= 0) part_token_.push_back(token);
  }
  const auto n = static_cast<uint32_t>(part_token_.size());
  if (n == 0) return;
  part_next_.resize(n);
  part_prev_.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    part_prev_[i] = i == 0 ? kNone : i - 1;
    part_next_[i] = i + 1 == n ? kNone : i + 1;
  }
  const auto rule_at = [&](uint32_t left) -> const MergeRule* {
    const uint32_t right = part_next_[left];
    if (right == kNone) return nullptr;
    return merges_.find(part_token_[left], part_token_[right]);
  };
  const auto push_candidate = [&](uint32_t left) {
    if (const MergeRule* rule = rule_at(left)) {
      candidate_heap_.emplace_back(rule->rank, left);
      std::push_heap(candidate_heap_.begin(), candidate_heap_.end(), std::greater<>{});
    }
  };
  const auto push_neighbours = [&](uint32_t left) {
    if (part_prev_[left] != kNone) push_candidate(part_prev_[left]);
    push_candidate(left);
  };
  candidate_heap_.clear();
  for (uint32_t i = 0; i + 1 < n; ++i) push_candidate(i);

  while (!candidate_heap_.empty()) {
    const int32_t rank = candidate_heap_.front().first;
    merged_this_round_.clear();
    // Same rank means same pair; the heap hands its occurrences over left to right.
    while (!candidate_heap_.empty() && candidate_heap_.front().first == rank) {
      std::pop_heap(candidate_heap_.begin(), candidate_heap_.end(), std::greater<>{});
      const uint32_t left = candidate_heap_.back().second;
      candidate_heap_.pop_back();
      if (part_token_[left] < 0) continue;  // swallowed by an earlier merge
      const MergeRule* rule = rule_at(left);
      if (rule == nullptr || rule->rank != rank) continue;  // stale: the pair here has changed
      const uint32_t right = part_next_[left];
      part_token_[left] = rule->merged;
      part_token_[right] = -1;
      part_next_[left] = part_next_[right];
      if (part_next_[right] != kNone) part_prev_[part_next_[right]] = left;
      if (order_ == MergeOrder::one_at_a_time) {
        push_neighbours(left);
      } else {
        merged_this_round_.push_back(left);
      }
    }
    // Pairs formed by this round compete only from the next round on, as in encoder.py.
    for (const uint32_t left : merged_this_round_) push_neighbours(left);
  }
  for (uint32_t i = 0; i != kNone; i = part_next_[i]) out.push_back(part_token_[i]);
}

struct PretokenPattern::Compiled {
  std::unique_ptr<pcre2_code, Pcre2Deleter<pcre2_code_free>> code;
  std::unique_ptr<pcre2_match_data, Pcre2Deleter<pcre2_match_data_free>> match_data;
  std::unique_ptr<pcre2_match_context, Pcre2Deleter<pcre2_match_context_free>> context;
  std::unique_ptr<pcre2_jit_stack, Pcre2Deleter<pcre2_jit_stack_free>> jit_stack;
  bool jit = false;
};

PretokenPattern::PretokenPattern(const std::string& pattern, const std::string& what)
    : compiled_(std::make_unique<Compiled>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // MATCH_INVALID_UTF: bytes that are not UTF-8 never match instead of failing the whole call.
  compiled_->code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset,
                                      nullptr));
  if (!compiled_->code) {
    std::array<PCRE2_UCHAR, 256> message{};
    pcre2_get_error_message(error_code, message.data(), message.size());
    throw std::invalid_argument(what + ": split pattern does not compile (PCRE2, at offset " +
                                std::to_string(error_offset) + "): " + reinterpret_cast<char*>(message.data()));
  }
  compiled_->jit = pcre2_jit_compile(compiled_->code.get(), PCRE2_JIT_COMPLETE) == 0;
  compiled_->match_data.reset(pcre2_match_data_create(1, nullptr));
  compiled_->context.reset(pcre2_match_context_create(nullptr));
  if (!compiled_->match_data || !compiled_->context) throw std::bad_alloc();
  if (compiled_->jit) {
    compiled_->jit_stack.reset(pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr));
    if (!compiled_->jit_stack) throw std::bad_alloc();
    pcre2_jit_stack_assign(compiled_->context.get(), nullptr, compiled_->jit_stack.get());
  }
}

PretokenPattern::PretokenPattern(PretokenPattern&&) noexcept = default;
PretokenPattern& PretokenPattern::operator=(PretokenPattern&&) noexcept = default;
PretokenPattern::~PretokenPattern() = default;

std::optional<std::pair<std::size_t, std::size_t>> PretokenPattern::next(std::string_view text, std::size_t offset) {
  Compiled& c = *compiled_;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int result =
      c.jit ? pcre2_jit_match(c.code.get(), subject, text.size(), offset, 0, c.match_data.get(), c.context.get())
            : pcre2_match(c.code.get(), subject, text.size(), offset, 0, c.match_data.get(), c.context.get());
  if (result == PCRE2_ERROR_NOMATCH) return std::nullopt;
  if (result < 0) throw std::runtime_error("BPE pre-tokenizer: PCRE2 match error " + std::to_string(result));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(c.match_data.get());
  return std::pair{static_cast<std::size_t>(ovector[0]), static_cast<std::size_t>(ovector[1])};
}

// Possessive repeats are equivalent here (nothing follows them) and spare the matcher backtracking.
std::string gpt2_split_pattern() {
  return pcre2_pattern_of(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s+(?!\S)|\s+)");
}

std::string pcre2_pattern_of(std::string_view pattern) {
  const std::string ws(kWhiteSpace);
  const std::string word = word_members(), digit = "\\p{Nd}" + added_members("Nd");
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        out += in_class ? ws : "[" + ws + "]";
      } else if (escaped == 'S' && !in_class) {
        out += "[^" + ws + "]";
      } else if (escaped == 'w' || escaped == 'd') {
        const std::string& members = escaped == 'w' ? word : digit;
        out += in_class ? members : "[" + members + "]";
      } else if ((escaped == 'W' || escaped == 'D') && !in_class) {
        out += "[^" + (escaped == 'W' ? word : digit) + "]";
      } else if ((escaped == 'b' || escaped == 'B') && !in_class) {
        // A word boundary by Oniguruma's \w: a word character on exactly one side (\B: on both or neither).
        const std::string w = "[" + word + "]";
        out += escaped == 'b' ? "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"
                              : "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
      } else if (escaped == 'p' || escaped == 'P') {
        // \p{X} (or \p{^X}, its negation): X as tokenizers' Unicode has it. A \p without a brace is, to
        // Oniguruma, the letter p (PCRE2 would read \pL as a property). A negated property inside a class
        // has no such form (a class cannot subtract): PCRE2's own, as before.
        if (i + 1 >= pattern.size() || pattern[i + 1] != '{') {
          out += escaped;
          continue;
        }
        const std::size_t close = pattern.find('}', i + 2);
        if (close == std::string_view::npos) {  // PCRE2 refuses it as Oniguruma does
          out += pattern.substr(i - 1);
          break;
        }
        std::string_view name = pattern.substr(i + 2, close - i - 2);
        bool negated = escaped == 'P';
        if (!name.empty() && name.front() == '^') {
          negated = !negated;
          name.remove_prefix(1);
        }
        const std::string extra = added_members(name);
        if (extra.empty() || (negated && in_class)) {
          out += pattern.substr(i - 1, close + 2 - i);
        } else if (in_class) {
          out += "\\p{" + std::string(name) + "}" + extra;
        } else {
          out += (negated ? "[^\\p{" : "[\\p{") + std::string(name) + "}" + extra + "]";
        }
        i = close;
      } else {
        // \S, \W and \D inside a class have no spelled-out form (a class cannot subtract): PCRE2's own; its
        // \S differs from White_Space only at U+180E.
        out += c;
        out += escaped;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const std::size_t end = pattern.find(":]", i + 2);  // a POSIX class such as [:alpha:]
      if (end != std::string_view::npos) {
        out += pattern.substr(i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace mygpt::bpe
