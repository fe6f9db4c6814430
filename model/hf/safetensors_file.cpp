#include "model/hf/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>

#include "common/file_io.h"

namespace mygpt {
namespace fs = std::filesystem;

// Tensor bytes are copied as they lie in the file, which is little-endian by definition.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

struct DtypeEntry {
  const char* name;
  torch::ScalarType type;
  uint64_t size;
};

// The reference implementation's dtypes that LibTorch can hold.
constexpr DtypeEntry kDtypes[] = {
    {"BOOL", torch::kBool, 1},
    {"U8", torch::kByte, 1},
    {"I8", torch::kChar, 1},
    {"F8_E5M2", torch::kFloat8_e5m2, 1},
    {"F8_E4M3", torch::kFloat8_e4m3fn, 1},
    {"I16", torch::kShort, 2},
    {"U16", torch::kUInt16, 2},
    {"F16", torch::kHalf, 2},
    {"BF16", torch::kBFloat16, 2},
    {"I32", torch::kInt, 4},
    {"U32", torch::kUInt32, 4},
    {"F32", torch::kFloat, 4},
    {"F64", torch::kDouble, 8},
    {"I64", torch::kLong, 8},
    {"U64", torch::kUInt64, 8},
};

const DtypeEntry* dtype_by_name(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

const DtypeEntry* dtype_by_type(torch::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (type == d.type) return &d;
  }
  return nullptr;
}

constexpr std::size_t kMaxRank = 64;  // far beyond any real tensor; bounds the work a header can ask for
constexpr int kMaxNesting = 3;        // header object > tensor entry > shape array

}  // namespace

// Names come from untrusted files: control characters would break the one-line message.
std::string printable_name(const std::string& text) {
  constexpr std::size_t kMaxShown = 160;
  std::string out;
  for (const char c : text.substr(0, kMaxShown)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  if (text.size() > kMaxShown) out += "...";
  return out;
}

namespace {

std::string tensor_label(const std::string& name) { return "tensor '" + printable_name(name) + "'"; }

uint64_t read_le64(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

void append_le64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

[[noreturn]] void refuse(const std::string& source, const std::string& problem) {
  throw std::invalid_argument(source + ": " + problem);
}

// A header problem found while the JSON is still being parsed (the callback cannot return one).
struct HeaderStructureError {
  std::string message;
};

nlohmann::json parse_header_json(const char* begin, const char* end) {
  // One key set per open object (arrays get an unused one): JSON allows duplicate keys, the
  // format does not, and nlohmann would silently keep the last.
  std::vector<std::set<std::string>> open_keys;
  auto check = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      if (static_cast<int>(open_keys.size()) >= kMaxNesting) {
        throw HeaderStructureError{"the header nests deeper than a safetensors header can"};
      }
      open_keys.emplace_back();
    } else if (event == Event::object_end || event == Event::array_end) {
      if (!open_keys.empty()) open_keys.pop_back();
    } else if (event == Event::key && !open_keys.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_keys.back().insert(key).second) {
        throw HeaderStructureError{"the header repeats the key '" + printable_name(key) + "'"};
      }
    }
    return true;
  };
  return nlohmann::json::parse(begin, end, check);
}

// A JSON number that is a non-negative integer (nlohmann parses those as unsigned).
bool read_unsigned(const nlohmann::json& value, uint64_t& out) {
  if (!value.is_number_unsigned()) return false;
  out = value.get<uint64_t>();
  return true;
}

}  // namespace

struct SafetensorsReader::Bytes {
  virtual ~Bytes() = default;
  const unsigned char* data = nullptr;
  std::size_t size = 0;
};

