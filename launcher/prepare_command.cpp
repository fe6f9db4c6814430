// `mygpt-ddp prepare`: tokenizes text into llm.c .bin shards. Each document (a whole plain-text file,
// one line of a JSON-lines file, one row of a Parquet file) is preceded by <|endoftext|> and encoded as
// ordinary text (a literal <|endoftext|> in it is characters), as llm.c does;
// the last --val-tokens tokens go to val shards, the rest to train shards: validation is the end of a
// text, as for `train` on a text (--val-fraction) and `eval --val` on one. A folder (or glob) of files
// given alone follows nanochat's contract instead: its last file is validation, unless --val-tokens.
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <stdexcept>

#include "common/file_io.h"
#include "common/folder_claim.h"
#include "common/progress.h"
#include "common/strprintf.h"
#include "dataloader/document_inputs.h"
#include "dataloader/document_reader.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "dataloader/parallel_encoder.h"
#include "tokenizer/text_codec.h"
#include "dataloader/token_shard_writer.h"
#include "dataloader/token_stream.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/document_input_flags.h"
#include "launcher/shared_flags.h"

namespace mygpt {
namespace {

struct PrepareFlags {
  std::vector<std::string> input;
  std::string text_column;
  std::optional<std::string> out;
  TokenizerKind tokenizer{};
  std::optional<std::string> vocab;
  int64_t shard_tokens{};
  std::optional<int64_t> val_tokens;
  bool overwrite{};
  bool quiet{};
  int64_t threads{};
};

const OptionTable<PrepareFlags>& prepare_flag_table() {
  static const OptionTable<PrepareFlags> table = [] {
    using P = PrepareFlags;
    OptionTable<P> t;
    t.group("Input and output");
    t.add("input", &P::input,
          "text files (each one document), JSON-lines files (one document per line, member --text-column), Parquet files "
          "(one document per row of --text-column), or a folder (or quoted glob) of .parquet files, sorted by name, "
          "whose last file becomes validation unless --val-tokens is given; also the positional arguments")
        .required();
    t.positional("input", -1);
    text_column_flag(t, &P::text_column);
    t.add("out", &P::out, "output folder for train_*.bin / val_*.bin shards").required();
    t.add("tokenizer", &P::tokenizer,
          "tokenizer of the shards: gpt2 or hf (a tokenizer.json) need --vocab; not given: what --vocab's folder "
          "holds, else gpt2")
        .names({{"gpt2", TokenizerKind::gpt2}, {"hf", TokenizerKind::hf}, {"char", TokenizerKind::character}})
        .init(TokenizerKind::gpt2);
    vocab_flag(t, &P::vocab);
    t.add("shard-tokens", &P::shard_tokens, "tokens per shard").init(100000000).check(positive);
    t.add("val-tokens", &P::val_tokens,
          "tokens for val shards, taken from the end; 0: train only; when not given: about 10% of the corpus (its bytes / 3 "
          "for BPE tokens, / 1 for characters), at most 1048576")
        .check(non_negative);
    t.add("overwrite", &P::overwrite,
          "write into an --out that holds shards of an earlier prepare, replacing its train*/val* .bin files and "
          "tokenizer files (char_vocab.txt, encoder.json, vocab.bpe, tokenizer.json, tokenizer_config.json) once the "
          "new ones are whole (they are written beside them: a failed prepare leaves the old ones), nothing else")
        .init(false);
    t.add("threads", &P::threads,
          "tokenizer threads; 0: one per core. The shards are the same, byte for byte, whatever the number")
        .init(0)
        .check(non_negative)
        .check([](const std::string& flag, const int64_t& threads) {
          require_sane_thread_count(flag, threads, std::thread::hardware_concurrency());
        });
    quiet_flag(t, &P::quiet);
    return t;
  }();
  return table;
}

// The files an earlier prepare left in `out`: shards (train*/val* .bin, the names training reads) and
// the tokenizer's files. Writing beside them would mix two corpora.
std::vector<std::filesystem::path> earlier_shards(const std::string& out) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  if (!std::filesystem::is_directory(out, ec)) return found;
  for (const auto& entry : std::filesystem::directory_iterator(out, ec)) {
    const std::string name = entry.path().filename().string();
    const bool shard = entry.path().extension() == ".bin" &&
                       (name.find("train") != std::string::npos || name.find("val") != std::string::npos);
    if (entry.is_regular_file() && (shard || is_tokenizer_file_name(name))) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// What an input that gave no documents is said to hold (the refusal when the whole input holds nothing).
std::string without_documents(const std::string& path, const DocumentReader& reader) {
  return "'" + path + "' holds no documents" +
         (!reader.parquet()        ? std::string(" (no line with text)")
          : reader.null_rows() > 0 ? " (its " + std::to_string(reader.null_rows()) + " rows are null)"
                                   : std::string(" (a Parquet file of 0 rows)"));
}

// The refusal of an input with no text at all, naming the first file that held no documents.
std::invalid_argument nothing_to_tokenize(const std::string& first_without_documents) {
  return std::invalid_argument("--input: nothing to tokenize: " + (first_without_documents.empty()
                                                                       ? std::string("the documents hold no text")
                                                                       : first_without_documents));
}

// The distinct characters of every document, each once (a first pass of the character tokenizer, which
// must know its vocabulary before it numbers anything).
std::string distinct_characters(const std::vector<std::string>& inputs, const std::string& text_column) {
  std::vector<bool> seen(0x110000, false);
  std::string characters;
  std::string first_without_documents;
  for (const auto& path : inputs) {
    DocumentReader reader(path, {.text_column = text_column});
    bool any_document = false;
    while (const auto piece = reader.next()) {
      any_document = any_document || piece->starts_document;
      const std::string& text = piece->text;
      for (std::size_t i = 0; i < text.size();) {  // whole UTF-8 (DocumentReader checked it)
        const auto lead = static_cast<unsigned char>(text[i]);
        const std::size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
        uint32_t cp = length == 1 ? lead : lead & (0xFF >> (length + 1));
        for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        if (cp < seen.size() && !seen[cp]) {
          seen[cp] = true;
          characters.append(text, i, length);
        }
        i += length;
      }
    }
    if (!any_document && first_without_documents.empty()) first_without_documents = without_documents(path, reader);
  }
  // Said here, before the character tokenizer is asked for a vocabulary of nothing.
  if (characters.empty()) throw nothing_to_tokenize(first_without_documents);
  return characters;
}

int run_prepare(const Parsed<PrepareFlags>& flags, const JobSession&) {
  const PrepareFlags& f = flags.config;
  const DocumentInputs expanded = expand_document_inputs(f.input);
  const auto& inputs = expanded.files;
  const std::string& out_dir = *f.out;
  const auto shard_tokens = static_cast<uint64_t>(f.shard_tokens);
  // Without --tokenizer, --vocab's folder says which BPE it is (a tokenizer.json wins, as in train).
  const TokenizerKind kind = !flags.gave("tokenizer") && f.vocab
                                 ? folder_tokenizer_kind(*f.vocab).value_or(TokenizerKind::gpt2)
                                 : f.tokenizer;
  // Streamed: the files are opened (and checked) now, read piece by piece below.
  uint64_t corpus_bytes = 0;
  for (const auto& path : inputs) {
    corpus_bytes += DocumentReader(path, {.text_column = f.text_column}).size();
  }
  // nanochat's contract for a folder of shards: the last file validates, whole.
  const bool val_file = expanded.folder_contract && !f.val_tokens;
  if (val_file && inputs.size() < 2) {
    throw std::invalid_argument("--input '" + f.input.front() + "' holds one file: its last file would be validation "
                                "and nothing left to train on; add files, or give --val-tokens");
  }
  if (val_file) {
    std::cout << "validation: " << inputs.back() << " (the last of " << inputs.size()
              << " files by name; --val-tokens N takes the last N tokens instead)" << std::endl;
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = f.threads > 0 ? static_cast<int>(f.threads) : static_cast<int>(cores);
  // Without --val-tokens a tenth of the corpus validates (nanoGPT's split), estimated from its size so
  // that the corpus can stream through, its last val_tokens held back for the val shards.
  const uint64_t val_tokens =
      f.val_tokens ? static_cast<uint64_t>(*f.val_tokens)
      : val_file   ? 0
                   : std::min<uint64_t>(1048576, corpus_bytes / (kind == TokenizerKind::character ? 1 : 3) / 10);
  std::unique_ptr<TextCodec> codec;
  std::function<std::unique_ptr<TextCodec>()> make_codec;
  if (kind == TokenizerKind::gpt2 || kind == TokenizerKind::hf) {
    if (!f.vocab) {
      throw std::invalid_argument(kind == TokenizerKind::gpt2
                                      ? "--tokenizer gpt2 needs --vocab DIR (encoder.json, vocab.bpe)"
                                      : "--tokenizer hf needs --vocab DIR (a folder with a tokenizer.json)");
    }
    const std::string vocab = *f.vocab;
    make_codec = [kind, vocab] { return make_text_codec(kind, vocab); };
  } else {
    const std::string characters = distinct_characters(inputs, f.text_column);
    make_codec = [characters] { return make_char_codec_for(characters); };
  }
  codec = make_codec();
  if (codec->vocab_size() > 65536 && kind == TokenizerKind::character) {
    throw std::invalid_argument("--tokenizer char: the --input files hold " + std::to_string(codec->vocab_size()) +
                                " distinct characters, more than uint16 token shards can number (65536)");
  }
  if (codec->vocab_size() > 65536) {
    throw std::invalid_argument("--vocab " + *f.vocab + ": its tokenizer has " + std::to_string(codec->vocab_size()) +
                                " tokens, more than uint16 token shards can number (65536); train on the text "
                                "itself with this --vocab instead");
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
  // Shards and tokenizer are written into a staging folder inside --out (its filesystem: the moves are
  // renames) and move up when all are whole; an earlier prepare's files stay until then. Staging folders
  // left by a prepare that was killed are removed: the claim says none is running.
  const std::filesystem::path out_path(out_dir);
  for (const auto& entry : std::filesystem::directory_iterator(out_path)) {
    if (entry.is_directory() && entry.path().filename().string().rfind(".prepare.", 0) == 0) {
      std::filesystem::remove_all(entry.path());
    }
  }
  const std::filesystem::path staging = out_path / strprintf(".prepare.%d", static_cast<int>(::getpid()));
  create_output_directory(staging, "--out");
  std::optional<TokenShardWriter> val;
  if (val_tokens > 0 || val_file) val.emplace(staging, "val", shard_tokens);
  TokenShardWriter train(staging, "train", shard_tokens);
  uint64_t total = 0, bytes = 0, to_val = 0, to_train = 0, documents = 0, null_rows = 0;
  std::size_t files_with_nulls = 0;
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
    // Batches of about 4 MiB of text go to the threads; at most two per thread wait or are done but not
    // written, so memory stays flat whatever the corpus. Tokens are written in the order of the text.
    ParallelEncoder encoder(make_codec, threads);
    const std::size_t max_pending = 2 * static_cast<std::size_t>(threads);
    std::deque<bool> for_val;  // per batch submitted and not taken: from the validation file
    auto write_oldest = [&] {
      std::vector<int32_t> ids = encoder.take();
      const bool to_val_file = for_val.front();
      for_val.pop_front();
      if (to_val_file) {
        val->append(std::span<const int32_t>(ids.data(), ids.size()));
        total += ids.size();
        to_val += ids.size();
      } else {
        write(ids);
      }
    };
    uint64_t bytes_before = 0;  // of the files already read
    std::string first_without_documents;  // said when the whole input holds nothing
    for (size_t i = 0; i < inputs.size(); ++i) {
      // Pieces are cut only where the tokenizer restarts, so their ids are those of the whole document.
      DocumentReader reader(
          inputs[i],
          {.json_parsing = JsonParsing::by_caller,
           .restarts_at = [&codec](std::string_view text, std::size_t cut) { return codec->restarts_at(text, cut); },
           .text_column = f.text_column});
      const bool is_val_file = val_file && i + 1 == inputs.size();
      const uint64_t documents_before = documents;
      std::vector<TextPiece> batch;
      std::size_t batch_bytes = 0;
      auto submit = [&] {
        if (batch.empty()) return;
        if (encoder.pending() >= max_pending) write_oldest();
        for_val.push_back(is_val_file);
        encoder.submit(std::move(batch));
        batch.clear();
        batch_bytes = 0;
      };
      while (auto piece = reader.next()) {
        documents += piece->starts_document ? 1 : 0;
        batch_bytes += piece->text.size();
        batch.push_back(std::move(*piece));
        if (batch_bytes >= (std::size_t{4} << 20)) submit();
        bytes = bytes_before + reader.bytes_read();
        if (progress.due()) {
          progress.update(static_cast<double>(bytes) / 1e6,
                          strprintf("file %zu/%zu, %llu tokens, %d thread(s)", i + 1, inputs.size(),
                                    static_cast<unsigned long long>(total), threads));
        }
      }
      submit();
      if (documents == documents_before && first_without_documents.empty()) {
        first_without_documents = without_documents(inputs[i], reader);
      }
      bytes_before += reader.size();
      null_rows += reader.null_rows();
      files_with_nulls += reader.null_rows() > 0 ? 1 : 0;
    }
    while (encoder.pending() > 0) write_oldest();
    progress.finish();
    const size_t n = held_back.size() > val_tokens ? held_back.size() - val_tokens : 0;
    train.append(std::span<const int32_t>(held_back.data(), n));
    to_train += n;
    if (val) val->append(std::span<const int32_t>(held_back.data() + n, held_back.size() - n));
    to_val += held_back.size() - n;
    if (null_rows > 0) {
      std::cout << strprintf("note: skipped %llu Parquet row(s) whose '%s' is null, in %zu file(s)",
                             static_cast<unsigned long long>(null_rows), f.text_column.c_str(), files_with_nulls)
                << std::endl;
    }
    if (total == 0) throw nothing_to_tokenize(first_without_documents);
    if (val_file && to_val == 0) {
      throw std::invalid_argument("validation file '" + inputs.back() + "' holds no documents");
    }
    if (to_train == 0) {
      throw std::invalid_argument("all " + std::to_string(total) + " tokens went to validation: lower --val-tokens");
    }
    if (val) val->finish();
    train.finish();
    // Training on these shards finds the tokenizer here (the ids mean nothing without it), and records it
    // in its checkpoints, so generate, eval and export need no --vocab later.
    if (kind == TokenizerKind::character) {
      write_file_atomically(staging / "char_vocab.txt", codec->data());
    } else if (kind == TokenizerKind::hf) {
      // The tokenizer and, where there is one, its config (which names the documents' delimiter).
      for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
        const std::filesystem::path from = std::filesystem::path(*f.vocab) / name;
        std::error_code ec;
        if (std::filesystem::exists(from, ec)) {
          write_file_atomically(staging / name, read_whole_file(from, "tokenizer file"));
        }
      }
    } else if (const auto files = Gpt2BpeTokenizer::find_files(*f.vocab)) {
      const Gpt2TokenizerTexts tokenizer_texts = read_gpt2_tokenizer_texts(*files);
      write_file_atomically(staging / "encoder.json", tokenizer_texts.vocabulary);
      write_file_atomically(staging / "vocab.bpe", tokenizer_texts.merges);
    }
    // Whole: the earlier prepare's files go and the new ones move up.
    publish_staged_files(staging, out_path, earlier);
  } catch (...) {
    // A failed run publishes no shards: a training job must not take part of a corpus for all of it.
    std::error_code ignored;
    std::filesystem::remove_all(staging, ignored);
    throw;
  }
  // Without a delimiter token the documents follow one another with nothing between them. That is what
  // nanoGPT's character-level prepare does (one text) and what transformers' run_clm does (group_texts
  // concatenates whatever the tokenizer gives, and a tokenizer without BOS/EOS gives no delimiter), so it is
  // not refused; but a model trained on it cannot tell where one document ends, so it is said once.
  if (codec->end_of_text() < 0 && documents > 1) {
    const std::string tokenizer =
        kind == TokenizerKind::character
            ? std::string("--tokenizer char has no token")
            : "the tokenizer of --vocab " + *f.vocab +
                  " has no token (no bos_token or eos_token in tokenizer_config.json, no <|endoftext|> or <|bos|>)";
    std::cout << strprintf("note: %s to delimit documents: the %llu documents run together with nothing between them",
                           tokenizer.c_str(), static_cast<unsigned long long>(documents))
              << std::endl;
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
