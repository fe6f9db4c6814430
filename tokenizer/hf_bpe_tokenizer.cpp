#include "tokenizer/hf_bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "common/file_io.h"
#include "common/strprintf.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/unicode_normalization.h"

namespace mygpt {
namespace {

using nlohmann::json;

// How a Split keeps what its pattern matches, as tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// What a pre-tokenizer step does at a cut "x\n|y" or "x\n| y" (x, y printable ASCII other than space), as
// restarts_at reasons about it.
enum class StepAtCut {
  splits_there,  // a pattern proven to end a piece at the cut and to scan on from it as from a text's start
  digits,        // Digits: splits only between digits and the rest, so the piece at the cut may end after y
  prefix_space,  // ByteLevel's prefix space: a piece that starts at a cut gains a space
  unknown,       // any other pattern: nothing is proven
};

// One step of the pre-tokenizer, applied to every piece the steps before it left.
struct PretokenStep {
  std::optional<bpe::PretokenPattern> pattern;  // a split; none for ByteLevel's prefix space
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  StepAtCut at_cut = StepAtCut::unknown;
};

// Split patterns (as tokenizer.json spells them) proven to restart at "x\n|y" and "x\n| y" (x, y printable
// ASCII, not space), with the whole of y in the piece: the match holding x ends before the '\n' (letters,
// digits) or takes it and stops at y (punctuation runs with [\r\n]*, never more since y is neither '\r' nor
// '\n'); a match starting at the '\n' is that '\n' alone (no alternative lets '\n' lead letters or
// punctuation; \s*[\r\n]+ and \s*[\r\n] backtrack to it; GPT-2's \s+(?!\S) and \s+ give "\n" before y or
// " y" and at a text's end alike); none looks behind. So the text before the cut ends with the same pieces as
// alone, and the scan goes on from the cut. GPT-4o's pattern is not here: its [\r\n/]* joins ".\n/".
bool restarts_at_lines(const std::string& pattern) {
  static const std::vector<std::string> proven = {
      // GPT-2's (ByteLevel's use_regex, and as a Split)
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      // Llama 3's
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      // Qwen2's and Qwen3's
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      // GPT-4's (cl100k) and nanochat's
      R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)",
      R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)",
  };
  return std::find(proven.begin(), proven.end(), pattern) != proven.end();
}

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false;
  bool special = false;  // a control token (<|bos|>, <|assistant_start|>): kept out of untrusted text's ids
};

// Unicode White_Space, which \s means in tokenizers' Rust regexes.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The code point starting at text[i] and its length; an invalid byte is itself (length 1).
std::pair<char32_t, std::size_t> code_point_at(std::string_view text, std::size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const std::size_t length = lead < 0x80           ? 1
                             : (lead >> 5) == 0x6  ? 2
                             : (lead >> 4) == 0xE  ? 3
                             : (lead >> 3) == 0x1E ? 4
                                                   : 1;
  if (length == 1 || i + length > text.size()) return {lead, 1};
  char32_t cp = lead & (0x7F >> length);
  for (std::size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return {lead, 1};
    cp = (cp << 6) | (next & 0x3F);
  }
  return {cp, length};
}

// The start of the last code point of a non-empty text.
std::size_t last_code_point_start(std::string_view text) {
  std::size_t i = text.size() - 1;
  while (i > 0 && text.size() - i < 4 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return code_point_at(text, i).second == text.size() - i ? i : text.size() - 1;
}

std::string escaped_literal(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out += '\\';
    out += c;
  }
  return out;
}

std::string type_of(const json& node) {
  if (node.is_null()) return "null";
  if (!node.is_object()) return node.dump().substr(0, 40);
  const auto type = node.find("type");
  return type != node.end() && type->is_string() ? type->get<std::string>() : "(no type)";
}

