#include "dataloader/training_data.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/file_io.h"
#include "dataloader/builtin_dataset.h"
#include "dataloader/chat_data.h"
#include "dataloader/document_reader.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "dataloader/token_file.h"
#include "dataloader/token_stream.h"

namespace mygpt {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGpt2PaddedVocab = 50304;  // GPT-2's 50257 tokens rounded up to a multiple of 64
constexpr int64_t kLargestUint16Vocab = 65536;

bool is_glob(const std::string& spec) { return spec.find_first_of("*?[") != std::string::npos; }

std::shared_ptr<const TokenSource> token_stream(const std::string& spec, std::string_view split, int64_t vocab) {
  return std::make_shared<TokenStream>(expand_token_paths(spec, split), static_cast<uint32_t>(vocab));
}

bool directory_has(const std::string& dir, std::string_view word) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().find(word) != std::string::npos) return true;
  }
  return false;
}

// Shards written by `prepare --tokenizer char` carry their vocabulary beside them.
std::optional<std::string> char_vocabulary_beside(const std::string& spec) {
  const auto path = fs::path(spec) / "char_vocab.txt";
  std::error_code ec;
  if (!fs::is_directory(spec, ec) || !fs::exists(path, ec)) return std::nullopt;
  return read_whole_file(path, "character vocabulary");
}

// Shards written by `prepare --tokenizer gpt2` carry GPT-2's tokenizer files beside them, and those of
// `prepare --tokenizer hf` a tokenizer.json: the folder, and which of the two it holds.
std::optional<std::pair<TokenizerKind, std::string>> bpe_vocabulary_beside(const std::string& spec) {
  std::error_code ec;
  if (!fs::is_directory(spec, ec)) return std::nullopt;
  const auto kind = folder_tokenizer_kind(spec);
  if (!kind) return std::nullopt;
  return std::make_pair(*kind, fs::absolute(spec).lexically_normal().string());
}

// The tokenizer of token data: --vocab's, else the one prepare wrote beside the shards; none for bare ids.
std::unique_ptr<TextCodec> token_data_codec(const DataOptions& o, const std::string& spec) {
  if (o.vocab) {
    return make_text_codec(folder_tokenizer_kind(*o.vocab).value_or(TokenizerKind::gpt2), *o.vocab);  // gpt2 reports what is missing
  }
  if (const auto characters = char_vocabulary_beside(spec)) return make_text_codec(TokenizerKind::character, *characters);
  if (const auto beside = bpe_vocabulary_beside(spec)) return make_text_codec(beside->first, beside->second);
  return nullptr;
}

// The model's rows for token data: --vocab-size, else those of the characters or of a tokenizer.json
// beside the shards (as training on the text with them would have), else GPT-2's padded 50304.
int64_t token_data_vocab_size(const DataOptions& o, const std::string& spec, const TextCodec* codec) {
  // The characters count even where --vocab names the tokenizer (codec is then --vocab's); without
  // --vocab, codec is the characters' own and own_rows below counts them.
  if (o.vocab && !o.vocab_size) {
    if (const auto characters = char_vocabulary_beside(spec)) {
      return make_text_codec(TokenizerKind::character, *characters)->vocab_size();
    }
  }
  const bool own_rows = !o.vocab && codec && codec->kind() != TokenizerKind::gpt2;
  return o.vocab_size.value_or(own_rows ? codec->vocab_size() : kGpt2PaddedVocab);
}

TrainingData load_token_data(const DataOptions& o, const std::string& spec) {
  TrainingData d;
  const std::unique_ptr<TextCodec> codec = token_data_codec(o, spec);
  d.vocab_size = token_data_vocab_size(o, spec, codec.get());
  if (d.vocab_size > kLargestUint16Vocab) {
    throw std::invalid_argument("--vocab-size above 65536 cannot be stored in uint16 tokens");
  }
  const bool split_dir = fs::is_directory(spec) && directory_has(spec, "train");
  // A folder of validation shards alone would otherwise train on its validation data.
  if (fs::is_directory(spec) && !split_dir && directory_has(spec, "val")) {
    throw std::invalid_argument("token data '" + spec +
                                "' holds *val* files but no *train* files: training on validation data is refused "
                                "(name the training files, or a glob of them)");
  }
  d.train = token_stream(spec, split_dir ? "train" : "", d.vocab_size);
  if (o.val_data) {
    d.val = token_stream(*o.val_data, "", d.vocab_size);
  } else if (split_dir && directory_has(spec, "val")) {
    d.val = token_stream(spec, "val", d.vocab_size);
  }
  if (codec) {
    d.tokenizer_kind = codec->kind();
    d.tokenizer_data = codec->data();
  }
  d.description = "token data " + spec + (d.val ? " (with validation shards)" : " (no validation data)");
  return d;
}

