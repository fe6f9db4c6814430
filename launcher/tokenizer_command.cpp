// `mygpt-ddp tokenizer train`: trains a byte-level BPE on text as `prepare` reads it (text files, JSON lines,
// Parquet files, a folder or glob of Parquet shards: dataloader/document_inputs.h) with rustbpe's merges (tokenizer/bpe_trainer.h) and writes tokenizer.json and tokenizer_config.json, which
// prepare, train, generate, export and Hugging Face's tokenizers read. `mygpt-ddp tokenizer eval`: bytes
// per token of a tokenizer on a text, beside GPT-2's (nanochat's tok_eval).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>

#include "common/file_io.h"
#include "common/progress.h"
#include "common/strprintf.h"
#include "dataloader/document_inputs.h"
#include "dataloader/document_reader.h"
#include "dataloader/token_stream.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/document_input_flags.h"
#include "launcher/shared_flags.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/hf_bpe_tokenizer.h"
#include "tokenizer/line_cuts.h"
#include "tokenizer/text_codec.h"

namespace mygpt {
namespace {

namespace fs = std::filesystem;

struct TokenizerTrainFlags {
  std::vector<std::string> input;
  std::string text_column;
  int64_t vocab_size{};
  std::optional<std::string> out;
  std::string pattern;
  std::vector<std::string> special;
  std::optional<int64_t> max_chars;
  std::optional<int64_t> doc_cap;
  int64_t threads{};
  bool overwrite{};
  bool quiet{};
};

const OptionTable<TokenizerTrainFlags>& train_flag_table() {
  static const OptionTable<TokenizerTrainFlags> table = [] {
    using F = TokenizerTrainFlags;
    OptionTable<F> t;
    t.group("Input and output");
    t.add("input", &F::input,
          "text files (each one document), JSON-lines files (one document per line, field \"text\"), Parquet files "
          "(one document per row of --text-column), or a folder (or quoted glob) of .parquet files, sorted by name, "
          "whose last file is left out (prepare's validation file, as nanochat's tok_train leaves it); also the "
          "positional arguments")
        .required();
    t.positional("input", -1);
    text_column_flag(t, &F::text_column);
    t.add("out", &F::out, "output folder for tokenizer.json and tokenizer_config.json").required();
    t.add("overwrite", &F::overwrite, "replace the tokenizer files --out holds (once the new ones are whole)")
        .init(false);
    t.group("Tokenizer");
    t.add("vocab-size", &F::vocab_size, "tokens in all: 256 bytes, the merges and the special tokens (nanochat: 32768)")
        .required()
        .check(positive);
    t.add("pattern", &F::pattern,
          "split pattern: gpt4 (GPT-4's, rustbpe's default), gpt2, nanochat (GPT-4's with \\p{N}{1,2}), or a regular "
          "expression (Oniguruma / Python regex syntax)")
        .init("gpt4");
    t.add("special", &F::special,
          "special tokens after the vocabulary, in order (repeatable); nanochat: its nine chat tokens "
          "(<|bos|> ... <|output_end|>); the first is each document's delimiter (bos_token)")
        .init(std::vector<std::string>{"<|endoftext|>"});
    t.add("max-chars", &F::max_chars,
          "characters to train on: documents are taken until this many have passed (the last one whole); "
          "not given: all (nanochat: 2000000000)")
        .check(positive);
    t.add("doc-cap", &F::doc_cap,
          "characters kept of each document (its start); not given: all (nanochat: 10000)")
        .check(positive);
    t.add("threads", &F::threads, "threads that split and count the text; 0: one per core. The merges are the same")
        .init(0)
        .check(non_negative)
        .check([](const std::string& flag, const int64_t& threads) {
          require_sane_thread_count(flag, threads, std::thread::hardware_concurrency());
        });
    quiet_flag(t, &F::quiet);
    return t;
  }();
  return table;
}

// The tokenizer files a folder holds (tokenizer.json, GPT-2's files, ...): training over them would leave a
// folder whose files disagree.
std::vector<fs::path> tokenizer_files_in(const fs::path& out) {
  std::vector<fs::path> found;
  std::error_code ec;
  if (!fs::is_directory(out, ec)) return found;
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    if (entry.is_regular_file() && is_tokenizer_file_name(entry.path().filename().string())) {
      found.push_back(entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

int run_tokenizer_train(const Parsed<TokenizerTrainFlags>& flags, const JobSession&) {
  const TokenizerTrainFlags& f = flags.config;
  const fs::path out(*f.out);
  BpeTrainingOptions options;
  const std::optional<std::string> named = named_split_pattern(f.pattern);
  options.split_regex = named.value_or(f.pattern);
  for (const std::string& token : f.special) {
    if (token == "nanochat") {
      const auto& chat = nanochat_special_tokens();
      options.special_tokens.insert(options.special_tokens.end(), chat.begin(), chat.end());
    } else {
      options.special_tokens.push_back(token);
    }
  }
  options.vocab_size = static_cast<std::size_t>(f.vocab_size);
  if (f.max_chars) options.max_chars = static_cast<uint64_t>(*f.max_chars);
  if (f.doc_cap) options.doc_cap = static_cast<uint64_t>(*f.doc_cap);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  options.threads = f.threads > 0 ? static_cast<int>(f.threads) : static_cast<int>(cores);

  const auto earlier = tokenizer_files_in(out);
  if (!earlier.empty() && !f.overwrite) {
    throw std::invalid_argument("--out '" + out.string() + "' holds a tokenizer (" +
                                earlier.front().filename().string() +
                                "): choose another --out, or give --overwrite to replace it");
  }
  const DocumentInputs expanded = expand_document_inputs(f.input);
  std::vector<std::string> inputs = expanded.files;
  if (expanded.folder_contract && inputs.size() > 1) {
    std::cout << "left out: " << inputs.back() << " (the last of " << inputs.size()
              << " files by name: prepare's validation file, as nanochat's tok_train leaves it out)" << std::endl;
    inputs.pop_back();
  }
  uint64_t corpus_bytes = 0;
  for (const auto& path : inputs) {
    corpus_bytes += DocumentReader(path, {.text_column = f.text_column}).size();  // each one checked now
  }
  BpeTrainer trainer(options);  // refuses the vocabulary size, the special tokens and the pattern
  const auto start = std::chrono::steady_clock::now();

  // A text file is read in pieces cut where the pattern provably ends a chunk (tokenizer/line_cuts.h: the
  // built-in patterns, at line ends between visible characters); under any other pattern its documents go
  // in whole.
  const std::optional<CrlfCut> proven = proven_line_pattern(options.split_regex);
  const bool whole_documents = !proven.has_value();
  const CutRule restarts_at = [crlf = proven.value_or(CrlfCut::after_cr)](std::string_view text, std::size_t cut) {
    return pattern_restarts_at(crlf, text, cut);
  };
  Progress reading("tokenizer train: counting", static_cast<double>(corpus_bytes) / 1e6, "MB", f.quiet, std::cout);
  uint64_t bytes_before = 0;
  bool more = true;
  for (std::size_t i = 0; i < inputs.size() && more; ++i) {
    DocumentReader reader(inputs[i], {.restarts_at = restarts_at, .text_column = f.text_column});
    std::string document;
    bool have_document = false;
    while (more) {
      auto piece = reader.next();
      if (whole_documents) {
        if (have_document && (!piece || piece->starts_document)) {
          more = trainer.add(document, true);
          document.clear();
          have_document = false;
        }
        if (!piece || !more) break;
        document += piece->text;
        have_document = true;
      } else {
        if (!piece) break;
        more = trainer.add(piece->text, piece->starts_document);
      }
      if (reading.due()) {
        reading.update(static_cast<double>(bytes_before + reader.bytes_read()) / 1e6,
                       strprintf("file %zu/%zu, %llu characters", i + 1, inputs.size(),
                                 static_cast<unsigned long long>(trainer.characters())));
      }
    }
    bytes_before += reader.size();
  }
  reading.finish();
  std::optional<Progress> merging;
  const TrainedBpe trained = trainer.finish([&](std::size_t done, std::size_t total) {
    if (!merging) merging.emplace("tokenizer train: merging", static_cast<double>(total), "merges", f.quiet, std::cout);
    if (merging->due()) merging->update(static_cast<double>(done));
  });
  if (merging) merging->finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Both files whole or neither: staged inside --out, read back by the loader every command uses, then
  // moved up (an earlier tokenizer's files go only then).
  create_output_directory(out, "--out");
  const fs::path staging = out / strprintf(".tokenizer.%d", static_cast<int>(::getpid()));
  create_output_directory(staging, "--out");
  try {
    write_file_atomically(staging / "tokenizer.json", trained.tokenizer_json());
    write_file_atomically(staging / "tokenizer_config.json", trained.tokenizer_config_json());
    const HfBpeTokenizer check = HfBpeTokenizer::load(staging / "tokenizer.json");
    if (check.vocab_size() != trained.token_bytes.size() + trained.special_tokens.size()) {
      throw std::runtime_error("the tokenizer.json written does not read back whole");
    }
    publish_staged_files(staging, out, earlier, "tokenizer.json");
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
  const std::size_t vocab = trained.token_bytes.size() + trained.special_tokens.size();
  if (trained.token_bytes.size() + trained.special_tokens.size() < options.vocab_size) {
    std::cout << strprintf("note: the text has no pair left to merge after %zu merges: the vocabulary has %zu "
                           "tokens, not %zu",
                           trained.merges.size(), vocab, options.vocab_size)
              << std::endl;
  }
  std::cout << strprintf("trained %zu merges on %llu characters (%llu documents, %llu distinct chunks) in %.1f s; "
                         "wrote %s and %s (%zu tokens)",
                         trained.merges.size(), static_cast<unsigned long long>(trained.characters),
                         static_cast<unsigned long long>(trained.documents),
                         static_cast<unsigned long long>(trained.distinct_chunks), seconds,
                         (out / "tokenizer.json").c_str(), (out / "tokenizer_config.json").c_str(), vocab)
            << std::endl;
  return 0;
}

struct TokenizerEvalFlags {
  std::optional<std::string> vocab;
  std::vector<std::string> input;
  std::optional<std::string> gpt2_vocab;
};

const OptionTable<TokenizerEvalFlags>& tokenizer_eval_flag_table() {
  static const OptionTable<TokenizerEvalFlags> table = [] {
    using F = TokenizerEvalFlags;
    OptionTable<F> t;
    vocab_flag(t, &F::vocab).required();
    t.add("input", &F::input, "text files or JSON-lines files to encode; also the positional arguments").required();
    t.positional("input", -1);
    t.add("gpt2-vocab", &F::gpt2_vocab,
          "folder with GPT-2's tokenizer (encoder.json and vocab.bpe, or a tokenizer.json) to compare with");
    return t;
  }();
  return table;
}

struct Compression {
  uint64_t bytes = 0, tokens = 0;
};

Compression measure(const TextCodec& codec, const std::vector<std::string>& inputs) {
  Compression c;
  for (const auto& path : inputs) {
    // Cut where this tokenizer restarts, so that the count is the whole documents'.
    DocumentReader reader(path, {.restarts_at = [&codec](std::string_view text, std::size_t cut) {
                                   return codec.restarts_at(text, cut);
                                 }});
    while (const auto piece = reader.next()) {
      c.bytes += piece->text.size();
      c.tokens += codec.encode_ordinary(piece->text).size();
    }
  }
  return c;
}

std::unique_ptr<TextCodec> codec_of_folder(const std::string& dir, const std::string& flag) {
  const auto kind = folder_tokenizer_kind(dir);
  if (!kind) {
    throw std::invalid_argument(flag + " '" + dir + "' holds no tokenizer (tokenizer.json, or encoder.json and vocab.bpe)");
  }
  return make_text_codec(*kind, dir);
}

int run_tokenizer_eval(const Parsed<TokenizerEvalFlags>& flags, const JobSession&) {
  const TokenizerEvalFlags& f = flags.config;
  const auto ours = codec_of_folder(*f.vocab, "--vocab");
  const std::optional<std::string>& gpt2_dir = f.gpt2_vocab;
  const auto gpt2 = gpt2_dir ? codec_of_folder(*gpt2_dir, "--gpt2-vocab") : nullptr;
  const Compression mine = measure(*ours, f.input);
  if (mine.bytes == 0) throw std::invalid_argument("--input: no text to encode (the documents are empty)");
  std::cout << strprintf("%-10s %10s %14s %14s %12s\n", "tokenizer", "vocab", "bytes", "tokens", "bytes/token");
  const auto row = [](const char* name, int64_t vocab, const Compression& c) {
    std::cout << strprintf("%-10s %10lld %14llu %14llu %12.3f\n", name, static_cast<long long>(vocab),
                           static_cast<unsigned long long>(c.bytes), static_cast<unsigned long long>(c.tokens),
                           static_cast<double>(c.bytes) / static_cast<double>(std::max<uint64_t>(1, c.tokens)));
  };
  const Compression theirs = gpt2 ? measure(*gpt2, f.input) : Compression{};
  if (gpt2) row("gpt2", gpt2->vocab_size(), theirs);
  row("ours", ours->vocab_size(), mine);
  if (gpt2) {
    // nanochat's tok_eval: how many fewer tokens ours needs than GPT-2's, in percent of GPT-2's.
    const double fewer = 100.0 * (static_cast<double>(theirs.tokens) - static_cast<double>(mine.tokens)) /
                         static_cast<double>(std::max<uint64_t>(1, theirs.tokens));
    std::cout << strprintf("ours: %.1f%% fewer tokens than gpt2's", fewer) << std::endl;
  } else {
    std::cout << "gpt2: give --gpt2-vocab DIR (GPT-2's encoder.json and vocab.bpe) to compare" << std::endl;
  }
  return 0;
}

}  // namespace

Command tokenizer_train_command() {
  return make_command<TokenizerTrainFlags>(
      "tokenizer train", "tokenizer train --input FILE... --vocab-size N --out DIR [options]",
      "train a byte-level BPE tokenizer (rustbpe's merges) into tokenizer.json", /*multi_rank=*/false,
      &train_flag_table, &run_tokenizer_train);
}

Command tokenizer_eval_command() {
  return make_command<TokenizerEvalFlags>("tokenizer eval", "tokenizer eval --vocab DIR --input FILE... [options]",
                                          "bytes per token of a tokenizer on a text, beside GPT-2's",
                                          /*multi_rank=*/false, &tokenizer_eval_flag_table, &run_tokenizer_eval);
}

}  // namespace mygpt
