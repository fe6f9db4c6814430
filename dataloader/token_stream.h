// Several token files read as one stream of tokens, in sorted path order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dataloader/token_file.h"
#include "dataloader/token_source.h"

namespace mygpt {

// Turns a data spec into the token files it names, sorted by path (byte
// order, independent of the locale, so every rank sees the same order):
//   - an existing regular file: that file alone (`split` is not applied);
//   - a directory: its regular files, not recursing, skipping dot-files
//     (such as a shard writer's temporary files);
//   - otherwise a glob(3) pattern, keeping only regular files.
// For directories and globs a non-empty `split` keeps only file names that
// contain it ("train", "val"). No file found is std::invalid_argument
// naming the spec.
std::vector<std::filesystem::path> expand_token_paths(const std::string& spec, std::string_view split = "");

// The tokenizer files `prepare` writes beside its shards (char_vocab.txt; GPT-2's encoder.json and
// vocab.bpe; a Hugging Face tokenizer.json and tokenizer_config.json): never token data.
bool is_tokenizer_file_name(std::string_view name);

class TokenStream final : public TokenSource {
 public:
  // Opens and validates every file (see TokenFile); the files are sorted by
  // path. An empty list or a path given twice is std::invalid_argument.
  TokenStream(std::vector<std::filesystem::path> paths, uint32_t vocab_size);

  // The files named by `spec` (see expand_token_paths).
  static TokenStream from_spec(const std::string& spec, uint32_t vocab_size, std::string_view split = "");

  // Total tokens over all files; always positive.
  uint64_t size() const override { return total_tokens_; }
  std::size_t file_count() const { return files_.size(); }
  const TokenFile& file(std::size_t index) const { return files_.at(index); }
  // Stream offset of the first token of file `index`.
  uint64_t file_start(std::size_t index) const { return file_starts_.at(index); }

  // Copies `count` tokens starting at `offset` (taken modulo size()) into
  // `out`, widened to int64. Reads cross file boundaries, and a read that
  // passes the end continues at token 0: that is how a loader walks epochs.
  void read(uint64_t offset, std::size_t count, int64_t* out) const override;

 private:
  std::vector<TokenFile> files_;
  std::vector<uint64_t> file_starts_;
  uint64_t total_tokens_ = 0;
};

}  // namespace mygpt