// The files `prepare` reads as documents are not a text to train on as it is: Parquet is binary (not
// UTF-8), and a JSON-lines file would be learnt with its JSON syntax. Each is refused, naming its road.
void refuse_document_file(const std::string& spec) {
  std::ifstream in(spec, std::ios::binary);
  std::string head(4, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (looks_like_parquet(spec, head)) {
    throw std::invalid_argument("data file '" + spec + "' is Parquet, which train does not read: prepare it first "
                                "(mygpt-ddp prepare --input " + spec + " --vocab DIR --out SHARDS) and train on SHARDS");
  }
}

void refuse_json_lines_text(const std::string& spec, const std::string& text) {
  const std::string first_line = text.substr(0, text.find('\n'));
  const auto start = first_line.find_first_not_of(" \t\r");
  if (start == std::string::npos || first_line[start] != '{' || !nlohmann::json::accept(first_line)) return;
  throw std::invalid_argument("data file '" + spec + "' is JSON lines, and train reads a text file as it is, JSON "
                              "syntax and all: prepare it (mygpt-ddp prepare --input " + spec +
                              " --out SHARDS: each line's \"text\", or --text-column) and train on SHARDS, or give "
                              "--sft for conversations ({\"messages\": [...]})");
}

TrainingData load_text_data(const DataOptions& o, const std::string& spec) {
  if (!is_builtin_dataset(spec)) refuse_document_file(spec);
  std::string text = is_builtin_dataset(spec) ? builtin_dataset_text(spec) : read_text_file(spec, "data file");
  if (text.empty()) throw std::invalid_argument("data file '" + spec + "' is empty");
  if (!is_builtin_dataset(spec)) refuse_json_lines_text(spec, text);
  std::unique_ptr<TextCodec> codec;
  if (o.tokenizer == TokenizerKind::gpt2 || o.tokenizer == TokenizerKind::hf) {
    if (!o.vocab) {
      throw std::invalid_argument(o.tokenizer == TokenizerKind::gpt2
                                      ? "--tokenizer gpt2 needs --vocab DIR (encoder.json, vocab.bpe)"
                                      : "--tokenizer hf needs --vocab DIR (its tokenizer.json)");
    }
    codec = make_text_codec(o.tokenizer, *o.vocab);
  } else {
    try {
      codec = make_char_codec_for(text);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("data file '" + spec + "': " + e.what());
    }
  }
  TrainingData d;
  d.tokenizer_kind = codec->kind();
  d.tokenizer_data = codec->data();
  // GPT-2's 50257 ids get the padded vocabulary that token data of GPT-2 uses too.
  d.vocab_size = d.tokenizer_kind == TokenizerKind::gpt2 ? kGpt2PaddedVocab : codec->vocab_size();
  // Ordinary text, as prepare encodes a document: a literal <|endoftext|> in it is not a delimiter.
  auto [train_ids, val_ids] = split_train_val(codec->encode_ordinary(text), o.val_fraction);
  if (train_ids.empty()) throw std::invalid_argument("the training split of '" + spec + "' is empty");
  d.description = spec + " | " + std::to_string(text.size()) + " bytes | " +
                  std::string(tokenizer_kind_name(d.tokenizer_kind)) + " tokenizer";
  d.train = std::make_shared<InMemoryTokens>(std::move(train_ids));
  if (!val_ids.empty()) d.val = std::make_shared<InMemoryTokens>(std::move(val_ids));
  return d;
}

}  // namespace

std::string ChatData::describe(size_t train_count, size_t held_out) const {
  return source + " | " + std::to_string(train_count) + " to train on, " + std::to_string(held_out) + " held out | " +
         tokenizer;
}

