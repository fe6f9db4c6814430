#include "dataloader/token_shard_writer.h"

#include "common/file_io.h"
#include "dataloader/token_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <limits>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace mygpt {

static_assert(std::endian::native == std::endian::little,
              "llm.c shards are little-endian and are written without byte swapping");

namespace {

// Tokens are gathered into writes of this many, so appending one token at a
// time does not cost one system call per token.
constexpr std::size_t kBufferTokens = std::size_t{1} << 19;

}  // namespace

// Tokens go to a hidden temporary file in the target directory (common/file_io.h: so directory
// listings skip it and the final rename is atomic); only commit() gives the shard its final name.
// Destroyed uncommitted, the temporary file is removed.
class TokenShardWriter::PendingShard {
 public:
  explicit PendingShard(std::filesystem::path final_path) : final_path_(std::move(final_path)), file_(final_path_) {
    // The header is written last, once the count is known; zeros hold its place.
    const std::array<int32_t, kLlmcHeaderInts> placeholder{};
    file_.write(placeholder.data(), sizeof(placeholder));
    buffer_.reserve(kBufferTokens);
  }

  uint64_t token_count() const { return token_count_; }
  const std::filesystem::path& final_path() const { return final_path_; }

  void append(std::span<const uint16_t> tokens) {
    while (!tokens.empty()) {
      const std::size_t take = std::min(tokens.size(), kBufferTokens - buffer_.size());
      buffer_.insert(buffer_.end(), tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(take));
      tokens = tokens.subspan(take);
      token_count_ += take;
      if (buffer_.size() == kBufferTokens) flush();
    }
  }

  void commit() {
    flush();
    // A shard is only ever renamed into place with a header that matches its size.
    std::array<int32_t, kLlmcHeaderInts> header{};
    header[0] = kLlmcMagic;
    header[1] = kLlmcVersion;
    header[2] = static_cast<int32_t>(token_count_);
    file_.write_at(0, header.data(), sizeof(header));
    file_.commit();
  }

 private:
  void flush() {
    file_.write(buffer_.data(), buffer_.size() * sizeof(uint16_t));
    buffer_.clear();
  }

  std::filesystem::path final_path_;
  AtomicFileWriter file_;
  std::vector<uint16_t> buffer_;
  uint64_t token_count_ = 0;  // appended, buffered or not
};

TokenShardWriter::TokenShardWriter(std::filesystem::path directory, std::string prefix, uint64_t tokens_per_shard)
    : directory_(std::move(directory)), prefix_(std::move(prefix)), tokens_per_shard_(tokens_per_shard) {
  const std::string name = "token shard writer '" + (directory_ / prefix_).string() + "'";
  if (prefix_.empty() || prefix_.find('/') != std::string::npos) {
    throw std::invalid_argument(name + ": prefix must be a non-empty file name part without '/'");
  }
  if (tokens_per_shard_ == 0 || tokens_per_shard_ > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    throw std::invalid_argument(name + ": tokens per shard must be in [1, 2147483647], got " +
                                std::to_string(tokens_per_shard_));
  }
  create_output_directory(directory_, "shard folder");
}

TokenShardWriter::~TokenShardWriter() = default;
TokenShardWriter::TokenShardWriter(TokenShardWriter&&) noexcept = default;
TokenShardWriter& TokenShardWriter::operator=(TokenShardWriter&&) noexcept = default;

void TokenShardWriter::append(std::span<const uint16_t> tokens) {
  if (finished_) {
    throw std::logic_error("token shard writer '" + (directory_ / prefix_).string() +
                           "': append after finish() or after a failed write");
  }
  while (!tokens.empty()) {
    if (!pending_) start_shard();
    const uint64_t room = tokens_per_shard_ - pending_->token_count();
    const auto take = static_cast<std::size_t>(std::min<uint64_t>(room, tokens.size()));
    pending_->append(tokens.first(take));
    tokens = tokens.subspan(take);
    if (pending_->token_count() == tokens_per_shard_) complete_shard();
  }
}

void TokenShardWriter::append(std::span<const int32_t> tokens) {
  constexpr int32_t kLargest = std::numeric_limits<uint16_t>::max();
  // Checked up front so that a bad token leaves the writer unchanged.
  const auto bad = std::find_if(tokens.begin(), tokens.end(), [](int32_t t) { return t < 0 || t > kLargest; });
  if (bad != tokens.end()) {
    throw std::invalid_argument("token shard writer '" + (directory_ / prefix_).string() + "': token " +
                                std::to_string(*bad) + " at input index " + std::to_string(bad - tokens.begin()) +
                                " does not fit uint16");
  }
  std::array<uint16_t, 4096> narrowed{};
  while (!tokens.empty()) {
    const std::size_t take = std::min(tokens.size(), narrowed.size());
    std::transform(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(take), narrowed.begin(),
                   [](int32_t t) { return static_cast<uint16_t>(t); });
    append(std::span<const uint16_t>(narrowed.data(), take));
    tokens = tokens.subspan(take);
  }
}

void TokenShardWriter::finish() {
  if (finished_) return;
  if (pending_ && pending_->token_count() > 0) complete_shard();
  pending_.reset();
  finished_ = true;
}

void TokenShardWriter::start_shard() {
  std::string name = std::to_string(shard_paths_.size());
  name = prefix_ + "_" + std::string(name.size() < 6 ? 6 - name.size() : 0, '0') + name + ".bin";
  pending_ = std::make_unique<PendingShard>(directory_ / name);
}

void TokenShardWriter::complete_shard() {
  // Taken out first: if the commit fails, the temporary file is removed and
  // the writer refuses further appends instead of renumbering shards.
  const std::unique_ptr<PendingShard> shard = std::move(pending_);
  try {
    shard->commit();
  } catch (...) {
    finished_ = true;
    throw;
  }
  shard_paths_.push_back(shard->final_path());
  tokens_written_ += shard->token_count();
}

}  // namespace mygpt
