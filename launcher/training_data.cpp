#include "launcher/training_data.h"

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "dataloader/builtin_dataset.h"
#include "dataloader/text_codec.h"
#include "dataloader/token_stream.h"
#include "model/gpt_config.h"

namespace mygpt {
namespace {

bool is_glob(const std::string& spec) { return spec.find_first_of("*?[") != std::string::npos; }

// Token files announce themselves by magic (llm.c header, numpy header) or by the .bin/.npy names
// that nanoGPT and build-nanogpt use; anything else is read as text.
bool looks_like_token_file(const std::filesystem::path& path) {
  const auto ext = path.extension().string();
  if (ext == ".bin" || ext == ".npy") return true;
  std::ifstream in(path, std::ios::binary);
  std::array<char, 6> head{};
  in.read(head.data(), head.size());
  if (in.gcount() >= 6 && std::memcmp(head.data(), "\x93NUMPY", 6) == 0) return true;
  int32_t magic = 0;
  std::memcpy(&magic, head.data(), sizeof magic);
  return in.gcount() >= 4 && magic == 20240520;
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw std::invalid_argument("data file '" + path + "' does not exist");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read data file '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::invalid_argument("cannot read data file '" + path + "'");
  if (text.empty()) throw std::invalid_argument("data file '" + path + "' is empty");
  return text;
}

std::shared_ptr<const TokenSource> token_stream(const std::string& spec, std::string_view split, int64_t vocab) {
  return std::make_shared<TokenStream>(expand_token_paths(spec, split), static_cast<uint32_t>(vocab));
}

bool directory_has(const std::string& dir, std::string_view word) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().find(word) != std::string::npos) return true;
  }
  return false;
}

TrainingData load_token_data(const po::variables_map& v, const std::string& spec) {
  TrainingData d;
  d.vocab_size = positive(v, "vocab-size");
  const auto char_vocab_size = [&]() -> int64_t {
    const auto path = std::filesystem::path(spec) / "char_vocab.txt";
    if (!std::filesystem::is_directory(spec) || !std::filesystem::exists(path)) return 0;
    return make_text_codec("char", read_text_file(path.string()))->vocab_size();
  }();
  if (char_vocab_size > 0 && v["vocab-size"].defaulted()) d.vocab_size = char_vocab_size;
  if (d.vocab_size > 65536) throw std::invalid_argument("--vocab-size above 65536 cannot be stored in uint16 tokens");
  const bool split_dir = std::filesystem::is_directory(spec) && directory_has(spec, "train");
  d.train = token_stream(spec, split_dir ? "train" : "", d.vocab_size);
  if (v.count("val-data")) {
    d.val = token_stream(v["val-data"].as<std::string>(), "", d.vocab_size);
  } else if (split_dir && directory_has(spec, "val")) {
    d.val = token_stream(spec, "val", d.vocab_size);
  }
  const auto char_vocab = std::filesystem::path(spec) / "char_vocab.txt";
  if (v.count("vocab")) {
    const auto codec = make_text_codec("gpt2", v["vocab"].as<std::string>());
    d.tokenizer_kind = codec->kind();
    d.tokenizer_data = codec->data();
  } else if (std::filesystem::is_directory(spec) && std::filesystem::exists(char_vocab)) {
    // Shards written by `prepare --tokenizer char` carry their vocabulary beside them.
    std::ifstream in(char_vocab, std::ios::binary);
    const std::string vocabulary((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto codec = make_text_codec("char", vocabulary);
    d.tokenizer_kind = codec->kind();
    d.tokenizer_data = codec->data();
  } else {
    d.tokenizer_kind = "none";
  }
  d.description = "token data " + spec + (d.val ? " (with validation shards)" : " (no validation data)");
  return d;
}

TrainingData load_text_data(const po::variables_map& v, const std::string& spec) {
  const std::string text = is_builtin_dataset(spec) ? builtin_dataset_text(spec) : read_text_file(spec);
  const std::string kind = v["tokenizer"].as<std::string>();
  std::unique_ptr<TextCodec> codec;
  if (kind == "char") {
    try {
      codec = make_char_codec_for(text);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("data file '" + spec + "': " + e.what());
    }
  } else if (kind == "gpt2") {
    if (!v.count("vocab")) throw std::invalid_argument("--tokenizer gpt2 needs --vocab DIR (encoder.json, vocab.bpe)");
    codec = make_text_codec("gpt2", v["vocab"].as<std::string>());
  } else {
    throw std::invalid_argument("--tokenizer must be char or gpt2, got '" + kind + "'");
  }
  TrainingData d;
  d.tokenizer_kind = codec->kind();
  d.tokenizer_data = codec->data();
  d.vocab_size = kind == "char" ? codec->vocab_size() : padded_vocab_size(codec->vocab_size());
  auto [train_ids, val_ids] = split_train_val(codec->encode(text), v["val-fraction"].as<double>());
  if (train_ids.empty()) throw std::invalid_argument("the training split of '" + spec + "' is empty");
  d.description = spec + " | " + std::to_string(text.size()) + " bytes | " + kind + " tokenizer";
  d.train = std::make_shared<InMemoryTokens>(std::move(train_ids));
  if (!val_ids.empty()) d.val = std::make_shared<InMemoryTokens>(std::move(val_ids));
  return d;
}

}  // namespace

TrainingData load_training_data(const po::variables_map& v) {
  const std::string spec = v["data"].as<std::string>();
  if (is_builtin_dataset(spec)) return load_text_data(v, spec);
  std::error_code ec;
  if (std::filesystem::is_directory(spec, ec) || (is_glob(spec) && !std::filesystem::exists(spec, ec))) {
    return load_token_data(v, spec);
  }
  if (!std::filesystem::exists(spec, ec)) throw std::invalid_argument("data file '" + spec + "' does not exist");
  if (looks_like_token_file(spec)) return load_token_data(v, spec);
  return load_text_data(v, spec);
}

}  // namespace mygpt