bool flag(const json& node, const char* key, bool fallback) {
  const auto it = node.find(key);
  return it != node.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

struct HfBpeTokenizer::Impl {
  std::string where;                     // "<file>: ", the start of every message
  std::vector<std::string> token_bytes;  // id -> the bytes it decodes to
  std::vector<bool> has_id;
  bpe::StringMap<int32_t> id_of_spelling;               // vocabulary strings and added tokens' contents
  bpe::StringMap<int32_t> id_of_bytes;                  // vocabulary strings in the byte alphabet, by their bytes
  std::vector<AddedToken> raw_added, normalized_added;  // the two passes tokenizers makes over the text
  std::vector<NormalForm> normalizer;                   // applied in order; empty: none
  bool ignore_merges = false;
  // Which cuts restarts_at allows, from the pre-tokenizer (decide_cuts); the longest added token's bytes.
  bool tight_cuts = false, spaced_cuts = false;
  std::size_t longest_added = 0;

  std::mutex encode_mutex;  // guards everything below: encode() reuses it between calls
  std::vector<PretokenStep> steps;
  std::optional<bpe::PretokenPattern> word_character;  // for single_word added tokens
  std::optional<bpe::WordEncoder> words;

  [[noreturn]] void refuse(const std::string& what) const { throw std::invalid_argument(where + what); }
  void read_normalizer(const json& node);
  std::string normalized(std::string_view text) const;
  void read_pretokenizer(const json& node, bool& byte_level_seen);
  void read_model(const json& model, const json& added);
  void decide_cuts();
  bool added_token_near(std::string_view text, std::size_t cut) const;
  void encode_between_added(std::string_view text, std::size_t pass, bool specials_are_text, std::vector<int32_t>& out);
  void split_on_added(std::string_view text, std::size_t pass, bool specials_are_text, std::vector<int32_t>& out);
  void encode_pretokenized(std::string_view text, std::vector<int32_t>& out);
  void split(PretokenStep& step, const std::string& piece, std::vector<std::string>& out);
  bool is_word_character(std::string_view text, std::size_t at);
};

void HfBpeTokenizer::Impl::read_normalizer(const json& node) {
  const std::string type = type_of(node);
  if (node.is_null()) return;
  if (type == "Sequence") {
    const json& inner = node.value("normalizers", json());
    if (!inner.is_array()) refuse("normalizer Sequence without a \"normalizers\" list");
    for (const json& each : inner) read_normalizer(each);
    return;
  }
  if (type == "NFC") {
    normalizer.push_back(NormalForm::nfc);
  } else if (type == "NFKC") {
    normalizer.push_back(NormalForm::nfkc);
  } else {
    refuse("normalizer " + type + " is not supported (NFC, NFKC and a Sequence of them are)");
  }
}

// tokenizers' NormalizedString::nfc()/nfkc(). The text is UTF-8: encode() checked it.
std::string HfBpeTokenizer::Impl::normalized(std::string_view text) const {
  std::string out(text);
  if (is_ascii(out)) return out;  // ASCII is its own NFC and NFKC
  try {
    for (const NormalForm form : normalizer) out = normalized_as_tokenizers(out, form);
  } catch (const std::invalid_argument& e) {
    refuse(std::string("the normalizer cannot normalize the text: ") + e.what());
  }
  return out;
}

void HfBpeTokenizer::Impl::read_pretokenizer(const json& node, bool& byte_level_seen) {
  const std::string type = type_of(node);
  if (byte_level_seen)
    refuse("pre_tokenizer " + type + " after ByteLevel is not supported (it would see byte-level characters)");
  if (type == "Sequence" && node.contains("pretokenizers") && node["pretokenizers"].is_array()) {
    for (const auto& inner : node["pretokenizers"]) read_pretokenizer(inner, byte_level_seen);
    return;
  }
  if (type == "ByteLevel") {
    byte_level_seen = true;
    if (flag(node, "add_prefix_space", false)) {
      steps.push_back(PretokenStep{});
      steps.back().at_cut = StepAtCut::prefix_space;
    }
    if (flag(node, "use_regex", true)) {
      steps.push_back(PretokenStep{bpe::PretokenPattern(bpe::gpt2_split_pattern(), where)});
      steps.back().at_cut = StepAtCut::splits_there;
    }
    return;
  }
  if (type == "Digits") {
    const bool individual = flag(node, "individual_digits", false);
    steps.push_back(PretokenStep{bpe::PretokenPattern(bpe::pcre2_pattern_of(R"(\p{N})"), where),
                                 individual ? SplitBehavior::isolated : SplitBehavior::contiguous});
    steps.back().at_cut = StepAtCut::digits;
    return;
  }
  if (type != "Split") refuse("pre_tokenizer " + type + " is not supported (ByteLevel, Split, Digits, Sequence are)");
  const json& pattern = node.value("pattern", json());
  std::string regex;
  bool proven = false;
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    regex = bpe::pcre2_pattern_of(pattern["Regex"].get<std::string>());
    proven = restarts_at_lines(pattern["Regex"].get<std::string>());
  } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    regex = escaped_literal(pattern["String"].get<std::string>());
  } else {
    refuse("Split pre_tokenizer without a \"Regex\" or \"String\" pattern");
  }
  static const std::map<std::string, SplitBehavior> behaviors = {
      {"Removed", SplitBehavior::removed},
      {"Isolated", SplitBehavior::isolated},
      {"MergedWithPrevious", SplitBehavior::merged_with_previous},
      {"MergedWithNext", SplitBehavior::merged_with_next},
      {"Contiguous", SplitBehavior::contiguous}};
  const auto behavior = behaviors.find(node.value("behavior", std::string("(none)")));
  if (behavior == behaviors.end())
    refuse("Split pre_tokenizer with an unknown behavior " + node.value("behavior", json()).dump());
  steps.push_back(PretokenStep{bpe::PretokenPattern(regex, where + "pre_tokenizer Split"), behavior->second,
                               flag(node, "invert", false)});
  if (proven && behavior->second == SplitBehavior::isolated && !steps.back().invert) {
    steps.back().at_cut = StepAtCut::splits_there;
  }
}

