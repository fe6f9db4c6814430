#include "dataloader/token_file.h"

#include "common/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace mygpt {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian and are mapped without byte swapping");

namespace {

// llm.c's LLaMA-3 shards hold uint32 tokens; recognised only to refuse them clearly.
constexpr int32_t kLlmcLlama3Magic = 20240801;
constexpr std::size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);
constexpr std::string_view kNpyMagic{"\x93NUMPY", 6};

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw std::invalid_argument("token file '" + path.string() + "': " + problem);
}

// Owns a POSIX file descriptor; closes it on every exit path.
// Headers are read with memcpy: their fields need not be aligned in the map.
template <typename T>
T read_le(std::span<const std::byte> bytes, std::size_t byte_offset) {
  T value;
  std::memcpy(&value, bytes.data() + byte_offset, sizeof(T));
  return value;
}

bool starts_with(std::span<const std::byte> bytes, std::string_view prefix) {
  return bytes.size() >= prefix.size() && std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

// Where the tokens lie in the file, once the header is understood.
struct TokenLayout {
  TokenFileFormat format;
  std::size_t data_offset;
  uint64_t count;
};

// A header quoted in an error message must stay on one line and short.
std::string printable_excerpt(std::string_view text) {
  constexpr std::size_t kMaxChars = 120;
  std::string excerpt;
  for (char c : text.substr(0, kMaxChars)) {
    excerpt += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  while (!excerpt.empty() && excerpt.back() == ' ') excerpt.pop_back();
  if (text.size() > kMaxChars) excerpt += "...";
  return excerpt;
}

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
};

// The npy header is a Python dict literal, e.g.
//   {'descr': '<u2', 'fortran_order': False, 'shape': (1000,), }
// Only the grammar numpy writes is accepted: string keys, a string, a bool and
// a tuple of non-negative integers.
class NpyHeaderParser {
 public:
  NpyHeaderParser(const std::filesystem::path& path, std::string_view text) : path_(path), text_(text) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (consume('}')) break;
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        header.descr = parse_string();
        seen_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = parse_bool();
        seen_order = true;
      } else if (key == "shape") {
        header.shape = parse_shape();
        seen_shape = true;
      } else {
        error("unexpected key '" + key + "'");
      }
      skip_space();
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) error("text after the dict");
    if (!seen_descr || !seen_order || !seen_shape) {
      error("needs keys 'descr', 'fortran_order' and 'shape'");
    }
    return header;
  }

 private:
  [[noreturn]] void error(const std::string& problem) const {
    fail(path_, "bad npy header (" + problem + "): " + printable_excerpt(text_));
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c)) error(std::string("expected '") + c + "'");
  }

  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      error("expected a quoted string");
    }
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) error("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }

  bool parse_bool() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string_view w(word);
      if (text_.substr(pos_, w.size()) == w) {
        pos_ += w.size();
        return value;
      }
    }
    error("expected True or False");
  }

  uint64_t parse_uint() {
    skip_space();
    const std::size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) error("dimension too large");
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) error("expected a non-negative integer");
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 numpy wrote 1000L
    return value;
  }

  std::vector<uint64_t> parse_shape() {
    std::vector<uint64_t> shape;
    expect('(');
    while (!consume(')')) {
      shape.push_back(parse_uint());
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  const std::filesystem::path& path_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

TokenLayout parse_npy(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  if (bytes.size() < 10) fail(path, "npy preamble truncated (" + std::to_string(bytes.size()) + " bytes)");
  const auto major = static_cast<unsigned>(bytes[6]);
  const auto minor = static_cast<unsigned>(bytes[7]);
  std::size_t header_start = 0;
  std::size_t header_length = 0;
  if (major == 1 && minor == 0) {
    header_start = 10;
    header_length = read_le<uint16_t>(bytes, 8);
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (bytes.size() < 12) fail(path, "npy preamble truncated (" + std::to_string(bytes.size()) + " bytes)");
    header_start = 12;
    header_length = read_le<uint32_t>(bytes, 8);
  } else {
    fail(path, "unsupported npy version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (expected 1.0, 2.0 or 3.0)");
  }
  if (header_length > bytes.size() - header_start) {
    fail(path, "npy header truncated: needs " + std::to_string(header_start + header_length) + " bytes, file has " +
                   std::to_string(bytes.size()));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + header_start, header_length);
  const NpyHeader header = NpyHeaderParser(path, text).parse();

  if (header.descr != "<u2") {
    fail(path, "npy dtype '" + header.descr + "' is not little-endian uint16 ('<u2')");
  }
  // fortran_order is not checked: a 1-D array has the same layout either way.
  if (header.shape.size() != 1) fail(path, "npy shape " + shape_text(header.shape) + " is not 1-D");
  const std::size_t data_offset = header_start + header_length;
  // The tokens are read in place as uint16, so they must be 2-byte aligned;
  // numpy pads its headers to a multiple of 64 bytes.
  if (data_offset % 2 != 0) fail(path, "npy data offset " + std::to_string(data_offset) + " is odd");
  const uint64_t count = header.shape[0];
  const uint64_t data_bytes = bytes.size() - data_offset;
  if (count > data_bytes / 2 || data_bytes != 2 * count) {
    fail(path, "size mismatch: npy shape " + shape_text(header.shape) + " needs " + std::to_string(data_offset) +
                   " + 2*" + std::to_string(count) + " bytes, file has " + std::to_string(bytes.size()));
  }
  return {TokenFileFormat::npy, data_offset, count};
}

TokenLayout parse_llmc(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  if (bytes.size() < kLlmcHeaderBytes) {
    fail(path, "llm.c header truncated: file has " + std::to_string(bytes.size()) + " bytes, header needs " +
                   std::to_string(kLlmcHeaderBytes));
  }
  const int32_t version = read_le<int32_t>(bytes, 4);
  if (version != kLlmcVersion) {
    fail(path, "unsupported llm.c version " + std::to_string(version) + " (expected " + std::to_string(kLlmcVersion) +
                   ", uint16 GPT-2 tokens)");
  }
  const int32_t count = read_le<int32_t>(bytes, 8);
  if (count < 0) fail(path, "negative llm.c token count " + std::to_string(count));
  const uint64_t expected = kLlmcHeaderBytes + 2 * static_cast<uint64_t>(count);
  if (bytes.size() != expected) {
    fail(path, std::string(bytes.size() < expected ? "truncated" : "size mismatch") + ": header says " +
                   std::to_string(count) + " tokens (" + std::to_string(expected) + " bytes), file has " +
                   std::to_string(bytes.size()) + " bytes");
  }
  return {TokenFileFormat::llmc_bin, kLlmcHeaderBytes, static_cast<uint64_t>(count)};
}

// How much of a headerless .bin is looked at to tell text from tokens: enough for any real token file to
// show its small ids, little enough to read in microseconds.
constexpr std::size_t kTextSampleBytes = 64 * 1024;

// Whether `sample` is printable UTF-8: well-formed sequences (the last may be cut by the sample's end) and no
// control byte but tab, line feed, form feed and carriage return. Raw uint16 tokens of real text never pass:
// every token below 8192 (the frequent ones: GPT-2's punctuation, spaces, short words; every id of a
// character vocabulary) has a high byte below 0x20, a NUL or control byte. So a real token file is never
// refused, and a text file of more than a few characters is never read as tokens.
bool is_printable_text(std::span<const std::byte> sample) {
  std::size_t i = 0;
  while (i < sample.size()) {
    const auto lead = static_cast<unsigned char>(sample[i]);
    if (lead < 0x80) {
      if (lead < 0x20 && lead != '\t' && lead != '\n' && lead != '\f' && lead != '\r') return false;
      if (lead == 0x7f) return false;
      ++i;
      continue;
    }
    std::size_t length = 0;
    if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
    } else {
      return false;  // a continuation byte without its lead, or a lead UTF-8 never uses
    }
    for (std::size_t k = 1; k < length; ++k) {
      if (i + k == sample.size()) return true;  // cut by the sample's end: what was seen is text
      if ((static_cast<unsigned char>(sample[i + k]) & 0xc0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

TokenLayout parse_layout(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  if (bytes.empty()) fail(path, "file is empty");
  if (starts_with(bytes, kNpyMagic)) return parse_npy(path, bytes);
  // A `.npy` name without the magic is a broken npy file, not raw tokens.
  if (path.extension() == ".npy") fail(path, "bad npy magic (expected \\x93NUMPY)");
  // As raw uint16 the llm.c magic would be the tokens 53960, 308: 53960 is
  // outside GPT-2's vocabulary, so a raw GPT-2 file cannot be mistaken for it.
  if (bytes.size() >= 4 && read_le<int32_t>(bytes, 0) == kLlmcMagic) return parse_llmc(path, bytes);
  if (bytes.size() >= 4 && read_le<int32_t>(bytes, 0) == kLlmcLlama3Magic) {
    fail(path, "llm.c LLaMA-3 shard (magic 20240801, uint32 tokens) is not supported");
  }
  if (path.extension() != ".bin") {
    fail(path, "not a token file: no llm.c or npy header, and raw uint16 tokens are read only from a .bin file");
  }
  if (is_printable_text(bytes.first(std::min(bytes.size(), kTextSampleBytes)))) {
    fail(path, "its bytes are printable UTF-8 text, not raw uint16 tokens (a text file named .bin? give text as "
               "a .txt file, or tokenize it with `prepare`)");
  }
  if (bytes.size() % 2 != 0) {
    fail(path, "odd size " + std::to_string(bytes.size()) + " bytes: not a raw uint16 token file");
  }
  // An llm.c header whose magic alone is damaged (version 1, a count matching the size) would
  // otherwise train silently on its header ints as tokens.
  if (bytes.size() >= kLlmcHeaderBytes && read_le<int32_t>(bytes, 4) == 1 &&
      static_cast<uint64_t>(read_le<int32_t>(bytes, 8)) * 2 + kLlmcHeaderBytes == bytes.size()) {
    fail(path, "looks like an llm.c shard with a damaged magic number (expected " + std::to_string(kLlmcMagic) + ")");
  }
  return {TokenFileFormat::raw_uint16, 0, bytes.size() / 2};
}

// A token beyond the vocabulary would only surface later as an embedding
// index error deep in the model; checking here names the file and offset.
void check_vocabulary(const std::filesystem::path& path, std::span<const uint16_t> tokens, uint32_t vocab_size) {
  if (vocab_size > std::numeric_limits<uint16_t>::max()) return;
  uint16_t largest = 0;
  for (uint16_t token : tokens) largest = std::max(largest, token);  // a tight loop the compiler vectorizes
  if (largest < vocab_size) return;
  const auto bad = std::find_if(tokens.begin(), tokens.end(), [&](uint16_t t) { return t >= vocab_size; });
  fail(path, "token " + std::to_string(*bad) + " at offset " + std::to_string(bad - tokens.begin()) +
                 " is not below vocab_size " + std::to_string(vocab_size));
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    throw std::invalid_argument("cannot open '" + path.string() + "': " + std::strerror(errno));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    throw std::invalid_argument("cannot stat '" + path.string() + "': " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) throw std::invalid_argument("'" + path.string() + "' is not a regular file");
  if (info.st_size == 0) return;
  void* address = ::mmap(nullptr, static_cast<std::size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (address == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(), "cannot mmap '" + path.string() + "'");
  }
  // The mapping outlives the descriptor, which is closed on return.
  data_ = static_cast<const std::byte*>(address);
  size_ = static_cast<std::size_t>(info.st_size);
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::unmap() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

std::string_view format_name(TokenFileFormat format) {
  switch (format) {
    case TokenFileFormat::llmc_bin:
      return "llm.c bin";
    case TokenFileFormat::npy:
      return "npy uint16";
    case TokenFileFormat::raw_uint16:
      return "raw uint16";
  }
  return "unknown";
}

TokenFile::TokenFile(std::filesystem::path path, uint32_t vocab_size) : path_(std::move(path)), mapping_(path_) {
  if (vocab_size == 0) fail(path_, "vocab_size must be positive");
  const std::span<const std::byte> bytes = mapping_.bytes();
  const TokenLayout layout = parse_layout(path_, bytes);
  if (layout.count == 0) fail(path_, "contains no tokens");
  format_ = layout.format;
  // mmap returns page-aligned memory and every data offset is even, so the
  // tokens can be viewed in place as uint16.
  tokens_ = {reinterpret_cast<const uint16_t*>(bytes.data() + layout.data_offset),
             static_cast<std::size_t>(layout.count)};
  check_vocabulary(path_, tokens_, vocab_size);
}

void TokenFile::read(uint64_t offset, std::size_t count, int64_t* out) const {
  if (offset > tokens_.size() || count > tokens_.size() - offset) {
    throw std::out_of_range("token file '" + path_.string() + "': read of " + std::to_string(count) +
                            " tokens at offset " + std::to_string(offset) + " passes its end (" +
                            std::to_string(tokens_.size()) + " tokens)");
  }
  const uint16_t* source = tokens_.data() + offset;
  std::copy(source, source + count, out);
}

bool looks_like_token_file(const std::filesystem::path& path) {
  const auto ext = path.extension().string();
  if (ext == ".bin" || ext == ".npy") return true;
  char head[8] = {};
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return false;
  const ssize_t n = ::read(fd.get(), head, sizeof head);
  if (n >= static_cast<ssize_t>(kNpyMagic.size()) && std::memcmp(head, kNpyMagic.data(), kNpyMagic.size()) == 0)
    return true;
  int32_t magic = 0;
  std::memcpy(&magic, head, sizeof magic);
  return n >= 4 && magic == kLlmcMagic;
}

}  // namespace mygpt
