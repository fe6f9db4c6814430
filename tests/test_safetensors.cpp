// The safetensors reader and writer: round trips of every dtype, the reference layout, and damaged
// files, each refused with one std::invalid_argument line naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <random>

#include "common/file_io.h"
#include "expect_refused.h"
#include "model/hf/safetensors_file.h"
#include "scratch_dir.h"

namespace mygpt::safetensors_test {
namespace {

std::string le64(uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

std::string file_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const std::filesystem::path& path) { return read_whole_file(path, "test file"); }

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const auto ca = a.contiguous(), cb = b.contiguous();
  if (ca.numel() == 0) return true;  // an empty tensor's data pointer may be null, which memcmp must not get
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

// A tensor of `type` with varied bit patterns (random bytes, except where only some are valid).
torch::Tensor patterned(torch::ScalarType type, std::vector<int64_t> shape, int seed) {
  auto t = torch::empty(shape, torch::TensorOptions().dtype(type));
  std::mt19937 rng(seed);
  auto* bytes = static_cast<unsigned char*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel() * t.element_size(); ++i) {
    bytes[i] = static_cast<unsigned char>(type == torch::kBool ? rng() % 2 : rng() % 256);
  }
  return t;
}

TEST(Safetensors, RoundTripsEveryDtypeShapeAndMetadata) {
  ScratchDir dir;
  const auto path = dir.path() / "all.safetensors";
  const std::vector<torch::ScalarType> types = {
      torch::kDouble, torch::kFloat,  torch::kHalf,   torch::kBFloat16,    torch::kLong,
      torch::kInt,    torch::kShort,  torch::kChar,   torch::kByte,        torch::kBool,
      torch::kUInt16, torch::kUInt32, torch::kUInt64, torch::kFloat8_e5m2, torch::kFloat8_e4m3fn};
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  int seed = 0;
  for (const auto type : types) {
    tensors.emplace_back(std::string("odd.") + c10::toString(type), patterned(type, {3, 5}, ++seed));
  }
  tensors.emplace_back("scalar", torch::tensor(2.5));
  tensors.emplace_back("empty", torch::zeros({4, 0, 2}));
  tensors.emplace_back("transposed", torch::arange(12, torch::kFloat).view({3, 4}).t());  // not contiguous
  tensors.emplace_back("named \"with\" quotes\\ and ünïcode", torch::ones({2}, torch::kInt));
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "line\nbreak ✓"}};
  write_safetensors(path, tensors, metadata);

  const auto reader = SafetensorsReader::open(path);
  EXPECT_EQ(reader.metadata(), metadata);
  ASSERT_EQ(reader.names().size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(reader.has(name)) << name;
    const auto& info = reader.info(name);
    EXPECT_EQ(info.dtype, tensor.scalar_type()) << name;
    EXPECT_EQ(c10::IntArrayRef(info.shape), tensor.sizes()) << name;
    EXPECT_EQ(info.begin % tensor.element_size(), 0u) << name << " is not aligned to its element size";
    EXPECT_TRUE(same_bytes(reader.tensor(name), tensor)) << name;
  }
  EXPECT_TRUE(torch::equal(reader.tensor("transposed"), tensors[17].second));
  EXPECT_EQ(reader.info("odd.Half").dtype_name, "F16");
  EXPECT_EQ(reader.info("odd.Float8_e4m3fn").dtype_name, "F8_E4M3");
  EXPECT_FALSE(reader.has("absent"));
  expect_refused([&] { reader.info("absent"); }, {path.string(), "absent"});

  // Larger elements first keeps every tensor aligned; the header is padded to a multiple of 8.
  EXPECT_EQ(reader.names().front().rfind("odd.", 0), 0u);
  const std::string bytes = read_bytes(path);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  EXPECT_EQ(header_length % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
}

TEST(Safetensors, WritesTheReferenceLayout) {
  // The reference implementation's own serialization test: one F32 tensor, no metadata.
  ScratchDir dir;
  const auto path = dir.path() / "ref.safetensors";
  write_safetensors(path, {{"attn.0", torch::arange(6, torch::kFloat).view({1, 2, 3})}});
  const std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  std::string data(24, '\0');
  const auto values = torch::arange(6, torch::kFloat);
  std::memcpy(data.data(), values.data_ptr(), 24);
  EXPECT_EQ(read_bytes(path), file_bytes(header, data));

  write_safetensors(path, {});
  EXPECT_EQ(read_bytes(path), file_bytes("{}      ", ""));
  EXPECT_TRUE(SafetensorsReader::open(path).names().empty());
}