void HfBpeTokenizer::Impl::read_model(const json& model, const json& added) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json value = model.value(key, json());
    if (!value.is_null() && value != "") refuse(std::string("BPE ") + key + " " + value.dump() + " is not supported");
  }
  const json dropout = model.value("dropout", json());
  if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0))
    refuse("BPE dropout is not supported");
  if (flag(model, "byte_fallback", false)) refuse("BPE byte_fallback is not supported (it is not byte-level BPE)");
  ignore_merges = flag(model, "ignore_merges", false);

  const json& vocab = model.value("vocab", json());
  const json& merges = model.value("merges", json());
  if (!vocab.is_object() || !merges.is_array()) refuse("the BPE model needs a \"vocab\" object and a \"merges\" list");
  // tokenizers loads an empty vocab and tokenizes every text to nothing; prepare then failed with "all 0 tokens
  // went to validation", naming neither the file nor the cause.
  if (vocab.empty()) refuse("the BPE model's vocab is empty (every text would tokenize to nothing)");
  const auto place = [&](int64_t id, const std::string& spelling, const std::string& what) {
    if (id < 0 || id >= (int64_t{1} << 31) - 1)
      refuse(what + " " + json(spelling).dump() + " has id " + std::to_string(id));
    if (static_cast<std::size_t>(id) >= token_bytes.size()) {
      token_bytes.resize(id + 1);
      has_id.resize(id + 1);
    }
    // tokenizers' ByteLevel decoder: a token all in the byte alphabet is those bytes, any other its UTF-8.
    token_bytes[id] = bpe::bytes_of_alphabet_spelling(spelling).value_or(spelling);
    has_id[id] = true;
  };
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) refuse("vocab token " + json(it.key()).dump() + " has no integer id");
    const auto id = it.value().get<int64_t>();
    place(id, it.key(), "vocab token");
    id_of_spelling.emplace(it.key(), static_cast<int32_t>(id));
    if (const auto bytes = bpe::bytes_of_alphabet_spelling(it.key()))
      id_of_bytes.emplace(*bytes, static_cast<int32_t>(id));
  }

  std::array<int32_t, 256> byte_token{};
  const json unk = model.value("unk_token", json());
  const auto unk_id = unk.is_string() ? id_of_spelling.find(unk.get<std::string>()) : id_of_spelling.end();
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = id_of_spelling.find(bpe::alphabet_spelling_of_byte(static_cast<unsigned char>(byte)));
    // A byte outside the vocabulary is the unknown token, or (without one) dropped, as tokenizers does.
    byte_token[byte] = it != id_of_spelling.end() ? it->second : unk_id != id_of_spelling.end() ? unk_id->second : -1;
    if (it == id_of_spelling.end() && unk_id != id_of_spelling.end() && flag(model, "fuse_unk", false)) {
      refuse("BPE fuse_unk with bytes missing from the vocabulary is not supported");
    }
  }

  bpe::MergeTable table(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const json& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {
      const std::string line = merge.get<std::string>();
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        refuse("merge " + merge.dump() + " is not two tokens separated by one space");
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      refuse("a merge is neither \"a b\" nor [a, b]: " + merge.dump().substr(0, 80));
    }
    const auto l = id_of_spelling.find(left), r = id_of_spelling.find(right), m = id_of_spelling.find(left + right);
    if (l == id_of_spelling.end() || r == id_of_spelling.end() || m == id_of_spelling.end()) {
      refuse("merge " + merge.dump() + " uses a token missing from the vocab");
    }
    table.assign(l->second, r->second, bpe::MergeRule{static_cast<int32_t>(rank), m->second});
  }
  words.emplace(byte_token, std::move(table), bpe::MergeOrder::one_at_a_time);

  if (!added.is_null() && !added.is_array()) refuse("\"added_tokens\" is not a list");
  for (const json& token : added.is_array() ? added : json::array()) {
    if (!token.is_object() || !token.value("id", json()).is_number_integer() ||
        !token.value("content", json()).is_string()) {
      refuse("an added token without an integer \"id\" and a \"content\" string: " + token.dump().substr(0, 80));
    }
    AddedToken a{token["content"].get<std::string>(), 0, flag(token, "single_word", false),
                 flag(token, "lstrip", false), flag(token, "rstrip", false), flag(token, "special", false)};
    const auto id = token["id"].get<int64_t>();
    if (a.content.empty()) continue;  // tokenizers ignores them too
    const auto known = id_of_spelling.find(a.content);
    if (known != id_of_spelling.end() && known->second != id) {
      refuse("added token " + json(a.content).dump() + " has id " + std::to_string(id) + " but the vocab gives it " +
             std::to_string(known->second));
    }
    if (known == id_of_spelling.end() && static_cast<std::size_t>(std::max<int64_t>(id, 0)) < has_id.size() &&
        has_id[id]) {
      refuse("added token " + json(a.content).dump() + " takes id " + std::to_string(id) + ", which another token has");
    }
    // Specials are matched before the normalizer and the rest after it, as tokenizers does; those matched
    // after it are matched by their normalized content, which is also what tokenizers (0.23) decodes them
    // to (AddedVocabulary's normalized_cache).
    const bool after_normalizer = flag(token, "normalized", !flag(token, "special", false));
    const std::string matched = after_normalizer ? normalized(a.content) : a.content;
    place(id, matched, "added token");
    a.id = static_cast<int32_t>(id);
    id_of_spelling.insert_or_assign(a.content, a.id);
    a.content = matched;
    (after_normalizer ? normalized_added : raw_added).push_back(std::move(a));
    if (token.value("single_word", false) && !word_character) {
      // Rust regex's Unicode \w (Unicode 16). Alphabetic is the letters, Nl and marks (mostly): naming
      // \p{L} and \p{Nl} too changes nothing in PCRE2 but brings in the letters its older Unicode lacks.
      word_character.emplace(
          bpe::pcre2_pattern_of(R"(\A[\p{Alphabetic}\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])"), where);
    }
  }
  // Leftmost-longest: at each position the longest token wins, so try them longest first.
  for (auto* list : {&raw_added, &normalized_added}) {
    std::stable_sort(list->begin(), list->end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  }
}

