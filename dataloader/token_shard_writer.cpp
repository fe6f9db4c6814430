#include "dataloader/token_shard_writer.h"

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

[[noreturn]] void throw_io_error(const std::filesystem::path& path, const std::string& action) {
  throw std::system_error(errno, std::generic_category(), "token shard '" + path.string() + "': " + action);
}

void write_all(int fd, const void* data, std::size_t size, off_t offset, const std::filesystem::path& path) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::pwrite(fd, bytes, size, offset);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_io_error(path, "write failed");
    }
    bytes += written;
    size -= static_cast<std::size_t>(written);
    offset += written;
  }
}

// Makes a completed rename survive a crash. Best effort: some file systems
// refuse fsync on a directory, and the shard itself is already complete.
void sync_directory(const std::filesystem::path& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

// Tokens go to a hidden temporary file in the target directory (so the final
// rename is atomic on the same file system and directory listings skip it);
// only commit() gives the shard its final name. Destroyed uncommitted, the
// temporary file is removed.
class TokenShardWriter::PendingShard {
 public:
  explicit PendingShard(std::filesystem::path final_path)
      : final_path_(std::move(final_path)),
        temp_path_(final_path_.parent_path() /
                   ("." + final_path_.filename().string() + ".tmp." + std::to_string(::getpid()))) {
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) throw_io_error(temp_path_, "cannot create");
    buffer_.reserve(kBufferTokens);
  }

  ~PendingShard() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_path_.c_str());
  }

  PendingShard(const PendingShard&) = delete;
  PendingShard& operator=(const PendingShard&) = delete;

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
    // The header goes last, once the count is known: a shard is only ever
    // renamed into place with a header that matches its size.
    std::array<int32_t, kLlmcHeaderInts> header{};
    header[0] = kLlmcMagic;
    header[1] = kLlmcVersion;
    header[2] = static_cast<int32_t>(token_count_);
    write_all(fd_, header.data(), sizeof(header), 0, temp_path_);
    if (::fsync(fd_) != 0) throw_io_error(temp_path_, "fsync failed");
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) throw_io_error(temp_path_, "close failed");
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
      throw_io_error(final_path_, "cannot rename from '" + temp_path_.filename().string() + "'");
    }
    committed_ = true;
    sync_directory(final_path_.parent_path());
  }

 private:
  void flush() {
    const auto offset = static_cast<off_t>(sizeof(int32_t) * kLlmcHeaderInts + 2 * written_tokens_);
    write_all(fd_, buffer_.data(), buffer_.size() * sizeof(uint16_t), offset, temp_path_);
    written_tokens_ += buffer_.size();
    buffer_.clear();
  }

  std::filesystem::path final_path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
  std::vector<uint16_t> buffer_;
  uint64_t token_count_ = 0;     // appended, buffered or not
  uint64_t written_tokens_ = 0;  // already in the file
  bool committed_ = false;
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
  std::filesystem::create_directories(directory_);
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
