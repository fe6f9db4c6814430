#pragma once
// One face for both tokenizers, as commands and checkpoints need it: a kind and the data that rebuilds
// it (the character vocabulary, or the directory of GPT-2's vocabulary files).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mygpt {

// Which tokenizer a model's ids belong to: characters of a text (the vocabulary travels with the
// model), GPT-2's BPE (OpenAI's files in a folder), a Hugging Face tokenizer.json in a folder (byte-level
// BPE: Llama 3's, Qwen's, nanochat's, GPT-2's), or none (token data trained without --vocab).
enum class TokenizerKind { none, character, gpt2, hf };

// "none", "char", "gpt2" or "hf": the names in checkpoints and on the command line.
std::string_view tokenizer_kind_name(TokenizerKind kind);
// The inverse; an unknown name throws std::invalid_argument.
TokenizerKind parse_tokenizer_kind(std::string_view name);

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Text that must not name special tokens (a chat message): GPT-2's "<|endoftext|>" stays characters.
  virtual std::vector<int64_t> encode_ordinary(std::string_view text) const { return encode(text); }
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;   // ids are below this (before padding)
  virtual int64_t end_of_text() const = 0;  // -1 when the tokenizer has none
  virtual TokenizerKind kind() const = 0;
  virtual std::string data() const = 0;  // what make_text_codec needs to rebuild it
  // Bytes of text each id stands for, indexed by id (vocab_size() entries): a token's raw bytes (a byte-level
  // token's may be part of a UTF-8 character), 0 for special tokens (GPT-2's <|endoftext|>, a tokenizer.json's
  // added tokens marked special) and for ids that are no token. Bits per byte divides by their sum.
  virtual std::vector<int64_t> token_byte_counts() const = 0;
  // Whether encode(text[0, cut)) then encode(text[cut, end)) is provably encode(text): where `prepare` may
  // cut a long document into pieces encoded apart. text starts at a document's start or an earlier such cut.
  // The character tokenizer's and GPT-2's: restarts_between_printable_lines; a tokenizer.json's: what its
  // definition proves (HfBpeTokenizer::restarts_at).
  virtual bool restarts_at(std::string_view text, std::size_t cut) const;
};

// A cut right after a '\n' with a printable ASCII character (not space) on each side. GPT-2's pre-tokenizer
// ends a piece exactly there whether the text is cut or not (a longer run of whitespace would not: "\n\n"
// at the end of a piece is one token, before a letter two), its <|endoftext|> holds no '\n', and the
// character tokenizer maps characters one by one.
bool restarts_between_printable_lines(std::string_view text, std::size_t cut);

// The BPE tokenizer a folder holds: hf where it has a tokenizer.json (the whole definition, split pattern
// and special tokens included, so it wins over vocab.json + merges.txt beside it), else gpt2 where it has
// GPT-2's files; nullopt for neither.
std::optional<TokenizerKind> folder_tokenizer_kind(const std::string& dir);

// Throws std::invalid_argument for unusable data (e.g. missing vocabulary files), and for kind none.
std::unique_ptr<TextCodec> make_text_codec(TokenizerKind kind, const std::string& data);

// Whether a folder with a tokenizer.json also holds GPT-2's own tokenizer as vocab.json and merges.txt (a
// Hugging Face GPT-2 folder, as the Hub has it): then it is GPT-2's tokenizer, whose padded vocabulary keeps
// ids for the chat tokens of --sft.
bool is_gpt2_tokenizer_folder(const std::string& dir);
// codec.encode(text) for text a user gave: a character the model does not know is std::invalid_argument
// naming where the text came from (`source`: "--prompt", "--sample-prompt", "--task arithmetic").
std::vector<int64_t> encode_given_text(const TextCodec& codec, std::string_view text, const std::string& source);
// How many of a model's vocab_size rows are the tokenizer's tokens: GPT-2's 50257 in an embedding padded
// to 50304; other models use every row (a tokenizer.json model's rows are as its folder has them). The rest never occur, so losses and sampling leave them out.
int64_t tokens_in_vocabulary(TokenizerKind kind, int64_t vocab_size);
// A character tokenizer over the characters of text.
std::unique_ptr<TextCodec> make_char_codec_for(std::string_view text);

}  // namespace mygpt