bool HfBpeTokenizer::Impl::is_word_character(std::string_view text, std::size_t at) {
  const auto length = code_point_at(text, at).second;
  const auto match = word_character->next(text.substr(at, length), 0);
  return match.has_value();
}

// tokenizers' AddedVocabulary::find_matches over the text for one pass's tokens; the text between the
// matches goes to the next pass, and after the last to the pre-tokenizer.
// With specials_are_text, a special token's match is dropped but still consumes its text, which then goes
// on as ordinary text (tokenizers' encode_special_tokens does the same in find_matches).
void HfBpeTokenizer::Impl::encode_between_added(std::string_view text, std::size_t pass, bool specials_are_text,
                                                std::vector<int32_t>& out) {
  if (pass == 2) {
    encode_pretokenized(text, out);
  } else if (pass == 1 && !normalizer.empty()) {
    // tokenizers normalizes each piece the raw added tokens left, on its own, before the second pass.
    split_on_added(normalized(text), pass, specials_are_text, out);
  } else {
    split_on_added(text, pass, specials_are_text, out);
  }
}

void HfBpeTokenizer::Impl::split_on_added(std::string_view text, std::size_t pass, bool specials_are_text,
                                          std::vector<int32_t>& out) {
  const std::vector<AddedToken>& tokens = pass == 0 ? raw_added : normalized_added;
  std::array<bool, 256> starts_a_token{};  // most bytes start none: skip them without comparing
  for (const AddedToken& token : tokens) starts_a_token[static_cast<unsigned char>(token.content[0])] = true;
  std::size_t done = 0;  // the text before this is encoded
  for (std::size_t at = 0; at < text.size() && !tokens.empty();) {
    if (!starts_a_token[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    const AddedToken* found = nullptr;
    for (const AddedToken& token : tokens) {
      if (text.compare(at, token.content.size(), token.content) == 0) {
        found = &token;
        break;
      }
    }
    if (found == nullptr) {
      ++at;
      continue;
    }
    std::size_t start = at, stop = at + found->content.size();
    at = stop;  // a match discarded below still consumes its text, as aho-corasick's iterator does
    if (specials_are_text && found->special) continue;
    if (found->single_word) {
      const bool alone_before = start == 0 || !is_word_character(text, last_code_point_start(text.substr(0, start)));
      const bool alone_after = stop == text.size() || !is_word_character(text, stop);
      if (!alone_before || !alone_after) continue;
    }
    if (found->lstrip) {
      std::size_t s = start;
      while (s > done) {
        const std::size_t previous = last_code_point_start(text.substr(0, s));
        if (!is_white_space(code_point_at(text, previous).first)) break;
        s = previous;
      }
      start = s;
    }
    if (found->rstrip) {
      while (stop < text.size()) {
        const auto [cp, length] = code_point_at(text, stop);
        if (!is_white_space(cp)) break;
        stop += length;
      }
    }
    if (start > done) encode_between_added(text.substr(done, start - done), pass + 1, specials_are_text, out);
    out.push_back(found->id);
    done = stop;
    at = std::max(at, stop);
  }
  if (done < text.size()) encode_between_added(text.substr(done), pass + 1, specials_are_text, out);
}

// tokenizers' Pattern::find_matches and SplitDelimiterBehavior on one piece.
void HfBpeTokenizer::Impl::split(PretokenStep& step, const std::string& piece, std::vector<std::string>& out) {
  if (!step.pattern) {  // ByteLevel's add_prefix_space
    out.push_back(piece.starts_with(' ') ? piece : " " + piece);
    return;
  }
  struct Part {
    std::size_t begin, end;
    bool match;
  };
  std::vector<Part> parts;
  std::size_t previous = 0;
  for (std::size_t offset = 0; offset <= piece.size();) {
    const auto match = step.pattern->next(piece, offset);
    if (!match) break;
    const auto [begin, end] = *match;
    if (begin > previous) parts.push_back({previous, begin, step.invert});
    parts.push_back({begin, end, !step.invert});
    previous = end;
    offset = end > begin ? end : end + code_point_at(piece + '\0', end).second;  // past an empty match
  }
  if (previous < piece.size()) parts.push_back({previous, piece.size(), step.invert});

  std::vector<Part> kept;
  bool previous_match = false;
  switch (step.behavior) {
    case SplitBehavior::removed:
      for (const Part& p : parts) {
        if (!p.match) kept.push_back(p);
      }
      break;
    case SplitBehavior::isolated:
      kept = parts;
      break;
    case SplitBehavior::merged_with_previous:
      for (const Part& p : parts) {
        if (p.match && !previous_match && !kept.empty()) {
          kept.back().end = p.end;
        } else {
          kept.push_back(p);
        }
        previous_match = p.match;
      }
      break;
    case SplitBehavior::merged_with_next:
      for (auto p = parts.rbegin(); p != parts.rend(); ++p) {
        if (p->match && !previous_match && !kept.empty()) {
          kept.back().begin = p->begin;
        } else {
          kept.push_back(*p);
        }
        previous_match = p->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    case SplitBehavior::contiguous:
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0 && parts[i].match == previous_match) {
          kept.back().end = parts[i].end;
        } else {
          kept.push_back(parts[i]);
        }
        previous_match = parts[i].match;
      }
      break;
  }
  for (const Part& p : kept) {
    if (p.end > p.begin) out.push_back(piece.substr(p.begin, p.end - p.begin));
  }
}

void HfBpeTokenizer::Impl::encode_pretokenized(std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::vector<std::string> pieces{std::string(text)}, next;
  for (PretokenStep& step : steps) {
    next.clear();
    for (const std::string& piece : pieces) split(step, piece, next);
    pieces.swap(next);
  }
  for (const std::string& piece : pieces) {
    if (ignore_merges) {
      if (const auto it = id_of_bytes.find(piece); it != id_of_bytes.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    words->encode(piece, out);
  }
}

// The pre-tokenizer's steps up to the first that splits at a cut (after it every step sees the two sides
// apart, in the whole text as in the pieces). Before it, a prefix space would give the piece at a cut a
// space it lacks in the whole text unless it starts with one ("x\n| y"); Digits may end the piece at the cut
// right after a space before a digit, where GPT-2's \s+(?!\S) would then take "\n " whole, so the spaced
// cut needs no Digits before; Digits keep "x\n|y" (they split only at digits, which the patterns split at
// too). Any other step before it: no cut is proven.
void HfBpeTokenizer::Impl::decide_cuts() {
  bool prefix_space = false, digits = false;
  for (const PretokenStep& step : steps) {
    if (step.at_cut == StepAtCut::splits_there) {
      tight_cuts = !prefix_space;
      spaced_cuts = !digits;
      return;
    }
    if (step.at_cut == StepAtCut::unknown) return;
    (step.at_cut == StepAtCut::prefix_space ? prefix_space : digits) = true;
  }
}

// Whether an added token may take part in tokenizing the cut: one overlapping the two characters on each
// side (a token across the cut, a single_word token that sees its neighbour, an lstrip/rstrip token that
// takes the '\n'). Tokens matched after the normalizer are looked for in the normalized text around the cut,
// normalized in two halves (a cut before an ASCII character is a boundary of NFC and NFKC: no ASCII
// character composes with what precedes it), from and to an ASCII character far enough away that the
// normalized text covers the longest token on each side; then no token matched on the raw text may lie
// in that stretch, as tokenizers normalizes the text between those apart.
bool HfBpeTokenizer::Impl::added_token_near(std::string_view text, std::size_t cut) const {
  const auto overlaps = [](const std::vector<AddedToken>& tokens, std::string_view in, std::size_t from,
                           std::size_t to) {
    for (const AddedToken& token : tokens) {
      const std::size_t n = token.content.size();
      const std::size_t first = from + 1 > n ? from + 1 - n : 0;  // starts from here end after `from`
      const std::size_t at = in.find(token.content, first);
      if (at != std::string_view::npos && at < to) return true;
    }
    return false;
  };
  const bool normalizes = !normalizer.empty() && !normalized_added.empty();
  if (!normalizes) {
    const std::size_t from = cut > 3 ? cut - 3 : 0;
    return overlaps(raw_added, text, from, cut + 3) || overlaps(normalized_added, text, from, cut + 3);
  }
  const std::size_t reach = 4 * (longest_added + 3) + 16;  // NFC/NFKC shrink text by at most 3 times
  std::size_t lo = cut > reach ? cut - reach : 0, hi = cut + reach;
  while (lo > 0 && static_cast<unsigned char>(text[lo]) >= 0x80) --lo;
  while (hi < text.size() && static_cast<unsigned char>(text[hi]) >= 0x80) ++hi;
  if (hi >= text.size()) return true;  // not enough text after the cut to decide
  if (overlaps(raw_added, text, lo, hi)) return true;
  const std::string_view before = text.substr(lo, cut - lo), after = text.substr(cut, hi - cut);
  if (first_invalid_utf8(before) || first_invalid_utf8(after)) return true;
  const std::string left = normalized(before), joined = left + normalized(after);
  return overlaps(normalized_added, joined, left.size() > 3 ? left.size() - 3 : 0, left.size() + 3);
}

HfBpeTokenizer HfBpeTokenizer::load(const std::filesystem::path& tokenizer_json) {
  auto impl = std::make_unique<Impl>();
  impl->where = tokenizer_json.string() + ": ";
  json root;
  try {
    root = json::parse(read_whole_file(tokenizer_json, "Hugging Face tokenizer file"));
  } catch (const json::exception& e) {
    impl->refuse(std::string("malformed JSON: ") + e.what());
  }
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) impl->refuse("no \"model\" object");
  const std::string model_type = type_of(root["model"]);
  if (model_type != "BPE") impl->refuse("model type " + model_type + " is not supported (only byte-level BPE is)");
  impl->read_normalizer(root.value("normalizer", json()));
  bool byte_level = false;
  const json pretokenizer = root.value("pre_tokenizer", json());
  if (!pretokenizer.is_null()) impl->read_pretokenizer(pretokenizer, byte_level);
  if (!byte_level) impl->refuse("pre_tokenizer " + type_of(pretokenizer) + " is not byte-level (no ByteLevel in it)");
  const json decoder = root.value("decoder", json());
  const bool byte_level_decoder = type_of(decoder) == "ByteLevel" ||
                                  (type_of(decoder) == "Sequence" && decoder.value("decoders", json()).is_array() &&
                                   decoder["decoders"].size() == 1 && type_of(decoder["decoders"][0]) == "ByteLevel");
  if (!byte_level_decoder) impl->refuse("decoder " + type_of(decoder) + " is not supported (only ByteLevel is)");
  impl->read_model(root["model"], root.value("added_tokens", json()));
  impl->decide_cuts();
  for (const auto* list : {&impl->raw_added, &impl->normalized_added}) {
    for (const AddedToken& token : *list) impl->longest_added = std::max(impl->longest_added, token.content.size());
  }
  return HfBpeTokenizer(std::move(impl));
}

std::vector<int32_t> HfBpeTokenizer::encode(std::string_view text, SpecialTokens specials) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  if (!impl_->normalizer.empty()) {
    if (const auto bad = first_invalid_utf8(text)) {
      impl_->refuse(
          strprintf("its normalizer needs UTF-8 text, and byte 0x%02X at byte offset %zu of the text does "
                    "not begin a valid UTF-8 character",
                    static_cast<unsigned char>(text[*bad]), *bad));
    }
  }
  const std::lock_guard lock(impl_->encode_mutex);
  impl_->encode_between_added(text, 0, specials == SpecialTokens::as_text, ids);
  return ids;
}

bool HfBpeTokenizer::restarts_at(std::string_view text, std::size_t cut) const {
  const auto printable = [&](std::size_t at) { return at < text.size() && text[at] > ' ' && text[at] < 0x7f; };
  if (cut < 2 || text[cut - 1] != '\n' || !printable(cut - 2)) return false;
  const bool spaced = cut < text.size() && text[cut] == ' ';
  if (spaced ? !(impl_->spaced_cuts && printable(cut + 1)) : !(impl_->tight_cuts && printable(cut))) return false;
  return !impl_->added_token_near(text, cut);
}

std::string_view HfBpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->has_id.size() || !impl_->has_id[id]) {
    throw std::invalid_argument("token id " + std::to_string(id) + " is not in the tokenizer " +
                                impl_->where.substr(0, impl_->where.size() - 2));
  }
  return impl_->token_bytes[id];
}

