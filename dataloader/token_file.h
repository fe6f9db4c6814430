// One token file on disk, memory-mapped and validated when opened.
//
// Three formats are read; the kind is detected from the content:
//   - llm.c `.bin` shards: 256 little-endian int32 header (magic 20240520,
//     version 1, token count), then the uint16 tokens;
//   - `.npy` 1-D uint16 arrays (build-nanogpt FineWeb-EDU shards);
//   - raw uint16 tokens with no header (nanoGPT `train.bin` / `val.bin`), only under a `.bin` name:
//     any file of even size would parse as raw tokens, so the name is what says it is one, and a file
//     whose first 64 KiB are printable UTF-8 text is refused (real tokens always hold NUL/control bytes).
// Every problem with a file is a std::invalid_argument with a one-line
// message that names the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

namespace mygpt {

// A whole file mapped read-only; the mapping lives exactly as long as this
// object. An empty file maps to an empty span (mmap cannot map 0 bytes).
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  void unmap() noexcept;

  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

enum class TokenFileFormat { llmc_bin, npy, raw_uint16 };

// llm.c's shard header: 256 little-endian int32, [0] the magic, [1] the version, [2] the token count.
inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
inline constexpr std::size_t kLlmcHeaderInts = 256;

// Whether a file holds tokens rather than text: it starts with the llm.c or numpy magic, or it has the
// .bin/.npy name that nanoGPT and build-nanogpt give their token files. Reads at most 8 bytes.
bool looks_like_token_file(const std::filesystem::path& path);

std::string_view format_name(TokenFileFormat format);

class TokenFile {
 public:
  // Opens, maps and validates `path`: header, exact size, and every token
  // below `vocab_size`. Throws std::invalid_argument naming the file.
  TokenFile(std::filesystem::path path, uint32_t vocab_size);

  const std::filesystem::path& path() const { return path_; }
  TokenFileFormat format() const { return format_; }
  uint64_t size() const { return tokens_.size(); }

  // Points into the mapping; valid while this TokenFile lives (moving the
  // TokenFile keeps it valid, the mapping does not move).
  std::span<const uint16_t> tokens() const { return tokens_; }

  // Copies tokens [offset, offset + count) widened to int64 (the dtype of
  // LibTorch index tensors). Throws std::out_of_range past the end.
  void read(uint64_t offset, std::size_t count, int64_t* out) const;

 private:
  std::filesystem::path path_;
  MappedFile mapping_;
  TokenFileFormat format_ = TokenFileFormat::raw_uint16;
  std::span<const uint16_t> tokens_;
};

}  // namespace mygpt
