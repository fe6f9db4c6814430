// A byte-level BPE tokenizer read from Hugging Face's tokenizer.json, giving the ids `tokenizers`
// gives (Tokenizer.encode(text, add_special_tokens=False)): GPT-2's, Llama 3's, Qwen's and nanochat's
// tokenizers are of this kind.
//
// What it reads: the BPE model (vocab; merges as "a b" strings or [a, b] pairs; ignore_merges;
// unk_token), the normalizer NFC (Qwen2's and Qwen3's) or NFKC, alone or in a Sequence, applied with
// utf8proc; the pre-tokenizer (ByteLevel, Split with a regex or a string in any of its behaviours,
// Digits, and a Sequence of them with the ByteLevel last), the added tokens (matched leftmost-longest
// before pre-tokenization, with their lstrip/rstrip/single_word: those with normalized false in the raw
// text, then the normalizer on each piece between them, then those with normalized true, by their
// normalized content, in the normalized pieces, as tokenizers does), and a ByteLevel decoder. Split
// regexes are compiled with PCRE2, which reads Oniguruma's and Python regex's syntax for what
// GPT-4-style patterns use (\p{L}, possessive and atomic groups, (?i:...)).
//
// What it refuses, in one line naming the file and the part: another model type (WordPiece, Unigram,
// WordLevel), any other normalizer (NFD, NFKD, Lowercase, Replace, Prepend, Strip, BertNormalizer, ...),
// any other pre-tokenizer or decoder, and BPE options that change ids in ways not reproduced here
// (dropout, subword prefixes or suffixes, byte fallback). With a normalizer, text that is not UTF-8
// (which tokenizers cannot be given) is refused by encode() in one line. The post-processor (which adds
// BOS/EOS when asked for special tokens) is not applied: the trainer places its own delimiters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mygpt {

class HfBpeTokenizer {
 public:
  static constexpr std::string_view kFileName = "tokenizer.json";

  // Reads a tokenizer.json; every problem (unreadable, malformed, unsupported) throws
  // std::invalid_argument with one line naming the file.
  static HfBpeTokenizer load(const std::filesystem::path& tokenizer_json);

  // Throws std::invalid_argument naming the file where the tokenizer has a normalizer and the text is
  // not UTF-8.
  // Added tokens (special or not) in the text are their own ids, as in tokenizers. With as_text, the
  // text of a special token is encoded as ordinary text (tokenizers' encode_special_tokens = True), so
  // that untrusted text (a chat message) cannot put a control token such as <|assistant_start|> into
  // the ids; added tokens that are not special still match.
  enum class SpecialTokens { matched, as_text };
  std::vector<int32_t> encode(std::string_view text, SpecialTokens specials = SpecialTokens::matched) const;
  // The bytes of the ids, as tokenizers' ByteLevel decoder gives them (before its UTF-8 repair).
  // Ids the tokenizer lacks throw std::invalid_argument.
  std::string decode(std::span<const int32_t> ids) const;
  std::string_view token_bytes(int32_t id) const;
  // Whether an id is a token at all (a tokenizer.json may leave gaps among its ids).
  bool has_token(int32_t id) const;
  // The ids of the added tokens marked "special" (control tokens such as <|bos|>).
  std::vector<int32_t> special_ids() const;

  // Whether encode(text[0, cut)) followed by encode(text[cut, end)) is provably encode(text), so that a long
  // document can be tokenized in pieces (prepare). text starts at a document's start or at an earlier such
  // cut. Derived from this tokenizer's definition: the cut follows a '\n' after a printable ASCII character
  // and comes before another one ("x\n|y") or before a space and one ("x\n| y"); the pre-tokenizer ends a
  // piece there (a Split pattern proven to, or ByteLevel's GPT-2 pattern, with nothing before it that could
  // join the sides: ByteLevel's prefix space allows only "x\n| y"); no added token lies at the cut (one
  // could span it, see its neighbour, or strip the '\n'). False whenever that is not proven (another Split
  // pattern, ByteLevel without its regex): the document is then tokenized whole.
  bool restarts_at(std::string_view text, std::size_t cut) const;

  // One more than the largest id of the vocabulary and the added tokens.
  std::size_t vocab_size() const;
  // The id of a token as tokenizer.json spells it (an added token's content, or a vocabulary string).
  std::optional<int32_t> token_id(std::string_view spelling) const;

  HfBpeTokenizer(HfBpeTokenizer&&) noexcept;
  HfBpeTokenizer& operator=(HfBpeTokenizer&&) noexcept;
  ~HfBpeTokenizer();

 private:
  struct Impl;  // keeps PCRE2, JSON and the BPE state out of this header
  explicit HfBpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// GPT-2's tokenizer as a tokenizer.json (what transformers writes for GPT2TokenizerFast) from the
// contents of encoder.json and vocab.bpe: so that an exported GPT-2-tokenizer model loads in AutoTokenizer
// from the one file.
std::string gpt2_tokenizer_json(const std::string& encoder_json, const std::string& vocab_bpe);

// A byte-level BPE that was trained here as a tokenizer.json in the same layout (which load() reads back):
// token_bytes[id] the bytes of each id (the 256 bytes first), merges in rank order as id pairs, the split
// regex as Oniguruma reads it (a Split before a ByteLevel without its own regex, as nanochat writes it),
// the special tokens after the vocabulary. Tokens with the same bytes throw std::runtime_error.
std::string trained_tokenizer_json(std::span<const std::string> token_bytes,
                                   std::span<const std::pair<int32_t, int32_t>> merges,
                                   const std::string& split_regex, std::span<const std::string> special_tokens);

}  // namespace mygpt
