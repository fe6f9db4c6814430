#pragma once
// The state of an HfBpeTokenizer, shared by the files that make it (internal to tokenizer/): reading
// tokenizer.json (hf_tokenizer_json_reader.cpp), the added-token passes and encoding (hf_bpe_encoding.cpp),
// the pre-tokenizer's splits (hf_pretokenizer.cpp) and the restart points (hf_restart_points.cpp).
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/line_cuts.h"
#include "tokenizer/unicode_normalization.h"

namespace mygpt::hf_bpe {

// How a Split keeps what its pattern matches, as tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// What a pre-tokenizer step does at a line cut (tokenizer/line_cuts.h: "x\n|y", "x\n| y" and a CRLF one, x and y
// visible characters), as restarts_at reasons about it.
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
  CrlfCut crlf = CrlfCut::after_cr;  // splits_there: where it restarts at a CRLF (proven_line_pattern)
};

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false;
  bool special = false;  // a control token (<|bos|>, <|assistant_start|>): kept out of untrusted text's ids
};

// The code point starting at text[i] and its length; an invalid byte is itself (length 1).
std::pair<char32_t, std::size_t> code_point_at(std::string_view text, std::size_t i);

}  // namespace mygpt::hf_bpe

namespace mygpt {

struct HfBpeTokenizer::Impl {
  using json = nlohmann::json;
  using AddedToken = hf_bpe::AddedToken;
  using PretokenStep = hf_bpe::PretokenStep;

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
  CrlfCut crlf_cut = CrlfCut::after_cr;  // the CRLF cut of the step that splits at cuts
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

}  // namespace mygpt
