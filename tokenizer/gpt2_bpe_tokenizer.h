// GPT-2's byte-level BPE tokenizer, loaded from OpenAI's `encoder.json` + `vocab.bpe`, or from the
// same content under Hugging Face's names, `vocab.json` + `merges.txt`.
//
// It reproduces OpenAI's gpt-2 `encoder.py` (the same encoding tiktoken calls "gpt2" / r50k_base)
// id for id: text is split into pre-tokens by GPT-2's regex, every pre-token's bytes are merged by
// the ranks of vocab.bpe, and `<|endoftext|>` is id 50256. Any byte string round-trips:
// decode(encode(s)) == s, even for invalid UTF-8 (bytes that are not UTF-8 become their own piece).
//
// Encoding caches the tokens of every distinct pre-token, which is what makes it fast on real text.
// The cache is shared, so concurrent encode() calls on one tokenizer run one at a time; load one
// tokenizer per thread to encode in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mygpt {

// A tokenizer's two files: the token -> id JSON object and the ranked merges; or one tokenizer.json
// (Hugging Face `tokenizers`, as current transformers saves GPT-2) holding both in its BPE model.
struct Gpt2TokenizerFiles {
  std::filesystem::path vocabulary;  // encoder.json or vocab.json (or tokenizer.json)
  std::filesystem::path merges;      // vocab.bpe or merges.txt (or tokenizer.json)
  bool tokenizer_json = false;       // both are the one tokenizer.json
};

// The two files' contents as encoder.json and vocab.bpe hold them (from tokenizer.json: its BPE model's
// vocab and merges written out so). Unreadable files, or a tokenizer.json that is not a BPE model,
// throw std::invalid_argument naming the file.
struct Gpt2TokenizerTexts {
  std::string vocabulary;
  std::string merges;
};
Gpt2TokenizerTexts read_gpt2_tokenizer_texts(const Gpt2TokenizerFiles& files);

class Gpt2BpeTokenizer {
 public:
  static constexpr std::size_t kVocabSize = 50257;
  static constexpr std::size_t kMergeCount = 50000;
  static constexpr int32_t kEndOfTextId = 50256;
  static constexpr std::string_view kEndOfText = "<|endoftext|>";

  // The files load() reads from dir: encoder.json + vocab.bpe when either is there, else vocab.json +
  // merges.txt when either is there (they need not exist: load() reports the missing one), else
  // tokenizer.json; nullopt when dir holds none of the five names.
  static std::optional<Gpt2TokenizerFiles> find_files(const std::filesystem::path& dir);
  // Reads the files find_files names. Every problem with them (none there, missing, unreadable,
  // malformed, truncated, wrong sizes, merges naming unknown tokens) throws std::invalid_argument
  // with a one-line message that names the file.
  static Gpt2BpeTokenizer load(const std::filesystem::path& dir);

  // With allow_special, each literal "<|endoftext|>" becomes kEndOfTextId; without it, the same
  // characters are ordinary text (tiktoken's encode_ordinary), so untrusted text cannot inject it.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
  // Appends to `out`, so large corpora can be encoded piece by piece into one buffer.
  void encode_append(std::string_view text, std::vector<int32_t>& out, bool allow_special = false) const;

  // Ids outside 0..kVocabSize-1 throw std::invalid_argument.
  std::string decode(std::span<const int32_t> ids) const;
  // The raw bytes of one token: the unit a streaming sampler prints (may be part of a UTF-8 char).
  std::string_view token_bytes(int32_t id) const;

  int32_t eot_token() const { return kEndOfTextId; }
  std::size_t vocab_size() const { return kVocabSize; }

  // Movable, not copyable; a moved-from tokenizer may only be assigned to or destroyed.
  Gpt2BpeTokenizer(Gpt2BpeTokenizer&&) noexcept;
  Gpt2BpeTokenizer& operator=(Gpt2BpeTokenizer&&) noexcept;
  ~Gpt2BpeTokenizer();

 private:
  struct Impl;  // keeps PCRE2 and the cache out of this header
  explicit Gpt2BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mygpt