namespace {

struct OwnedBytes : SafetensorsReader::Bytes {
  explicit OwnedBytes(std::string bytes) : buffer(std::move(bytes)) {
    data = reinterpret_cast<const unsigned char*>(buffer.data());
    size = buffer.size();
  }
  std::string buffer;
};

struct MappedFile : SafetensorsReader::Bytes {
  MappedFile(void* mapping, std::size_t length) {
    data = static_cast<const unsigned char*>(mapping);
    size = length;
  }
  ~MappedFile() override { ::munmap(const_cast<unsigned char*>(data), size); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
};

std::shared_ptr<const SafetensorsReader::Bytes> map_file(const fs::path& path, const std::string& source) {
  require_regular_file(path, "safetensors file");
  // O_NONBLOCK: a path swapped for a FIFO after the check still cannot block the open.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw std::invalid_argument("cannot read " + source + ": " + std::strerror(errno));
  struct stat info {};
  const bool regular = ::fstat(fd.get(), &info) == 0 && S_ISREG(info.st_mode);
  if (!regular || info.st_size == 0) {
    if (!regular) throw std::invalid_argument(source + " is not a regular file");
    return std::make_shared<OwnedBytes>(std::string());  // mmap refuses length 0; the parser reports it
  }
  const auto length = static_cast<std::size_t>(info.st_size);
  void* mapping = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  const int map_error = errno;  // the mapping keeps the file open after fd closes
  if (mapping == MAP_FAILED) throw std::invalid_argument("cannot map " + source + ": " + std::strerror(map_error));
  return std::make_shared<MappedFile>(mapping, length);
}

}  // namespace

SafetensorsReader::SafetensorsReader(std::shared_ptr<const Bytes> bytes, std::string source)
    : bytes_(std::move(bytes)), source_(std::move(source)) {
  parse_header();
}

SafetensorsReader SafetensorsReader::open(const fs::path& path) {
  const std::string source = "safetensors file '" + path.string() + "'";
  return SafetensorsReader(map_file(path, source), source);
}

SafetensorsReader SafetensorsReader::from_bytes(std::string bytes, const std::string& source) {
  return SafetensorsReader(std::make_shared<OwnedBytes>(std::move(bytes)), source);
}

void SafetensorsReader::parse_header() {
  auto fail = [&](const std::string& problem) { refuse(source_, problem); };
  const uint64_t size = bytes_->size;
  if (size < 8) fail("is " + std::to_string(size) + " bytes long, too short for the 8-byte header length");
  const uint64_t header_length = read_le64(bytes_->data);
  if (header_length > kSafetensorsMaxHeaderBytes) {
    fail("header length " + std::to_string(header_length) + " exceeds the limit of " +
         std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  }
  if (header_length > size - 8) {
    fail("header length " + std::to_string(header_length) + " runs past the end of the file (" + std::to_string(size) +
         " bytes)");
  }
  data_start_ = 8 + header_length;
  const uint64_t data_size = size - data_start_;

  nlohmann::json header;
  try {
    const auto* text = reinterpret_cast<const char*>(bytes_->data + 8);
    header = parse_header_json(text, text + header_length);
  } catch (const HeaderStructureError& e) {
    fail(e.message);
  } catch (const nlohmann::json::exception& e) {
    fail("header is not valid JSON: " + printable_name(e.what()));
  }
  if (!header.is_object()) fail("header is not a JSON object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (entry.is_null()) continue;
      if (!entry.is_object()) fail("__metadata__ is not a JSON object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("__metadata__ value of '" + printable_name(key) + "' is not a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string label = tensor_label(name);
    auto bad = [&](const std::string& problem) { fail(label + ": " + problem); };
    if (!entry.is_object()) bad("entry is not a JSON object");
    for (const auto& [field, value] : entry.items()) {
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        bad("unknown field '" + printable_name(field) + "'");
    }
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) bad("dtype is missing or not a string");
    const std::string dtype_name = entry["dtype"].get<std::string>();
    const DtypeEntry* dtype = dtype_by_name(dtype_name);
    if (dtype == nullptr) bad("dtype '" + printable_name(dtype_name) + "' is not a known safetensors dtype");

    if (!entry.contains("shape") || !entry["shape"].is_array()) bad("shape is missing or not an array");
    const auto& dims = entry["shape"];
    if (dims.size() > kMaxRank)
      bad("shape has " + std::to_string(dims.size()) + " dimensions, more than " + std::to_string(kMaxRank));
    SafetensorsTensorInfo info{dtype->type, dtype->name, {}, 0, 0};
    uint64_t bytes = dtype->size;
    for (const auto& dim : dims) {
      uint64_t extent = 0;
      if (!read_unsigned(dim, extent)) bad("shape holds something other than a non-negative integer");
      if (extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(bytes, extent, &bytes)) {
        bad("shape's size overflows");
      }
      info.shape.push_back(static_cast<int64_t>(extent));
    }

    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2 ||
        !read_unsigned(entry["data_offsets"][0], info.begin) || !read_unsigned(entry["data_offsets"][1], info.end)) {
      bad("data_offsets is not a pair of non-negative integers");
    }
    if (info.begin > info.end) bad("data_offsets begin after they end");
    if (info.end > data_size) {
      bad("data_offsets end at byte " + std::to_string(info.end) + ", past the data region's " +
          std::to_string(data_size) + " bytes");
    }
    if (info.end - info.begin != bytes) {
      bad("data_offsets span " + std::to_string(info.end - info.begin) + " bytes but dtype and shape need " +
          std::to_string(bytes));
    }
    entries_.emplace(name, std::move(info));
  }

  // The entries must tile the data region: no overlap (a file cannot make us read a byte twice),
  // no holes and no trailing bytes, as the reference implementation demands.
  std::vector<const std::pair<const std::string, SafetensorsTensorInfo>*> by_offset;
  for (const auto& item : entries_) by_offset.push_back(&item);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return std::tie(a->second.begin, a->second.end, a->first) < std::tie(b->second.begin, b->second.end, b->first);
  });
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (const auto* item : by_offset) {
    const SafetensorsTensorInfo& info = item->second;
    if (info.begin < covered) fail(tensor_label(item->first) + ": data overlaps " + tensor_label(*previous));
    if (info.begin > covered) {
      fail(tensor_label(item->first) + ": data starts at byte " + std::to_string(info.begin) + ", leaving bytes " +
           std::to_string(covered) + ".." + std::to_string(info.begin) + " to no tensor");
    }
    covered = info.end;
    previous = &item->first;
    names_.push_back(item->first);
  }
  if (covered != data_size) {
    fail("the data region holds " + std::to_string(data_size - covered) + " bytes after the last tensor");
  }
}

