#pragma once
// The safetensors format (Hugging Face), read and written by our own code: an 8-byte little-endian
// header length N, N bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {str: str}}, then the tensors' raw little-endian bytes, offsets counted from the
// first byte after the header.
//
// The reader treats every file as hostile: before any tensor byte is touched it checks the header
// length against the file and a 100 MB cap (the reference implementation's), the JSON (no duplicate
// keys), every entry's dtype, shape (no overflow), byte count and offsets, and that the entries tile
// the data region exactly, with no overlap, gap or trailing bytes (as the reference requires). Any
// problem is std::invalid_argument with one line naming the file and the tensor or field.
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mygpt {

struct SafetensorsTensorInfo {
  torch::ScalarType dtype;
  std::string dtype_name;  // as the file spells it: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data region
};

class SafetensorsReader {
 public:
  // Maps the file. Non-regular files (FIFOs, devices, folders) are refused before opening. The
  // mapping stays valid while any copy of the reader lives; a file truncated by another process
  // meanwhile is outside what a mapping can guard against.
  static SafetensorsReader open(const std::filesystem::path& path);
  // The same checks on bytes already in memory (tests, fuzzers); `source` names them in messages.
  static SafetensorsReader from_bytes(std::string bytes, const std::string& source);

  // Tensor names in the order of their data in the file.
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  // Throws std::invalid_argument naming the file and the tensor when it is absent.
  const SafetensorsTensorInfo& info(const std::string& name) const;
  // An owning, contiguous CPU copy in the file's dtype. A BOOL tensor holding a byte other than
  // 0 or 1 is refused (such a bool is undefined behaviour in C++).
  torch::Tensor tensor(const std::string& name) const;
  // The tensor where it lies in the file, no copy: for reading straight into its final storage (a model
  // load reads each weight once). Read-only (the mapping is PROT_READ); it keeps the file mapped while it
  // lives. A tensor whose bytes are not aligned to its element size, or a BOOL one, is tensor()'s copy.
  torch::Tensor view(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // How messages name the file: "safetensors file '<path>'".
  const std::string& source() const { return source_; }

  struct Bytes;  // the mapped file or the owned buffer

 private:
  SafetensorsReader(std::shared_ptr<const Bytes> bytes, std::string source);
  void parse_header();

  std::shared_ptr<const Bytes> bytes_;
  std::string source_;
  uint64_t data_start_ = 0;
  std::map<std::string, SafetensorsTensorInfo> entries_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

class AtomicFileWriter;

// A tensor of a file written as a stream: its name, type and shape; its bytes come later.
struct SafetensorsLayoutEntry {
  std::string name;
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
};

// The order in which the data of such entries lies in a file (write_safetensors' order: element size,
// largest first, then by name), which a stream writes them in: every rank of a streamed checkpoint
// computes it alike, to hand the writer its tensors in turn.
std::vector<SafetensorsLayoutEntry> safetensors_data_order(std::vector<SafetensorsLayoutEntry> entries);

// Writes a safetensors file one tensor at a time, so that its writer never holds more than one of them:
// the header first, laid out from the entries, then each tensor's bytes in order(), then the header once
// more with the final metadata, which must fit the first's length (a checksum known only at the end
// replaces a placeholder as long). Refuses what write_safetensors refuses; destroyed before finish(),
// it leaves no file (AtomicFileWriter).
class SafetensorsStreamWriter {
 public:
  SafetensorsStreamWriter(const std::filesystem::path& path, std::vector<SafetensorsLayoutEntry> entries,
                          const std::map<std::string, std::string>& metadata);
  ~SafetensorsStreamWriter();
  const std::vector<SafetensorsLayoutEntry>& order() const { return entries_; }
  // The next entry of order(): its dtype and shape must be the entry's (any device, any layout).
  void write_next(const torch::Tensor& tensor);
  void finish(const std::map<std::string, std::string>& metadata);

 private:
  std::string header(const std::map<std::string, std::string>& metadata) const;

  std::string source_;
  std::vector<SafetensorsLayoutEntry> entries_;
  std::unique_ptr<AtomicFileWriter> writer_;
  std::size_t header_bytes_ = 0, next_ = 0;
};

// Writes tensors (any device, any layout; stored contiguous from the CPU) and string metadata to
// `path` through AtomicFileWriter, so a failure leaves no partial file. Data is ordered by element
// size, largest first, then by name, which keeps every tensor aligned to its element size; the
// header is padded with spaces to a multiple of 8 bytes, as the reference writer does. Duplicate
// names, "__metadata__" as a name, strings that are not UTF-8, undefined or sparse tensors and
// dtypes the format lacks (complex, quantized) are std::invalid_argument naming the tensor; a write
// that fails is OutputFileError.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A name from a file, safe inside a one-line message: control characters escaped as \xNN and
// long names cut short.
std::string printable_name(const std::string& name);

// The header's cap: larger headers are refused before parsing.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

}  // namespace mygpt
