#include "tokenizer/bpe_trainer.h"

#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/hf_bpe_tokenizer.h"

namespace mygpt {

std::optional<std::string> named_split_pattern(std::string_view name) {
  if (name == "gpt4") {
    return R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
  }
  if (name == "nanochat") {
    return R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
  }
  if (name == "gpt2") return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  return std::nullopt;
}

const std::vector<std::string>& nanochat_special_tokens() {
  static const std::vector<std::string> tokens = {
      "<|bos|>",          "<|user_start|>", "<|user_end|>",     "<|assistant_start|>", "<|assistant_end|>",
      "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>"};
  return tokens;
}

bool has_special_form(std::string_view token) {
  if (token.size() < 3) return false;
  const bool angled = token.front() == '<' && token.back() == '>';
  const bool squared = token.front() == '[' && token.back() == ']';
  const bool spaced = token.find_first_of(" \t\r\n") != std::string_view::npos;
  return (angled || squared) && !spaced;
}

BpeTrainer::BpeTrainer(BpeTrainingOptions options) : options_(std::move(options)) {
  const std::size_t floor = 256 + options_.special_tokens.size();
  if (options_.vocab_size < floor) {
    throw std::invalid_argument("--vocab-size " + std::to_string(options_.vocab_size) + " is below 256 bytes + " +
                                std::to_string(options_.special_tokens.size()) + " special token(s) = " +
                                std::to_string(floor));
  }
  std::set<std::string> seen;
  for (const std::string& token : options_.special_tokens) {
    if (token.empty()) throw std::invalid_argument("--special: a special token cannot be empty");
    if (!seen.insert(token).second) throw std::invalid_argument("--special '" + token + "' is given twice");
    if (!has_special_form(token)) {
      throw std::invalid_argument("--special '" + token +
                                  "': a special token is matched wherever its text appears (Hugging Face's tokenizers "
                                  "cut it out of any text they encode), so it must be marked off as no text is: "
                                  "<...> or [...] without spaces, like <|" + token + "|>");
    }
  }
  counter_ = std::make_unique<bpe::ChunkCounter>(bpe::pcre2_pattern_of(options_.split_regex), "--pattern",
                                                 options_.threads);
}

BpeTrainer::~BpeTrainer() = default;

bool BpeTrainer::add(std::string_view piece, bool starts_document) {
  if (starts_document || documents_ == 0) {
    // nanochat's tok_train: a document is taken whole while the characters before it are within the
    // budget, so the one that passes it is the last.
    if (options_.max_chars && characters_ > *options_.max_chars) spent_ = true;
    if (spent_) return false;
    ++documents_;
    document_characters_ = 0;
  }
  if (spent_) return false;
  // Characters are code points (Python's len): every byte but UTF-8's continuation bytes starts one.
  std::size_t end = piece.size();
  uint64_t count = 0;
  const uint64_t room = options_.doc_cap ? *options_.doc_cap - std::min(*options_.doc_cap, document_characters_)
                                         : UINT64_MAX;
  for (std::size_t i = 0; i < piece.size(); ++i) {
    if ((static_cast<unsigned char>(piece[i]) & 0xC0) == 0x80) continue;
    if (count == room) {
      end = i;
      break;
    }
    ++count;
  }
  document_characters_ += count;
  characters_ += count;
  if (end > 0) counter_->add(std::string(piece.substr(0, end)));
  return true;
}

TrainedBpe BpeTrainer::finish(const std::function<void(std::size_t, std::size_t)>& progress) {
  TrainedBpe result;
  result.split_regex = options_.split_regex;
  result.special_tokens = options_.special_tokens;
  result.characters = characters_;
  result.documents = documents_;
  const bpe::ChunkTable chunks = counter_->finish();
  counter_.reset();
  if (characters_ == 0) throw std::invalid_argument("--input: no text to train on (the documents are empty)");
  result.distinct_chunks = chunks.size();
  const std::size_t merges = options_.vocab_size - 256 - options_.special_tokens.size();
  result.merges = bpe::learn_merges(chunks, merges, [&](std::size_t done) {
    if (progress) progress(done, merges);
  });
  result.token_bytes.reserve(256 + result.merges.size());
  for (int byte = 0; byte < 256; ++byte) result.token_bytes.emplace_back(1, static_cast<char>(byte));
  for (const bpe::LearnedMerge& m : result.merges) {
    result.token_bytes.push_back(result.token_bytes[m.left] + result.token_bytes[m.right]);
  }
  return result;
}

std::string TrainedBpe::tokenizer_json() const {
  std::vector<std::pair<int32_t, int32_t>> pairs;
  pairs.reserve(merges.size());
  for (const bpe::LearnedMerge& m : merges) pairs.emplace_back(m.left, m.right);
  return trained_tokenizer_json(token_bytes, pairs, split_regex, special_tokens);
}

std::string TrainedBpe::tokenizer_config_json() const {
  nlohmann::ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                   {"clean_up_tokenization_spaces", false}};
  if (!special_tokens.empty()) {
    std::string eos = special_tokens.front();
    for (const char* preferred : {"<|assistant_end|>", "<|endoftext|>"}) {
      for (const std::string& token : special_tokens) {
        if (token == preferred) eos = token;
      }
    }
    config["bos_token"] = special_tokens.front();
    config["eos_token"] = eos;
    nlohmann::ordered_json added = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < special_tokens.size(); ++i) {
      added[std::to_string(token_bytes.size() + i)] = {{"content", special_tokens[i]}, {"lstrip", false},
                                                       {"normalized", false},          {"rstrip", false},
                                                       {"single_word", false},         {"special", true}};
    }
    config["added_tokens_decoder"] = added;
  }
  return config.dump(2) + "\n";
}

}  // namespace mygpt