const SafetensorsTensorInfo& SafetensorsReader::info(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) refuse(source_, "has no " + tensor_label(name));
  return it->second;
}

torch::Tensor SafetensorsReader::tensor(const std::string& name) const {
  const SafetensorsTensorInfo& entry = info(name);
  const unsigned char* bytes = bytes_->data + data_start_ + entry.begin;
  const uint64_t length = entry.end - entry.begin;
  if (entry.dtype == torch::kBool && std::any_of(bytes, bytes + length, [](unsigned char b) { return b > 1; })) {
    refuse(source_, tensor_label(name) + ": BOOL data holds a byte other than 0 or 1");
  }
  auto out = torch::empty(entry.shape, torch::TensorOptions().dtype(entry.dtype));
  if (length > 0) std::memcpy(out.data_ptr(), bytes, length);
  return out;
}

torch::Tensor SafetensorsReader::view(const std::string& name) const {
  const SafetensorsTensorInfo& entry = info(name);
  const unsigned char* bytes = bytes_->data + data_start_ + entry.begin;
  const auto element = static_cast<uintptr_t>(c10::elementSize(entry.dtype));
  if (entry.dtype == torch::kBool || entry.end == entry.begin || reinterpret_cast<uintptr_t>(bytes) % element != 0) {
    return tensor(name);
  }
  // from_blob's deleter holds the mapping: the view stays valid after the reader is gone.
  return torch::from_blob(
      const_cast<unsigned char*>(bytes), entry.shape, [keep = bytes_](void*) {},
      torch::TensorOptions().dtype(entry.dtype));
}

std::vector<SafetensorsLayoutEntry> safetensors_data_order(std::vector<SafetensorsLayoutEntry> entries) {
  // Largest element size first keeps every tensor aligned to its element size; then by name.
  auto size_of = [](const SafetensorsLayoutEntry& e) {
    const DtypeEntry* dtype = dtype_by_type(e.dtype);
    return dtype ? dtype->size : size_t{0};
  };
  std::stable_sort(entries.begin(), entries.end(), [&](const SafetensorsLayoutEntry& a, const SafetensorsLayoutEntry& b) {
    return size_of(a) != size_of(b) ? size_of(a) > size_of(b) : a.name < b.name;
  });
  return entries;
}

