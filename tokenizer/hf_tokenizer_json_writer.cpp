// Writing tokenizer.json in the layout transformers writes: GPT-2's from encoder.json and vocab.bpe, and a
// byte-level BPE trained here (which HfBpeTokenizer::load reads back).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/hf_bpe_tokenizer.h"

namespace mygpt {
namespace {

using nlohmann::json;

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
