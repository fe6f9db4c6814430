#include "tokenizer/text_codec.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "tokenizer/char_tokenizer.h"
#include "common/file_io.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/line_cuts.h"

#include <nlohmann/json.hpp>

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
  std::vector<int64_t> token_byte_counts() const override {
    std::vector<int64_t> counts(static_cast<size_t>(vocab_size()));
    for (int64_t id = 0; id < vocab_size(); ++id) counts[static_cast<size_t>(id)] = static_cast<int64_t>(tokenizer_.decode({id}).size());
    return counts;
  }

 private:
  CharTokenizer tokenizer_;
};

class Gpt2Codec final : public TextCodec {
 public:
  explicit Gpt2Codec(const std::string& dir)
      : dir_(std::filesystem::absolute(dir).string()), tokenizer_(Gpt2BpeTokenizer::load(dir)) {}
  std::vector<int64_t> encode(std::string_view text) const override {
    // Prompts may name <|endoftext|> on purpose; documents (prepare, a training text) use encode_ordinary.
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
  std::vector<int64_t> token_byte_counts() const override {
    std::vector<int64_t> counts(tokenizer_.vocab_size());
    for (size_t id = 0; id < counts.size(); ++id) {
      counts[id] = static_cast<int64_t>(tokenizer_.token_bytes(static_cast<int32_t>(id)).size());
    }
    counts[static_cast<size_t>(tokenizer_.eot_token())] = 0;
    return counts;
  }

 private:
  std::string dir_;
  Gpt2BpeTokenizer tokenizer_;
};

// The token that starts each document of a corpus (the trainer's delimiter): tokenizer_config.json's
// bos_token (nanochat's <|bos|>, Llama's <|begin_of_text|>), else its eos_token (Qwen's, GPT-2's
// <|endoftext|>), else an added <|endoftext|> or nanochat's <|bos|>; -1 without any.
int64_t document_delimiter(const std::filesystem::path& dir, const HfBpeTokenizer& tokenizer) {
  std::vector<std::string> candidates;
  std::error_code ec;
  if (std::filesystem::exists(dir / "tokenizer_config.json", ec)) {
    try {
      const auto config = nlohmann::json::parse(read_whole_file(dir / "tokenizer_config.json", "tokenizer config"));
      for (const char* key : {"bos_token", "eos_token"}) {
        const auto value = config.value(key, nlohmann::json());
        if (value.is_string()) candidates.push_back(value.get<std::string>());
        if (value.is_object() && value.value("content", nlohmann::json()).is_string()) {
          candidates.push_back(value["content"].get<std::string>());
        }
      }
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument((dir / "tokenizer_config.json").string() + ": malformed JSON: " + e.what());
    }
  }
  candidates.insert(candidates.end(), {"<|endoftext|>", "<|bos|>"});
  for (const auto& candidate : candidates) {
    if (const auto id = tokenizer.token_id(candidate)) return *id;
  }
  return -1;
}

class HfCodec final : public TextCodec {
 public:
  explicit HfCodec(const std::string& dir)
      : dir_(std::filesystem::absolute(dir).string()),
        tokenizer_(HfBpeTokenizer::load(std::filesystem::path(dir) / HfBpeTokenizer::kFileName)),
        delimiter_(document_delimiter(dir, tokenizer_)) {}
  std::vector<int64_t> encode(std::string_view text) const override {
    const auto ids = tokenizer_.encode(text);
    return {ids.begin(), ids.end()};
  }
  std::vector<int64_t> encode_ordinary(std::string_view text) const override {
    const auto ids = tokenizer_.encode(text, HfBpeTokenizer::SpecialTokens::as_text);
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (const int64_t id : ids) {
      // Rows of the model beyond the tokenizer's ids are never trained towards; show nothing for them.
      if (id >= 0 && id < vocab_size()) text += tokenizer_.token_bytes(static_cast<int32_t>(id));
    }
    return text;
  }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokenizer_.vocab_size()); }
  int64_t end_of_text() const override { return delimiter_; }
  TokenizerKind kind() const override { return TokenizerKind::hf; }
  std::string data() const override { return dir_; }
  std::vector<int64_t> token_byte_counts() const override {
    std::vector<int64_t> counts(static_cast<size_t>(vocab_size()), 0);
    for (size_t id = 0; id < counts.size(); ++id) {
      const auto narrow = static_cast<int32_t>(id);
      if (tokenizer_.has_token(narrow)) counts[id] = static_cast<int64_t>(tokenizer_.token_bytes(narrow).size());
    }
    for (const int32_t id : tokenizer_.special_ids()) counts[static_cast<size_t>(id)] = 0;
    return counts;
  }
  bool restarts_at(std::string_view text, std::size_t cut) const override { return tokenizer_.restarts_at(text, cut); }

 private:
  std::string dir_;
  HfBpeTokenizer tokenizer_;
  int64_t delimiter_;
};

}  // namespace

