#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "common/file_io.h"
#include "tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <utility>

namespace mygpt {
namespace {

namespace fs = std::filesystem;

using bpe::bytes_of_alphabet_spelling;
using bpe::MergeRule;
using bpe::MergeTable;
using bpe::StringMap;

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

}  // namespace

struct Gpt2BpeTokenizer::Impl {
  std::vector<std::string> token_bytes;  // id -> raw bytes

  std::mutex encode_mutex;  // guards everything below: encode() reuses it all between calls
  bpe::PretokenPattern splitter{bpe::gpt2_split_pattern(), "GPT-2 tokenizer"};
  std::optional<bpe::WordEncoder> words;  // set once the files are read

  void encode_ordinary(std::string_view text, std::vector<int32_t>& out);
};

void Gpt2BpeTokenizer::Impl::encode_ordinary(std::string_view text, std::vector<int32_t>& out) {
  std::size_t offset = 0;
  while (offset < text.size()) {
    const auto match = splitter.next(text, offset);
    const auto [begin, end] = match.value_or(std::pair{text.size(), text.size()});
    // Bytes that no alternative matches are invalid UTF-8; they become their own piece so that
    // decode(encode(s)) == s holds for any bytes.
    if (begin > offset) words->encode(text.substr(offset, begin - offset), out);
    if (end > begin) words->encode(text.substr(begin, end - begin), out);
    offset = end;
  }
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
  std::array<int32_t, 256> byte_token{};
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = ids_by_spelling.find(bpe::alphabet_spelling_of_byte(static_cast<unsigned char>(byte)));
    if (it == ids_by_spelling.end()) {
      throw std::invalid_argument(files->vocabulary.string() + ": no token for the single byte " +
                                  std::to_string(byte));
    }
    byte_token[byte] = it->second;
  }
  impl->words.emplace(byte_token,
                      read_vocab_bpe(files->merges, texts.merges, ids_by_spelling, files->vocabulary.filename().string()),
                      bpe::MergeOrder::whole_rounds);
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
