#include "dataloader/text_codec.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "dataloader/char_tokenizer.h"
#include "dataloader/gpt2_bpe_tokenizer.h"

namespace mygpt {
namespace {

class CharCodec final : public TextCodec {
 public:
  explicit CharCodec(CharTokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}
  std::vector<int64_t> encode(std::string_view text) const override { return tokenizer_.encode(text); }
  std::string decode(const std::vector<int64_t>& ids) const override { return tokenizer_.decode(ids); }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }
  int64_t end_of_text() const override { return -1; }
  TokenizerKind kind() const override { return TokenizerKind::character; }
  std::string data() const override { return tokenizer_.vocabulary(); }

 private:
  CharTokenizer tokenizer_;
};

class Gpt2Codec final : public TextCodec {
 public:
  explicit Gpt2Codec(const std::string& dir)
      : dir_(std::filesystem::absolute(dir).string()), tokenizer_(Gpt2BpeTokenizer::load(dir)) {}
  std::vector<int64_t> encode(std::string_view text) const override {
    // Prompts and prepared documents may name <|endoftext|> on purpose.
    const auto ids = tokenizer_.encode(text, /*allow_special=*/true);
    return {ids.begin(), ids.end()};
  }
  std::vector<int64_t> encode_ordinary(std::string_view text) const override {
    const auto ids = tokenizer_.encode(text, /*allow_special=*/false);
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<int32_t> narrow;
    narrow.reserve(ids.size());
    for (int64_t id : ids) {
      // Ids of the padded vocabulary (50257..50303) are never trained towards; show nothing for them.
      if (id >= 0 && id < static_cast<int64_t>(tokenizer_.vocab_size())) narrow.push_back(static_cast<int32_t>(id));
    }
    return tokenizer_.decode(narrow);
  }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokenizer_.vocab_size()); }
  int64_t end_of_text() const override { return tokenizer_.eot_token(); }
  TokenizerKind kind() const override { return TokenizerKind::gpt2; }
  std::string data() const override { return dir_; }

 private:
  std::string dir_;
  Gpt2BpeTokenizer tokenizer_;
};

}  // namespace

std::string_view tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::none:
      return "none";
    case TokenizerKind::character:
      return "char";
    case TokenizerKind::gpt2:
      return "gpt2";
  }
  throw std::logic_error("unnamed tokenizer kind");
}

TokenizerKind parse_tokenizer_kind(std::string_view name) {
  for (TokenizerKind kind : {TokenizerKind::none, TokenizerKind::character, TokenizerKind::gpt2}) {
    if (tokenizer_kind_name(kind) == name) return kind;
  }
  throw std::invalid_argument("unknown tokenizer '" + std::string(name) + "' (expected char or gpt2)");
}

std::unique_ptr<TextCodec> make_text_codec(TokenizerKind kind, const std::string& data) {
  switch (kind) {
    case TokenizerKind::character:
      return std::make_unique<CharCodec>(CharTokenizer::from_vocabulary(data));
    case TokenizerKind::gpt2:
      return std::make_unique<Gpt2Codec>(data);
    case TokenizerKind::none:
      break;
  }
  throw std::invalid_argument("a model trained on token data without --vocab has no tokenizer: give --vocab DIR");
}

int64_t tokens_in_vocabulary(TokenizerKind kind, int64_t vocab_size) {
  return kind == TokenizerKind::gpt2 ? std::min<int64_t>(Gpt2BpeTokenizer::kVocabSize, vocab_size) : vocab_size;
}

std::vector<int64_t> encode_given_text(const TextCodec& codec, std::string_view text, const std::string& source) {
  try {
    return codec.encode(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
}

std::unique_ptr<TextCodec> make_char_codec_for(std::string_view text) {
  return std::make_unique<CharCodec>(CharTokenizer::from_text(text));
}

}  // namespace mygpt
