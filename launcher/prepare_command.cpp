// `mygpt-ddp prepare`: tokenizes text into llm.c .bin shards. Each document (a whole plain-text file,
// or one line of a JSON-lines file) is preceded by <|endoftext|>, as llm.c does; the last
// --val-tokens tokens go to val shards, the rest to train shards: validation is the end of a text, as
// for `train` on a text (--val-fraction) and `eval --val` on one.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "common/file_io.h"
#include "common/folder_claim.h"
#include "common/progress.h"
#include "common/strprintf.h"
#include "dataloader/gpt2_bpe_tokenizer.h"
#include "dataloader/text_codec.h"
#include "dataloader/token_shard_writer.h"
#include "launcher/commands.h"
#include "launcher/shared_flags.h"

namespace mygpt {
namespace {

struct PrepareFlags {
  std::vector<std::string> input;
  std::optional<std::string> out;
  TokenizerKind tokenizer{};
  std::optional<std::string> vocab;
  int64_t shard_tokens{};
  std::optional<int64_t> val_tokens;
  bool overwrite{};
  bool quiet{};
};

const OptionTable<PrepareFlags>& prepare_flag_table() {
  static const OptionTable<PrepareFlags> table = [] {
    using P = PrepareFlags;
    OptionTable<P> t;
    t.group("Input and output");
    t.add("input", &P::input,
          "text files (each one document) or JSON-lines files (one document per line, field \"text\"); also the "
          "positional arguments")
        .required();
    t.positional("input", -1);
    t.add("out", &P::out, "output folder for train_*.bin / val_*.bin shards").required();
    t.add("tokenizer", &P::tokenizer, "tokenizer of the shards (gpt2 needs --vocab)")
        .names({{"gpt2", TokenizerKind::gpt2}, {"char", TokenizerKind::character}})
        .init(TokenizerKind::gpt2);
    vocab_flag(t, &P::vocab);
    t.add("shard-tokens", &P::shard_tokens, "tokens per shard").init(100000000).check(positive);
    t.add("val-tokens", &P::val_tokens,
          "tokens for val shards, taken from the end; 0: train only; when not given: about 10% of the corpus (its bytes / 3 "
          "for GPT-2 tokens, / 1 for characters), at most 1048576")
        .check(non_negative);
    t.add("overwrite", &P::overwrite,
          "write into an --out that holds shards of an earlier prepare, deleting its train*/val* .bin files and "
          "tokenizer files (char_vocab.txt, encoder.json, vocab.bpe) first, nothing else")
        .init(false);
    quiet_flag(t, &P::quiet);
    return t;
  }();
  return table;
}

// The files an earlier prepare left in `out`: shards (train*/val* .bin, the names training reads) and
// the character vocabulary. Writing beside them would mix two corpora.
std::vector<std::filesystem::path> earlier_shards(const std::string& out) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  if (!std::filesystem::is_directory(out, ec)) return found;
  for (const auto& entry : std::filesystem::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    const bool shard = entry.path().extension() == ".bin" &&
                       (name.find("train") != std::string::npos || name.find("val") != std::string::npos);
    const bool tokenizer = name == "char_vocab.txt" || name == "encoder.json" || name == "vocab.bpe";
    if (entry.is_regular_file() && (shard || tokenizer)) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string read_file(const std::string& path) {
  std::string text = read_text_file(path, "input file");
  if (text.empty()) throw std::invalid_argument("input file '" + path + "' is empty");
  return text;
}

bool is_json_lines(const std::string& path, const std::string& text) {
  const auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".jsonl" || ext == ".json") return true;
  const auto first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

// Calls on_document for every document of the file.
template <typename F>
void for_each_document(const std::string& path, const std::string& text, F&& on_document) {
  if (!is_json_lines(path, text)) {
    on_document(std::string_view(text));
    return;
  }
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_number;
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw std::invalid_argument("'" + path + "' line " + std::to_string(line_number) + " is not valid JSON");
    }
    if (!record.is_object() || !record.contains("text") || !record["text"].is_string()) {
      throw std::invalid_argument("'" + path + "' line " + std::to_string(line_number) + " has no \"text\" string");
    }
    on_document(record["text"].get_ref<const std::string&>());
  }
}

int run_prepare(const Parsed<PrepareFlags>& flags, const JobSession&) {
  const PrepareFlags& f = flags.config;
  const auto& inputs = f.input;
  const std::string& out_dir = *f.out;
  const auto shard_tokens = static_cast<uint64_t>(f.shard_tokens);
  uint64_t corpus_bytes = 0;
  const TokenizerKind kind = f.tokenizer;

  std::vector<std::string> texts;
  for (const auto& path : inputs) {
    texts.push_back(read_file(path));
    corpus_bytes += texts.back().size();
  }
  // Without --val-tokens a tenth of the corpus validates (nanoGPT's split), estimated from its size so
  // that the corpus can stream through, its last val_tokens held back for the val shards.
  const uint64_t val_tokens =
      f.val_tokens ? static_cast<uint64_t>(*f.val_tokens)
                   : std::min<uint64_t>(1048576, corpus_bytes / (kind == TokenizerKind::gpt2 ? 3 : 1) / 10);
  std::unique_ptr<TextCodec> codec;
  if (kind == TokenizerKind::gpt2) {
    if (!f.vocab) throw std::invalid_argument("--tokenizer gpt2 needs --vocab DIR (encoder.json, vocab.bpe)");
    codec = make_text_codec(TokenizerKind::gpt2, *f.vocab);
  } else {
    std::string all;
    for (const auto& t : texts) all += t;
    codec = make_char_codec_for(all);
  }
  if (codec->vocab_size() > 65536) {
    throw std::invalid_argument("--tokenizer char: the --input files hold " + std::to_string(codec->vocab_size()) +
                                " distinct characters, more than uint16 token shards can number (65536)");
  }

  const auto earlier = earlier_shards(out_dir);
  if (!earlier.empty() && !f.overwrite) {
    throw std::invalid_argument("--out '" + out_dir + "' holds shards of an earlier prepare (" +
                                earlier.front().filename().string() + (earlier.size() > 1 ? " and more" : "") +
                                "): choose another --out, or give --overwrite to delete them");
  }
  // One process writes shards into a folder at a time (common/folder_claim.h); the claim creates it.
  const FolderClaim claim(out_dir, "--out");
  if (!claim.takeover_note().empty()) std::cout << claim.takeover_note() << std::endl;
  for (const auto& path : earlier) std::filesystem::remove(path);
  std::optional<TokenShardWriter> val;
  if (val_tokens > 0) val.emplace(out_dir, "val", shard_tokens);
  TokenShardWriter train(out_dir, "train", shard_tokens);
  uint64_t total = 0, bytes = 0, to_val = 0, to_train = 0;
  Progress progress("prepare", static_cast<double>(corpus_bytes) / 1e6, "MB", f.quiet, std::cout);
  // The newest val_tokens tokens wait here; what falls out of that window is training data.
  std::vector<int32_t> held_back;
  auto write = [&](std::vector<int32_t>& ids) {
    held_back.insert(held_back.end(), ids.begin(), ids.end());
    total += ids.size();
    if (held_back.size() < 2 * val_tokens + (1 << 16)) return;  // flush in large pieces
    const size_t n = held_back.size() - val_tokens;
    train.append(std::span<const int32_t>(held_back.data(), n));
    to_train += n;
    held_back.erase(held_back.begin(), held_back.begin() + static_cast<std::ptrdiff_t>(n));
  };
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      for_each_document(inputs[i], texts[i], [&](std::string_view doc) {
        std::vector<int32_t> ids;
        if (codec->end_of_text() >= 0) ids.push_back(static_cast<int32_t>(codec->end_of_text()));
        for (int64_t id : codec->encode(doc)) ids.push_back(static_cast<int32_t>(id));
        write(ids);
        bytes += doc.size();
        progress.update(static_cast<double>(bytes) / 1e6,
                        strprintf("file %zu/%zu, %llu tokens", i + 1, inputs.size(), static_cast<unsigned long long>(total)));
      });
    }
    progress.finish();
    const size_t n = held_back.size() > val_tokens ? held_back.size() - val_tokens : 0;
    train.append(std::span<const int32_t>(held_back.data(), n));
    to_train += n;
    if (val) val->append(std::span<const int32_t>(held_back.data() + n, held_back.size() - n));
    to_val = held_back.size() - n;
    if (to_train == 0) {
      throw std::invalid_argument("all " + std::to_string(total) + " tokens went to validation: lower --val-tokens");
    }
    if (val) val->finish();
    train.finish();
    // Training on these shards finds the tokenizer here (the ids mean nothing without it), and records it
    // in its checkpoints, so generate, eval and export need no --vocab later.
    if (kind == TokenizerKind::character) {
      write_file_atomically(std::filesystem::path(out_dir) / "char_vocab.txt", codec->data());
    } else if (const auto files = Gpt2BpeTokenizer::find_files(*f.vocab)) {
      const Gpt2TokenizerTexts tokenizer_texts = read_gpt2_tokenizer_texts(*files);
      write_file_atomically(std::filesystem::path(out_dir) / "encoder.json", tokenizer_texts.vocabulary);
      write_file_atomically(std::filesystem::path(out_dir) / "vocab.bpe", tokenizer_texts.merges);
    }
  } catch (...) {
    // A failed run publishes no shards: a training job must not take part of a corpus for all of it.
    std::error_code ignored;
    if (val) {
      for (const auto& path : val->shard_paths()) std::filesystem::remove(path, ignored);
    }
    for (const auto& path : train.shard_paths()) std::filesystem::remove(path, ignored);
    throw;
  }
  std::cout << strprintf("wrote %llu val and %llu train tokens in %zu shard(s) to %s",
                         static_cast<unsigned long long>(to_val), static_cast<unsigned long long>(to_train),
                         (val ? val->shard_paths().size() : 0) + train.shard_paths().size(), out_dir.c_str())
            << std::endl;
  return 0;
}

}  // namespace

Command prepare_command() {
  return make_command<PrepareFlags>("prepare", "prepare --input FILE... --out DIR [options]",
                                    "tokenize text into llm.c .bin shards", /*multi_rank=*/false, &prepare_flag_table,
                                    &run_prepare);
}

}  // namespace mygpt