TEST(Safetensors, ReadsFromMemoryAndNamesTheSource) {
  const std::string header = R"({"a":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}, "__metadata__": null})";
  const auto reader =
      SafetensorsReader::from_bytes(file_bytes(header, std::string("\x01\x00\xff\xff", 4)), "in-memory x");
  EXPECT_TRUE(torch::equal(reader.tensor("a"), torch::tensor({1, -1}, torch::kShort)));
  EXPECT_TRUE(reader.metadata().empty());
  expect_refused([] { SafetensorsReader::from_bytes("abc", "in-memory y"); }, {"in-memory y", "too short"});
}

struct DamagedCase {
  const char* what;
  std::string bytes;
  std::vector<std::string> needles;  // besides the file's path
};

std::vector<DamagedCase> damaged_cases() {
  const std::string f32x2 = R"("dtype":"F32","shape":[2])";
  const std::string eight(8, '\0');
  auto one = [&](const std::string& entry, const std::string& data) {
    return file_bytes("{\"w\":{" + entry + "}}", data);
  };
  return {
      {"empty file", "", {"too short"}},
      {"shorter than the length field", std::string("\x05\x00\x00", 3), {"too short"}},
      {"header length past the end", le64(100) + "{}", {"header length 100", "past the end"}},
      {"huge header length", le64(uint64_t{1} << 63) + "{}", {"exceeds the limit"}},
      {"header length over the cap", le64(kSafetensorsMaxHeaderBytes + 1) + "{}", {"exceeds the limit"}},
      {"bad JSON", file_bytes(R"({"w":{"dtype":)", ""), {"not valid JSON"}},
      {"trailing garbage in the header", file_bytes("{}}", ""), {"not valid JSON"}},
      {"header not an object", file_bytes("[1,2]", ""), {"not a JSON object"}},
      {"invalid UTF-8", file_bytes("{\"\xff\xfe\":1}", ""), {"not valid JSON"}},
      {"duplicate key",
       file_bytes(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"w":{}})", ""),
       {"repeats the key 'w'"}},
      {"deep nesting", file_bytes(R"({"w":{"shape":[[[[1]]]]}})", ""), {"nests deeper"}},
      {"entry not an object", file_bytes(R"({"w":[1]})", ""), {"tensor 'w'", "not a JSON object"}},
      {"unknown field",
       one(f32x2 + R"(,"data_offsets":[0,8],"extra":1)", eight),
       {"tensor 'w'", "unknown field 'extra'"}},
      {"unknown dtype",
       one(R"("dtype":"F128","shape":[2],"data_offsets":[0,8])", eight),
       {"tensor 'w'", "dtype 'F128'"}},
      {"dtype not a string", one(R"("dtype":4,"shape":[2],"data_offsets":[0,8])", eight), {"tensor 'w'", "dtype"}},
      {"no shape", one(R"("dtype":"F32","data_offsets":[0,8])", eight), {"tensor 'w'", "shape"}},
      {"negative dimension", one(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])", eight), {"tensor 'w'", "shape"}},
      {"fractional dimension",
       one(R"("dtype":"F32","shape":[2.0],"data_offsets":[0,8])", eight),
       {"tensor 'w'", "shape"}},
      {"size overflow",
       one(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8])", eight),
       {"tensor 'w'", "overflows"}},
      {"dimension past int64",
       one(R"("dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,8])", eight),
       {"tensor 'w'", "overflows"}},
      {"offsets not a pair", one(f32x2 + R"(,"data_offsets":[0,8,16])", eight), {"tensor 'w'", "data_offsets"}},
      {"negative offset", one(f32x2 + R"(,"data_offsets":[-8,0])", eight), {"tensor 'w'", "data_offsets"}},
      {"offsets reversed", one(f32x2 + R"(,"data_offsets":[8,0])", eight), {"tensor 'w'", "begin after they end"}},
      {"offsets past the data",
       one(f32x2 + R"(,"data_offsets":[0,8])", "1234"),
       {"tensor 'w'", "past the data region"}},
      {"offset near 2^64",
       one(f32x2 + R"(,"data_offsets":[18446744073709551615,18446744073709551615])", eight),
       {"tensor 'w'", "past the data region"}},
      {"bytes do not match the shape",
       one(R"("dtype":"F32","shape":[3],"data_offsets":[0,8])", eight),
       {"tensor 'w'", "need 12"}},
      {"overlapping tensors",
       file_bytes(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           eight),
       {"tensor 'b'", "overlaps tensor 'a'"}},
      {"gap between tensors",
       file_bytes(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
           eight),
       {"tensor 'b'", "bytes 4..6"}},
      {"trailing bytes", one(f32x2 + R"(,"data_offsets":[0,8])", eight + "xyz"), {"3 bytes after the last tensor"}},
      {"metadata not an object", file_bytes(R"({"__metadata__":[1]})", ""), {"__metadata__"}},
      {"metadata value not a string", file_bytes(R"({"__metadata__":{"k":1}})", ""), {"__metadata__", "'k'"}},
      {"name with a newline",
       file_bytes("{\"a\\nb\":{\"dtype\":\"Q\",\"shape\":[],\"data_offsets\":[0,0]}}", ""),
       {"tensor 'a\\x0ab'"}},
  };
}