bool HfBpeTokenizer::has_token(int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->has_id.size() && impl_->has_id[id];
}

std::vector<int32_t> HfBpeTokenizer::special_ids() const {
  std::vector<int32_t> ids;
  for (const auto* list : {&impl_->raw_added, &impl_->normalized_added}) {
    for (const AddedToken& token : *list) {
      if (token.special) ids.push_back(token.id);
    }
  }
  return ids;
}

std::string HfBpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size() * 4);
  for (const int32_t id : ids) text += token_bytes(id);
  return text;
}

std::size_t HfBpeTokenizer::vocab_size() const { return impl_->has_id.size(); }

std::optional<int32_t> HfBpeTokenizer::token_id(std::string_view spelling) const {
  const auto it = impl_->id_of_spelling.find(spelling);
  if (it == impl_->id_of_spelling.end()) return std::nullopt;
  return it->second;
}

HfBpeTokenizer::HfBpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfBpeTokenizer::HfBpeTokenizer(HfBpeTokenizer&&) noexcept = default;
HfBpeTokenizer& HfBpeTokenizer::operator=(HfBpeTokenizer&&) noexcept = default;
HfBpeTokenizer::~HfBpeTokenizer() = default;

namespace {

// The layout transformers writes: what every tokenizer.json written here shares.
std::string byte_level_tokenizer_json(nlohmann::ordered_json vocab, nlohmann::ordered_json merges,
                                      nlohmann::ordered_json added_tokens, nlohmann::ordered_json pre_tokenizer,
                                      nlohmann::ordered_json post_processor, nlohmann::ordered_json decoder) {
  const nlohmann::ordered_json tokenizer = {{"version", "1.0"},
                                            {"truncation", nullptr},
                                            {"padding", nullptr},
                                            {"added_tokens", std::move(added_tokens)},
                                            {"normalizer", nullptr},
                                            {"pre_tokenizer", std::move(pre_tokenizer)},
                                            {"post_processor", std::move(post_processor)},
                                            {"decoder", std::move(decoder)},
                                            {"model",
                                             {{"type", "BPE"},
                                              {"dropout", nullptr},
                                              {"unk_token", nullptr},
                                              {"continuing_subword_prefix", ""},
                                              {"end_of_word_suffix", ""},
                                              {"fuse_unk", false},
                                              {"byte_fallback", false},
                                              {"ignore_merges", false},
                                              {"vocab", std::move(vocab)},
                                              {"merges", std::move(merges)}}}};
  return tokenizer.dump() + "\n";
}

nlohmann::ordered_json byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return nlohmann::ordered_json{{"type", "ByteLevel"},
                                {"add_prefix_space", add_prefix_space},
                                {"trim_offsets", trim_offsets},
                                {"use_regex", use_regex}};
}

