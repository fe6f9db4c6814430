// Writes a token sequence as llm.c `.bin` shards:
// <directory>/<prefix>_000000.bin, <prefix>_000001.bin, ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mygpt {

class TokenShardWriter {
 public:
  // `tokens_per_shard` must be in [1, INT32_MAX] (the header's count is an
  // int32). The directory is created if missing. Bad arguments are
  // std::invalid_argument; I/O failures are std::system_error.
  TokenShardWriter(std::filesystem::path directory, std::string prefix, uint64_t tokens_per_shard);

  // Without finish() the pending partial shard is discarded: a writer torn
  // down by an exception must not publish a shard cut short.
  ~TokenShardWriter();
  TokenShardWriter(TokenShardWriter&&) noexcept;
  TokenShardWriter& operator=(TokenShardWriter&&) noexcept;
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;

  // Appends tokens, completing a shard each time it reaches tokens_per_shard.
  void append(std::span<const uint16_t> tokens);
  // Same, for tokenizer output held as int32. Every token must fit uint16;
  // otherwise nothing is appended and std::invalid_argument is thrown.
  void append(std::span<const int32_t> tokens);

  // Writes the last, partial shard (if any tokens are pending). Appending
  // after finish() is a std::logic_error; finishing twice does nothing.
  void finish();

  // The shards completed so far, in order.
  const std::vector<std::filesystem::path>& shard_paths() const { return shard_paths_; }
  uint64_t tokens_written() const { return tokens_written_; }

 private:
  // The shard being written: a temporary file renamed into place when full.
  class PendingShard;

  void start_shard();
  void complete_shard();

  std::filesystem::path directory_;
  std::string prefix_;
  uint64_t tokens_per_shard_;
  std::unique_ptr<PendingShard> pending_;
  std::vector<std::filesystem::path> shard_paths_;
  uint64_t tokens_written_ = 0;
  bool finished_ = false;
};

}  // namespace mygpt