// GPT-2's pattern ends a piece right after a '\n' between visible characters (tokenizer/line_cuts.h: printable
// ASCII, or a non-ASCII letter, number, punctuation mark or symbol, as CJK text's lines end and start) and
// between the '\r' and the '\n' of a CRLF between two, whether the text is cut there or not ("\r\n" at the end
// of a piece would be one token, before a letter it is two); the character tokenizer maps characters one by one.
bool restarts_between_printable_lines(std::string_view text, std::size_t cut) {
  const LineCut kind = line_cut_at(text, cut);
  return kind == LineCut::tight || kind == LineCut::crlf_after_cr;
}

bool TextCodec::restarts_at(std::string_view text, std::size_t cut) const {
  return restarts_between_printable_lines(text, cut);
}

std::optional<TokenizerKind> folder_tokenizer_kind(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(dir) / HfBpeTokenizer::kFileName, ec)) return TokenizerKind::hf;
  if (Gpt2BpeTokenizer::find_files(dir)) return TokenizerKind::gpt2;
  return std::nullopt;
}

std::string_view tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::none:
      return "none";
    case TokenizerKind::character:
      return "char";
    case TokenizerKind::gpt2:
      return "gpt2";
    case TokenizerKind::hf:
      return "hf";
  }
  throw std::logic_error("unnamed tokenizer kind");
}

TokenizerKind parse_tokenizer_kind(std::string_view name) {
  for (TokenizerKind kind : {TokenizerKind::none, TokenizerKind::character, TokenizerKind::gpt2, TokenizerKind::hf}) {
    if (tokenizer_kind_name(kind) == name) return kind;
  }
  throw std::invalid_argument("unknown tokenizer '" + std::string(name) + "' (expected char, gpt2 or hf)");
}

std::unique_ptr<TextCodec> make_text_codec(TokenizerKind kind, const std::string& data) {
  switch (kind) {
    case TokenizerKind::character:
      return std::make_unique<CharCodec>(CharTokenizer::from_vocabulary(data));
    case TokenizerKind::gpt2:
      return std::make_unique<Gpt2Codec>(data);
    case TokenizerKind::hf:
      return std::make_unique<HfCodec>(data);
    case TokenizerKind::none:
      break;
  }
  throw std::invalid_argument("a model trained on token data without --vocab has no tokenizer: give --vocab DIR");
}

// Other models ship vocab.json and merges.txt too (Qwen's): the files must be GPT-2's size and tokenize
// a probe as the folder's tokenizer.json does. A question, never a refusal: any other tokenizer.json (one
// `tokenizer train` wrote, of 2039 tokens, say) is simply not GPT-2's, whatever files lie beside it.
bool is_gpt2_tokenizer_folder(const std::string& dir) {
  if (!Gpt2BpeTokenizer::find_files(dir)) return false;
  const auto json = make_text_codec(TokenizerKind::hf, dir);  // the folder's definition: its faults are real
  if (json->vocab_size() != static_cast<int64_t>(Gpt2BpeTokenizer::kVocabSize)) return false;
  std::unique_ptr<TextCodec> files;
  try {
    files = make_text_codec(TokenizerKind::gpt2, dir);
  } catch (const std::invalid_argument&) {  // files GPT-2's reader refuses are not GPT-2's files
    return false;
  }
  const std::string probe = "Hello, world! It's 2024: caf\u00e9   \n\tHOW'LL we  go?  12345 <|endoftext|>";
  return files->vocab_size() == json->vocab_size() && json->encode(probe) == files->encode(probe);
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
