#include "common/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <system_error>

#include "common/strprintf.h"

namespace mygpt {
namespace fs = std::filesystem;

namespace {

std::string quoted(std::string_view what, const fs::path& path) {
  return std::string(what) + " '" + path.string() + "'";
}

[[noreturn]] void write_failed(const fs::path& target, const char* action, int error) {
  throw OutputFileError("cannot write " + target.string() + ": " + action + ": " + std::strerror(error));
}

// ".<name>.tmp.<pid>": hidden, so folder listings (shard folders) pass over it.
std::string temporary_name(const std::string& name) {
  std::string temp(".");
  temp += name;
  temp += ".tmp.";
  temp += std::to_string(::getpid());
  return temp;
}

}  // namespace

void require_regular_file(const fs::path& path, std::string_view what) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw std::invalid_argument(quoted(what, path) + " does not exist");
  if (fs::is_directory(status)) throw std::invalid_argument(quoted(what, path) + " is a directory, not a file");
  if (!fs::is_regular_file(status)) {
    throw std::invalid_argument(quoted(what, path) + " is not a regular file (a pipe, socket or device)");
  }
}

std::string read_whole_file(const fs::path& path, std::string_view what, std::size_t max_bytes) {
  require_regular_file(path, what);
  // O_NONBLOCK: should the path be swapped for a FIFO after the check above, open still returns.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw std::invalid_argument("cannot read " + quoted(what, path) + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    throw std::invalid_argument(quoted(what, path) + " is not a regular file");
  }
  if (static_cast<std::size_t>(info.st_size) > max_bytes) {
    throw std::invalid_argument(quoted(what, path) + " is too large (" + std::to_string(info.st_size) + " bytes)");
  }
  std::string bytes(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::invalid_argument("cannot read " + quoted(what, path) + ": " + std::strerror(errno));
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

namespace {

// The bytes at `i` that begin a well-formed UTF-8 character (shortest form, no surrogates, at most
// U+10FFFF): `whole` with its length, or not whole with the length of its maximal subpart (the longest
// start of a well-formed sequence there, at least 1 byte), which Unicode (ch. 3, "U+FFFD Substitution of
// Maximal Subparts"), Python's errors="replace" and so Hugging Face and tiktoken replace by one U+FFFD.
struct Utf8Sequence {
  std::size_t length;
  bool whole;
};

Utf8Sequence utf8_sequence_at(std::string_view text, std::size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return {1, true};
  // Leads C0/C1 only start overlong forms and F5..FF would pass U+10FFFF; E0, ED, F0 and F4 restrict
  // their second byte (overlong forms, surrogates, beyond U+10FFFF).
  const std::size_t extra = lead >= 0xC2 && lead <= 0xDF   ? 1
                            : (lead >> 4) == 0xE           ? 2
                            : lead >= 0xF0 && lead <= 0xF4 ? 3
                                                           : 0;
  if (extra == 0) return {1, false};
  const unsigned char low = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
  const unsigned char high = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
  for (std::size_t k = 1; k <= extra; ++k) {
    if (i + k >= text.size()) return {k, false};  // cut off at the end
    const auto byte = static_cast<unsigned char>(text[i + k]);
    const bool fits = k == 1 ? byte >= low && byte <= high : (byte >> 6) == 0x2;
    if (!fits) return {k, false};
  }
  return {extra + 1, true};
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Sequence sequence = utf8_sequence_at(text, i);
    if (!sequence.whole) return i;
    i += sequence.length;
  }
  return std::nullopt;
}

std::string with_invalid_utf8_replaced(std::string_view bytes) {
  static constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD
  std::string text;
  text.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Sequence sequence = utf8_sequence_at(bytes, i);
    if (sequence.whole) {
      text.append(bytes.substr(i, sequence.length));
    } else {
      text.append(kReplacementCharacter);
    }
    i += sequence.length;
  }
  return text;
}

namespace {

void require_utf8_with_hint(std::string_view text, std::string_view source, std::string_view hint) {
  const auto bad = first_invalid_utf8(text);
  if (!bad) return;
  throw std::invalid_argument(std::string(source) + " is not UTF-8 text: " +
                              strprintf("byte 0x%02X at byte offset %zu", static_cast<unsigned char>(text[*bad]), *bad) +
                              " does not begin a valid UTF-8 character" + std::string(hint));
}

}  // namespace