nlohmann::ordered_json special_added_token(int64_t id, const std::string& content, bool normalized) {
  return {{"id", id},          {"content", content},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", normalized}, {"special", true}};
}

}  // namespace

std::string gpt2_tokenizer_json(const std::string& encoder_json, const std::string& vocab_bpe) {
  const json encoder = json::parse(encoder_json);
  std::vector<std::pair<int64_t, std::string>> by_id;
  for (auto it = encoder.begin(); it != encoder.end(); ++it) by_id.emplace_back(it.value().get<int64_t>(), it.key());
  std::sort(by_id.begin(), by_id.end());
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (const auto& [id, spelling] : by_id) vocab[spelling] = id;
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (std::size_t pos = vocab_bpe.find('\n') + 1; pos > 0 && pos < vocab_bpe.size();) {  // after "#version"
    const std::size_t end = std::min(vocab_bpe.find('\n', pos), vocab_bpe.size());
    std::string line = vocab_bpe.substr(pos, end - pos);
    if (line.ends_with('\r')) line.pop_back();
    const std::size_t space = line.find(' ');
    if (space != std::string::npos) merges.push_back({line.substr(0, space), line.substr(space + 1)});
    pos = end + 1;
  }
  // The layout transformers writes for GPT2TokenizerFast.
  return byte_level_tokenizer_json(std::move(vocab), std::move(merges),
                                   nlohmann::ordered_json::array({special_added_token(50256, "<|endoftext|>", true)}),
                                   byte_level(false, true, true), byte_level(true, false, true),
                                   byte_level(true, true, true));
}

