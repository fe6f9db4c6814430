#include "dataloader/hf_tokenizer_files.h"

#include <nlohmann/json.hpp>

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
    for (int64_t id = chat->tokens().bos; id <= chat->tokens().assistant_end; ++id) {
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


}  // namespace mygpt