void require_utf8(std::string_view text, std::string_view source) { require_utf8_with_hint(text, source, ""); }

std::string read_text_file(const fs::path& path, std::string_view what, std::size_t max_bytes) {
  std::string text = read_whole_file(path, what, max_bytes);
  require_utf8_with_hint(text, quoted(what, path), " (convert the file first, e.g. iconv -f latin1 -t utf-8)");
  return text;
}

AtomicFileWriter::AtomicFileWriter(fs::path target) : target_(std::move(target)) {
  const fs::path folder = target_.parent_path().empty() ? fs::path(".") : target_.parent_path();
  temp_ = folder / temporary_name(target_.filename().string());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) write_failed(target_, "cannot create a temporary file", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFileWriter::write(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) write_failed(target_, "write failed", errno);
    bytes += n;
    size -= static_cast<std::size_t>(n);
    written_ += static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::write_at(std::size_t offset, const void* data, std::size_t size) {
  if (offset + size > written_) throw std::logic_error("write_at past the bytes written so far");
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd_, bytes, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) write_failed(target_, "write failed", errno);
    bytes += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  // The data must be on disk before the rename publishes it, or a power cut can leave the new name
  // pointing at an empty file.
  if (::fsync(fd_) != 0) write_failed(target_, "fsync failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) write_failed(target_, "close failed", errno);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) write_failed(target_, "rename failed", errno);
  committed_ = true;
  sync_directory(target_.parent_path().empty() ? fs::path(".") : target_.parent_path());
}

void write_file_atomically(const fs::path& target, std::string_view bytes) {
  AtomicFileWriter writer(target);
  writer.write(bytes);
  writer.commit();
}

bool is_atomic_writer_temporary(const fs::path& path, std::string_view target_prefix) {
  const std::string name = path.filename().string();
  return name.size() > 1 && name[0] == '.' && name.compare(1, target_prefix.size(), target_prefix) == 0 &&
         name.find(".tmp.") != std::string::npos;
}

void sync_directory(const fs::path& directory) {
  const FileDescriptor fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

void create_output_directory(const fs::path& directory, std::string_view what) {
  std::error_code ec;
  const auto status = fs::status(directory, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    throw std::invalid_argument(std::string(what) + " '" + directory.string() + "' exists and is not a directory");
  }
  fs::create_directories(directory, ec);
  if (ec) {
    throw std::invalid_argument(std::string(what) + " '" + directory.string() + "' cannot be created: " + ec.message());
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    throw std::invalid_argument(std::string(what) + " '" + directory.string() +
                                "' is not writable: " + std::strerror(errno));
  }
}

std::optional<uint64_t> free_disk_bytes(const fs::path& path) {
  struct statvfs info {};
  if (::statvfs(path.c_str(), &info) != 0) return std::nullopt;
  return static_cast<uint64_t>(info.f_bavail) * static_cast<uint64_t>(info.f_frsize);
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

void publish_staged_files(const fs::path& staging, const fs::path& target, const std::vector<fs::path>& replaced,
                          std::string_view last) {
  std::vector<fs::path> staged;
  for (const auto& entry : fs::directory_iterator(staging)) {
    const fs::path taken = target / entry.path().filename();
    std::error_code ec;
    if (fs::exists(taken, ec) && !fs::is_regular_file(taken, ec)) {
      throw std::invalid_argument("cannot write " + taken.string() + ": a folder or other non-file has that name");
    }
    staged.push_back(entry.path());
  }
  for (const fs::path& old : replaced) fs::remove(old);
  std::stable_partition(staged.begin(), staged.end(), [&](const fs::path& p) { return p.filename() != last; });
  for (const fs::path& file : staged) fs::rename(file, target / file.filename());
  fs::remove(staging);
  sync_directory(target);
}

void check_standard_output() {
  std::cout.flush();
  if (std::cout.good()) return;
  // The write that failed may be long past (an std::endl's flush), its errno gone with it; the lost text is
  // gone too, so one more byte is written to learn why.
  std::cout.clear();
  std::clearerr(stdout);
  errno = 0;
  const bool failed_again = std::fputc('\n', stdout) == EOF || std::fflush(stdout) != 0;
  const int error = errno;
  throw std::invalid_argument(std::string("cannot write standard output: ") +
                              (failed_again && error != 0 ? std::strerror(error) : "a write failed"));
}

}  // namespace mygpt