namespace {

TrainingData load_chat_data(const DataOptions& o) {
  if (!o.vocab || (o.tokenizer != TokenizerKind::gpt2 && o.tokenizer != TokenizerKind::hf)) {
    throw std::invalid_argument("--sft needs a BPE tokenizer (GPT-2's files or a tokenizer.json): give --vocab DIR, or "
                                "--init-from a model with one");
  }
  require_regular_file(o.data, "conversations file");
  if (looks_like_token_file(o.data)) {
    throw std::invalid_argument("--sft reads conversations as JSON lines, and '" + o.data +
                                "' is a token file: give a .jsonl of {\"messages\": [...]} records");
  }
  const TokenizerKind kind =
      o.tokenizer == TokenizerKind::hf && !is_gpt2_tokenizer_folder(*o.vocab) ? TokenizerKind::hf : TokenizerKind::gpt2;
  const auto codec = make_text_codec(kind, *o.vocab);
  TrainingData d;
  d.tokenizer_kind = kind;
  d.tokenizer_data = codec->data();
  // GPT-2's padded vocabulary holds the five chat tokens after its 50257; another tokenizer.json has its
  // own chat tokens (nanochat's) or gets the five after its ids, and the model its rows for them.
  d.vocab_size = kind == TokenizerKind::gpt2 ? kGpt2PaddedVocab
                                             : ChatFormat(*codec, std::numeric_limits<int64_t>::max()).ids_end();
  const ChatFormat format(*codec, d.vocab_size);
  ChatExamples train = read_chat_examples(o.data, format, o.skip_bad_records);
  std::vector<RenderedChat> val;
  int64_t bad_skipped = train.bad_skipped, records = train.records;
  if (o.val_data) {
    ChatExamples held_out = read_chat_examples(*o.val_data, format, o.skip_bad_records);
    bad_skipped += held_out.bad_skipped;
    records += held_out.records;
    val = std::move(held_out.conversations);
  } else {
    // The file's last conversations, as a text's last val_fraction is held out.
    const auto held = static_cast<size_t>(static_cast<double>(train.conversations.size()) * o.val_fraction);
    val.assign(std::make_move_iterator(train.conversations.end() - static_cast<long>(held)),
               std::make_move_iterator(train.conversations.end()));
    train.conversations.resize(train.conversations.size() - held);
    if (train.conversations.empty()) {
      throw std::invalid_argument("--val-fraction " + std::to_string(o.val_fraction) + " leaves none of the " +
                                  std::to_string(held) + " conversations of '" + o.data + "' to train on");
    }
  }
  if (bad_skipped > 0) {
    d.notes.push_back("note: skipped " + std::to_string(bad_skipped) + " bad record(s) of " + std::to_string(records) +
                      " (--skip-bad-records)");
  }
  ChatData chat;
  chat.source = "conversations " + o.data;
  chat.tokenizer = std::string(tokenizer_kind_name(kind)) + " tokenizer" +
                   (format.tokenizer_has_tokens() ? " with its own chat tokens" : "") + ", chat template '" +
                   std::string(ChatFormat::kTemplateName) + "'";
  d.description = chat.describe(train.conversations.size(), val.size());
  chat.train = std::make_shared<const std::vector<RenderedChat>>(std::move(train.conversations));
  if (!val.empty()) chat.val = std::make_shared<const std::vector<RenderedChat>>(std::move(val));
  chat.format_record = format.record();
  chat.ids_end = format.ids_end();
  // Padding is never read by a real token nor a target: any id will do, <|bos|> where there is no end of text.
  chat.pad_id = codec->end_of_text() >= 0 ? codec->end_of_text() : format.tokens().bos;
  d.chat = std::move(chat);
  return d;
}

}  // namespace

bool is_token_data(const std::string& spec) {
  if (is_builtin_dataset(spec)) return false;
  std::error_code ec;
  if (fs::is_directory(spec, ec) || (is_glob(spec) && !fs::exists(spec, ec))) return true;
  require_regular_file(spec, "data file");
  return looks_like_token_file(spec);
}

DataFootprint data_footprint(const DataOptions& o) {
  DataFootprint f;
  if (o.sft) {
    const TrainingData d = load_training_data(o);
    for (const auto* set : {d.chat->train.get(), d.chat->val.get()}) {
      for (size_t i = 0; set != nullptr && i < set->size(); ++i) {
        f.resident_bytes += static_cast<int64_t>((*set)[i].ids.size() * (sizeof(int64_t) + 1));
      }
    }
    f.vocab_size = d.vocab_size;
    f.loaded = true;
    f.description = d.description;
    return f;
  }
  if (!is_token_data(o.data)) {
    const TrainingData d = load_training_data(o);
    f.vocab_size = d.vocab_size;
    const auto tokens = d.train->size() + (d.val ? d.val->size() : 0);
    f.resident_bytes = static_cast<int64_t>(tokens * sizeof(int64_t));
    f.loaded = true;
    f.description = d.description + " | " + std::to_string(tokens) + " tokens";
    return f;
  }
  f.vocab_size = token_data_vocab_size(o, o.data, token_data_codec(o, o.data).get());
  const bool split_dir = fs::is_directory(o.data) && directory_has(o.data, "train");
  std::vector<fs::path> files = expand_token_paths(o.data, split_dir ? "train" : "");
  if (o.val_data) {
    for (auto& p : expand_token_paths(*o.val_data, "")) files.push_back(std::move(p));
  } else if (split_dir && directory_has(o.data, "val")) {
    for (auto& p : expand_token_paths(o.data, "val")) files.push_back(std::move(p));
  }
  for (const auto& file : files) f.resident_bytes += static_cast<int64_t>(fs::file_size(file));
  f.description = "token data " + o.data + " | " + std::to_string(files.size()) + " file(s), " +
                  std::to_string(f.resident_bytes) + " bytes (not read by plan)";
  return f;
}

TrainingData load_training_data(const DataOptions& o) {
  if (o.sft) return load_chat_data(o);
  return is_token_data(o.data) ? load_token_data(o, o.data) : load_text_data(o, o.data);
}

}  // namespace mygpt