TEST(Safetensors, RefusesDamagedFilesNamingFileAndTensor) {
  ScratchDir dir;
  for (const auto& c : damaged_cases()) {
    SCOPED_TRACE(c.what);
    const auto path = dir.path() / "damaged.safetensors";
    write_bytes(path, c.bytes);
    auto needles = c.needles;
    needles.push_back(path.string());
    expect_refused([&] { SafetensorsReader::open(path); }, needles);
  }
}

TEST(Safetensors, RefusesEveryTruncationOfAGoodFile) {
  ScratchDir dir;
  const auto path = dir.path() / "good.safetensors";
  write_safetensors(path, {{"a", torch::ones({3})}, {"b", torch::ones({2}, torch::kLong)}}, {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    expect_refused([&] { SafetensorsReader::from_bytes(bytes.substr(0, length), "cut"); }, {"cut"});
  }
  EXPECT_EQ(SafetensorsReader::from_bytes(bytes, "whole").names().size(), 2u);
}

TEST(Safetensors, RefusesBoolBytesOtherThanZeroOrOne) {
  const auto reader = SafetensorsReader::from_bytes(
      file_bytes(R"({"flags":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", std::string("\x01\x00\x02", 3)),
      "bools");
  expect_refused([&] { reader.tensor("flags"); }, {"bools", "tensor 'flags'", "BOOL"});
}

TEST(Safetensors, RefusesWhatIsNotARegularFile) {
  ScratchDir dir;
  expect_refused([&] { SafetensorsReader::open(dir.path()); }, {dir.path().string(), "directory"});
  expect_refused([&] { SafetensorsReader::open(dir.path() / "missing"); }, {"missing", "does not exist"});
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused([&] { SafetensorsReader::open(fifo); }, {fifo.string(), "not a regular file"});
  expect_refused([] { SafetensorsReader::open("/dev/null"); }, {"/dev/null", "not a regular file"});
}

TEST(Safetensors, WriterRefusesBadInputAndLeavesNoFile) {
  ScratchDir dir;
  const auto path = dir.path() / "out.safetensors";
  write_safetensors(path, {{"kept", torch::ones({2})}});
  const std::string before = read_bytes(path);
  expect_refused(
      [&] {
        write_safetensors(path, {{"a", torch::ones({1})}, {"a", torch::ones({1})}});
      },
      {path.string(), "'a' appears twice"});
  expect_refused([&] { write_safetensors(path, {{"__metadata__", torch::ones({1})}}); }, {"__metadata__"});
  expect_refused([&] { write_safetensors(path, {{"u", torch::Tensor()}}); }, {"tensor 'u'", "undefined"});
  expect_refused(
      [&] {
        write_safetensors(path, {{"c", torch::ones({2}, torch::kComplexFloat)}});
      },
      {"tensor 'c'", "cannot store"});
  expect_refused([&] { write_safetensors(path, {{"bad\xff", torch::ones({1})}}); }, {"UTF-8"});
  expect_refused([&] { write_safetensors(path, {}, {{"k", "\xfe"}}); }, {"metadata value of 'k'", "UTF-8"});
  expect_refused([&] { write_safetensors(dir.path() / "no" / "such" / "x.safetensors", {}); }, {"x.safetensors"});
  EXPECT_EQ(read_bytes(path), before);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u) << "a temporary file was left behind";
}

// Random damage to a valid file's header and data: every outcome is a clean accept or an
// invalid_argument, never a crash or another exception (the property a fuzzer checks at scale).
TEST(Safetensors, SurvivesRandomDamage) {
  ScratchDir dir;
  const auto path = dir.path() / "seed.safetensors";
  write_safetensors(
      path, {{"a", torch::ones({2, 3})}, {"b", torch::ones({3}, torch::kBool)}, {"c", torch::ones({1}, torch::kLong)}},
      {{"format", "pt"}});
  const std::string good = read_bytes(path);
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          bytes[at] = "0123456789[]{},:\"-."[rng() % 19];
          break;
        case 2:
          bytes.erase(at, 1 + rng() % 3);
          break;
        default:
          bytes.insert(at, 1, static_cast<char>(rng() % 256));
          break;
      }
      if (bytes.empty()) bytes.push_back('x');
    }
    try {
      const auto reader = SafetensorsReader::from_bytes(bytes, "fuzz");
      for (const auto& name : reader.names()) {
        try {
          (void)reader.tensor(name);
        } catch (const std::invalid_argument&) {
        }
      }
      ++accepted;
    } catch (const std::invalid_argument&) {
    }
  }
  EXPECT_GT(accepted, 0);  // some damage (inside tensor data) leaves a valid file
}

}  // namespace
}  // namespace mygpt::safetensors_test
