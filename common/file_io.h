#pragma once
// Reading whole files and writing files that are never seen half-written. Every room uses these, so
// that each input file is checked the same way and each output file is published the same way.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mygpt {

// A failure to write an output file (no space, no permission, read-only): bad input in the sense of
// the exit codes, since the user chose where output goes, so it derives from std::invalid_argument.
class OutputFileError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Owns a POSIX file descriptor (negative: none) and closes it on every exit path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Throws std::invalid_argument "<what> '<path>' does not exist" (or "is a directory", "is not a regular
// file") unless path names a regular file (following links). Checked before opening, because a FIFO
// blocks an open forever and a device such as /dev/zero never ends.
void require_regular_file(const std::filesystem::path& path, std::string_view what);

// The file's bytes. what names the file's role in messages ("data file", "config file", ...).
// Refuses non-regular files (above) and files larger than max_bytes.
std::string read_whole_file(const std::filesystem::path& path, std::string_view what,
                            std::size_t max_bytes = std::size_t{64} << 30);

// Text inputs (training text, prepare inputs, HellaSwag files, prompts) must be UTF-8: GPT-2's BPE would
// encode any bytes, but a file in another encoding (Latin-1, UTF-16) tokenizes into byte soup that trains
// without complaint, and the character tokenizer has no characters for it. The offset of the first byte
// that does not start or continue a well-formed UTF-8 sequence (shortest form, no surrogates, at most
// U+10FFFF), or none.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);
// Text for people from bytes a model produced: GPT-2's tokens are bytes, and a sample may hold a character
// cut by its end or bytes that never form one. Each maximal run of bytes that does not become a whole
// character is one U+FFFD, as Python's decode(errors="replace") makes it (Hugging Face's and tiktoken's
// decode); well-formed text comes back unchanged.
std::string with_invalid_utf8_replaced(std::string_view bytes);
// Throws std::invalid_argument "<source> is not UTF-8 text: byte 0xNN at byte offset K ..." unless text is
// UTF-8; source names the file ("data file 'x.txt'") or the option.
void require_utf8(std::string_view text, std::string_view source);
// read_whole_file, then require_utf8 naming the file.
std::string read_text_file(const std::filesystem::path& path, std::string_view what,
                           std::size_t max_bytes = std::size_t{64} << 30);

// Writes `target` so that no reader, crash or power cut ever sees a partial file under its name: the
// bytes go to a hidden temporary file in the same folder (".<name>.tmp.<pid>"), which commit() flushes
// to disk (fsync), renames over the target and makes durable by syncing the folder, the sequence
// llm.c and Megatron use. Destroyed without commit(), the temporary file is removed. A write that
// fails (a full disk, say) throws OutputFileError naming the target and the system's reason.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, std::size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Overwrites bytes already written (a header whose fields are known only at the end).
  void write_at(std::size_t offset, const void* data, std::size_t size);
  std::size_t bytes_written() const { return written_; }
  void commit();

  const std::filesystem::path& target() const { return target_; }

 private:
  std::filesystem::path target_, temp_;
  int fd_ = -1;
  std::size_t written_ = 0;
  bool committed_ = false;
};

void write_file_atomically(const std::filesystem::path& target, std::string_view bytes);

// The temporary name AtomicFileWriter uses for target's folder and name: ".<name>.tmp.<pid>".
bool is_atomic_writer_temporary(const std::filesystem::path& path, std::string_view target_prefix);

// Syncs a folder so that a rename or unlink inside it survives a power cut (best effort: some file
// systems refuse fsync on folders).
void sync_directory(const std::filesystem::path& directory);

// Creates the folder (and its parents) where output goes; a path that names a file, or a folder that
// cannot be created, is std::invalid_argument naming `what` (for example "--out").
void create_output_directory(const std::filesystem::path& directory, std::string_view what);

// Bytes an unprivileged process may still write on the file system holding `path` (statvfs's f_bavail);
// nullopt where the system does not say.
std::optional<uint64_t> free_disk_bytes(const std::filesystem::path& path);

// Publishes the files staged in `staging` (a folder inside `target`, so on its filesystem): first every
// staged name that `target` holds as a folder or other non-file is refused (std::invalid_argument),
// with nothing removed; then `replaced` are removed in their order, the staged files move up by rename
// (`last`, when staged, moves last: a loader looks for it) and `staging` goes. Renames need no space, so
// a full disk has already failed the staging, with the old files intact.
void publish_staged_files(const std::filesystem::path& staging, const std::filesystem::path& target,
                          const std::vector<std::filesystem::path>& replaced, std::string_view last = {});

// Flushes std::cout; output that could not be written (stdout on a full disk, /dev/full) is
// std::invalid_argument naming standard output and the reason, instead of a run that ends with exit 0
// and lost text.
void check_standard_output();

}  // namespace mygpt