SafetensorsStreamWriter::SafetensorsStreamWriter(const fs::path& path, std::vector<SafetensorsLayoutEntry> entries,
                                                 const std::map<std::string, std::string>& metadata)
    : source_("safetensors file '" + path.string() + "'"), entries_(safetensors_data_order(std::move(entries))) {
  auto fail = [&](const std::string& problem) { refuse(source_, problem); };
  auto require_utf8 = [&](const std::string& text, const std::string& what) {
    try {
      (void)nlohmann::json(text).dump();
    } catch (const nlohmann::json::exception&) {
      fail(what + " is not valid UTF-8");
    }
  };
  std::set<std::string> seen;
  for (const SafetensorsLayoutEntry& entry : entries_) {
    const std::string label = tensor_label(entry.name);
    if (entry.name == "__metadata__") fail("'__metadata__' cannot name a tensor");
    if (!seen.insert(entry.name).second) fail(label + " appears twice");
    require_utf8(entry.name, label + "'s name");
    if (dtype_by_type(entry.dtype) == nullptr)
      fail(label + " has dtype " + std::string(c10::toString(entry.dtype)) + ", which safetensors cannot store");
  }
  for (const auto& [key, value] : metadata) {
    require_utf8(key, "metadata key '" + printable_name(key) + "'");
    require_utf8(value, "metadata value of '" + printable_name(key) + "'");
  }
  std::string header_text = header(metadata);
  // Padding to 8 bytes keeps the data region (and so every tensor) aligned for zero-copy readers.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  header_bytes_ = header_text.size();
  std::string prefix;
  append_le64(prefix, header_text.size());
  writer_ = std::make_unique<AtomicFileWriter>(path);
  writer_->write(prefix);
  writer_->write(header_text);
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() = default;

std::string SafetensorsStreamWriter::header(const std::map<std::string, std::string>& metadata) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsLayoutEntry& entry : entries_) {
    const DtypeEntry* dtype = dtype_by_type(entry.dtype);
    uint64_t bytes = dtype->size;
    for (const int64_t d : entry.shape) bytes *= static_cast<uint64_t>(d);
    header[entry.name] = {{"dtype", dtype->name}, {"shape", entry.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  return header.dump();
}

void SafetensorsStreamWriter::write_next(const torch::Tensor& tensor) {
  if (next_ >= entries_.size()) throw std::logic_error(source_ + ": more tensors written than laid out");
  const SafetensorsLayoutEntry& entry = entries_[next_];
  const std::string label = tensor_label(entry.name);
  if (!tensor.defined()) refuse(source_, label + " is undefined");
  if (tensor.layout() != torch::kStrided) refuse(source_, label + " is not a dense tensor");
  if (tensor.scalar_type() != entry.dtype || tensor.sizes().vec() != entry.shape) {
    throw std::logic_error(source_ + ": " + label + " differs from its place in the header");
  }
  const torch::Tensor data = tensor.detach().to(torch::kCPU).contiguous();
  writer_->write(data.data_ptr(), static_cast<std::size_t>(data.numel()) * dtype_by_type(entry.dtype)->size);
  ++next_;
}

void SafetensorsStreamWriter::finish(const std::map<std::string, std::string>& metadata) {
  if (next_ != entries_.size()) throw std::logic_error(source_ + ": finished before every tensor was written");
  std::string header_text = header(metadata);
  if (header_text.size() > header_bytes_) {
    throw std::logic_error(source_ + ": the final metadata is longer than the header laid out for it");
  }
  header_text.append(header_bytes_ - header_text.size(), ' ');
  writer_->write_at(8, header_text.data(), header_text.size());
  writer_->commit();
}

void write_safetensors(const fs::path& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string source = "safetensors file '" + path.string() + "'";
  std::vector<SafetensorsLayoutEntry> layout;
  std::map<std::string, torch::Tensor> by_name;
  for (const auto& [name, tensor] : tensors) {
    const std::string label = tensor_label(name);
    if (!tensor.defined()) refuse(source, label + " is undefined");
    if (tensor.layout() != torch::kStrided) refuse(source, label + " is not a dense tensor");
    layout.push_back({name, tensor.scalar_type(), tensor.sizes().vec()});
    by_name.emplace(name, tensor);  // a duplicate name is refused by the writer
  }
  SafetensorsStreamWriter writer(path, std::move(layout), metadata);
  for (const SafetensorsLayoutEntry& entry : writer.order()) writer.write_next(by_name.at(entry.name));
  writer.finish(metadata);
}

}  // namespace mygpt