std::string trained_tokenizer_json(std::span<const std::string> token_bytes,
                                   std::span<const std::pair<int32_t, int32_t>> merges,
                                   const std::string& split_regex, std::span<const std::string> special_tokens) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  // Appended in id order (the object's lookups are linear: inserting by key would be quadratic).
  auto& entries = vocab.get_ref<nlohmann::ordered_json::object_t&>();
  std::vector<std::string> spelling(token_bytes.size());
  bpe::StringMap<std::size_t> seen;
  for (std::size_t id = 0; id < token_bytes.size(); ++id) {
    for (const char byte : token_bytes[id]) spelling[id] += bpe::alphabet_spelling_of_byte(static_cast<unsigned char>(byte));
    if (const auto [it, fresh] = seen.emplace(spelling[id], id); !fresh) {
      throw std::runtime_error("trained tokenizer: tokens " + std::to_string(it->second) + " and " +
                               std::to_string(id) + " are the same bytes, which tokenizer.json cannot hold");
    }
    entries.emplace_back(spelling[id], static_cast<int64_t>(id));
  }
  nlohmann::ordered_json merge_list = nlohmann::ordered_json::array();
  for (const auto& [left, right] : merges) merge_list.push_back({spelling.at(left), spelling.at(right)});
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < special_tokens.size(); ++i) {
    added.push_back(special_added_token(static_cast<int64_t>(token_bytes.size() + i), special_tokens[i], false));
  }
  // nanochat's layout: the pattern's chunks, then their bytes as the byte alphabet (no second regex).
  const nlohmann::ordered_json split = {{"type", "Split"},
                                        {"pattern", {{"Regex", split_regex}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}};
  const nlohmann::ordered_json pre_tokenizer = {{"type", "Sequence"},
                                                {"pretokenizers", {split, byte_level(false, true, false)}}};
  return byte_level_tokenizer_json(std::move(vocab), std::move(merge_list), std::move(added), pre_tokenizer, nullptr,
                                   byte_level(true, true, true));
}

}  // namespace mygpt
