#include "dataloader/hf_tokenizer_files.h"

#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <stdexcept>
#include <vector>

#include "common/file_io.h"

namespace mygpt {

void write_hf_gpt2_tokenizer(const std::filesystem::path& folder, const Gpt2TokenizerFiles& from, int64_t context,
                             const ChatFormat* chat) {
  const Gpt2TokenizerTexts texts = read_gpt2_tokenizer_texts(from);
  write_file_atomically(folder / "vocab.json", texts.vocabulary);
  write_file_atomically(folder / "merges.txt", texts.merges);
  const std::string eot(Gpt2BpeTokenizer::kEndOfText);
  const std::string bos = chat ? std::string(ChatFormat::kTokenNames.front()) : eot;
  const std::string eos = chat ? std::string(ChatFormat::kTokenNames.back()) : eot;
  nlohmann::ordered_json config = {
      {"add_bos_token", false}, {"add_prefix_space", false},      {"bos_token", bos},
      {"clean_up_tokenization_spaces", false},                     {"eos_token", eos},
      {"errors", "replace"},    {"model_max_length", context},    {"pad_token", nullptr},
      {"tokenizer_class", "GPT2Tokenizer"},                        {"unk_token", eot}};
  nlohmann::ordered_json special = {{"bos_token", bos}, {"eos_token", eos}, {"unk_token", eot}};
  if (chat) {
    nlohmann::ordered_json added = nlohmann::ordered_json::object();
    std::vector<std::string> names;
    for (int64_t id = chat->tokens().bos; id <= chat->tokens().assistant_end; ++id) {  // appended: consecutive
      const std::string name(*chat->special_name(id));
      added[std::to_string(id)] = {{"content", name}, {"lstrip", false}, {"normalized", false},
                                   {"rstrip", false}, {"single_word", false}, {"special", true}};
      names.push_back(name);
    }
    config["added_tokens_decoder"] = added;
    config["additional_special_tokens"] = names;
    config["chat_template"] = ChatFormat::jinja_template();
    special["additional_special_tokens"] = names;
  }
  write_file_atomically(folder / "tokenizer_config.json", config.dump(2) + "\n");
  write_file_atomically(folder / "special_tokens_map.json", special.dump(2) + "\n");
}

namespace {

// The five tokens as Hugging Face's added-token entries describe them: whole, special, never normalized.
nlohmann::ordered_json added_token(const std::string& name) {
  return {{"content", name}, {"lstrip", false}, {"normalized", false},
          {"rstrip", false}, {"single_word", false}, {"special", true}};
}

std::vector<std::pair<int64_t, std::string>> chat_tokens(const ChatFormat& chat) {
  const ChatSpecialTokens& t = chat.tokens();
  std::vector<std::pair<int64_t, std::string>> out;
  for (int64_t id : {t.bos, t.user_start, t.user_end, t.assistant_start, t.assistant_end}) {
    out.emplace_back(id, std::string(*chat.special_name(id)));
  }
  return out;
}

nlohmann::ordered_json read_json_file(const std::filesystem::path& path) {
  try {
    return nlohmann::ordered_json::parse(read_whole_file(path, "Hugging Face tokenizer file"));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path.string() + ": malformed JSON: " + e.what());
  }
}

}  // namespace

void add_chat_to_hf_tokenizer(const std::filesystem::path& folder, const ChatFormat& chat) {
  const auto tokens = chat_tokens(chat);
  if (!chat.tokenizer_has_tokens()) {
    nlohmann::ordered_json tokenizer = read_json_file(folder / "tokenizer.json");
    for (const auto& [id, name] : tokens) {
      nlohmann::ordered_json entry = {{"id", id}};
      entry.update(added_token(name));
      tokenizer["added_tokens"].push_back(entry);
    }
    write_file_atomically(folder / "tokenizer.json", tokenizer.dump(2) + "\n");
  }
  std::error_code ec;
  const auto config_path = folder / "tokenizer_config.json";
  nlohmann::ordered_json config =
      std::filesystem::exists(config_path, ec) ? read_json_file(config_path) : nlohmann::ordered_json::object();
  std::vector<std::string> names;
  for (const auto& [id, name] : tokens) {
    config["added_tokens_decoder"][std::to_string(id)] = added_token(name);
    names.push_back(name);
  }
  config["bos_token"] = tokens.front().second;
  config["eos_token"] = tokens.back().second;
  config["chat_template"] = ChatFormat::jinja_template();
  if (!config.contains("tokenizer_class")) config["tokenizer_class"] = "PreTrainedTokenizerFast";
  write_file_atomically(config_path, config.dump(2) + "\n");
}

std::optional<std::string> read_hf_chat_record(const std::filesystem::path& folder) {
  std::error_code ec;
  const auto config_path = folder / "tokenizer_config.json";
  if (!std::filesystem::exists(config_path, ec)) return std::nullopt;
  const nlohmann::json config = read_json_file(config_path);
  const auto chat_template = config.find("chat_template");
  if (chat_template == config.end() || !chat_template->is_string() ||
      chat_template->get<std::string>() != ChatFormat::jinja_template()) {
    return std::nullopt;
  }
  // Spelling -> id, from tokenizer_config.json, then tokenizer.json for any it lacks.
  std::map<std::string, int64_t> ids;
  try {
    if (const auto decoder = config.find("added_tokens_decoder"); decoder != config.end() && decoder->is_object()) {
      for (const auto& [id, token] : decoder->items()) {
        if (token.is_object() && token.contains("content")) ids.emplace(token["content"].get<std::string>(), std::stoll(id));
      }
    }
    if (std::filesystem::exists(folder / "tokenizer.json", ec)) {
      const nlohmann::json tokenizer = read_json_file(folder / "tokenizer.json");
      if (const auto added = tokenizer.find("added_tokens"); added != tokenizer.end() && added->is_array()) {
        for (const auto& token : *added) ids.emplace(token.at("content").get<std::string>(), token.at("id").get<int64_t>());
      }
    }
  } catch (const std::exception& e) {  // a wrong type, a key that is no number
    throw std::invalid_argument(config_path.string() + ": its added tokens are malformed: " + e.what());
  }
  std::array<int64_t, ChatFormat::kTokenNames.size()> found{};
  for (size_t i = 0; i < found.size(); ++i) {
    const auto it = ids.find(std::string(ChatFormat::kTokenNames[i]));
    if (it == ids.end() || it->second < 0) {
      throw std::invalid_argument(config_path.string() + " has the '" + std::string(ChatFormat::kTemplateName) +
                                  "' chat template but no id for its token " + std::string(ChatFormat::kTokenNames[i]));
    }
    found[i] = it->second;
  }
  return ChatFormat::record_of({found[0], found[1], found[2], found[3], found[4]});
}

}  // namespace mygpt
