// Token file formats: reading llm.c .bin, .npy and raw uint16 files, streams
// over several files, path expansion, and the llm.c shard writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "dataloader/token_file.h"
#include "dataloader/token_shard_writer.h"
#include "dataloader/token_stream.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"

namespace mygpt::token_files_test {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kGpt2Vocab = 50257;

std::string raw_bytes(const std::vector<uint16_t>& tokens) {
  std::string bytes(tokens.size() * 2, '\0');
  if (!tokens.empty()) std::memcpy(bytes.data(), tokens.data(), bytes.size());  // an empty vector's data() may be null
  return bytes;
}

std::string int32_bytes(const std::vector<int32_t>& values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// An llm.c shard; `count` overrides the header's token count when >= 0.
std::string llmc_bytes(const std::vector<uint16_t>& tokens, int32_t version = 1, int32_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = count >= 0 ? count : static_cast<int32_t>(tokens.size());
  return int32_bytes(header) + raw_bytes(tokens);
}

// An npy file as numpy writes it: the preamble plus the dict, padded with
// spaces and a newline to a multiple of 64 bytes.
std::string npy_bytes(const std::vector<uint16_t>& tokens, const std::string& descr = "<u2", std::string shape = "",
                      int major = 1) {
  if (shape.empty()) shape = "(" + std::to_string(tokens.size()) + ",)";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t preamble = major == 1 ? 10 : 12;
  const std::size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  dict += std::string(total - preamble - dict.size() - 1, ' ') + "\n";
  std::string bytes = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  if (major == 1) {
    const auto length = static_cast<uint16_t>(dict.size());
    bytes.append(reinterpret_cast<const char*>(&length), 2);
  } else {
    const auto length = static_cast<uint32_t>(dict.size());
    bytes.append(reinterpret_cast<const char*>(&length), 4);
  }
  return bytes + dict + raw_bytes(tokens);
}

std::vector<uint16_t> iota_tokens(std::size_t count, uint16_t first) {
  std::vector<uint16_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

std::vector<int64_t> read_file(const TokenFile& file) {
  std::vector<int64_t> out(file.size());
  file.read(0, out.size(), out.data());
  return out;
}

std::vector<int64_t> widen(const std::vector<uint16_t>& tokens) { return {tokens.begin(), tokens.end()}; }

class TokenFilesTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, const std::string& bytes) { return scratch_.write(name, bytes); }

  // Opening `name` must fail with std::invalid_argument whose one-line
  // message names the file and contains `expected`.
  void expect_rejected(const std::string& name, const std::string& bytes, const std::string& expected,
                       uint32_t vocab_size = kGpt2Vocab) {
    const fs::path path = write(name, bytes);
    try {
      TokenFile file(path, vocab_size);
      ADD_FAILURE() << name << " was accepted";
    } catch (const std::invalid_argument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(name), std::string::npos) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }

  std::vector<std::string> names(const std::vector<fs::path>& paths) {
    std::vector<std::string> result;
    for (const auto& path : paths) result.push_back(path.filename().string());
    return result;
  }

  ScratchDir scratch_;
  const fs::path dir_ = scratch_.path();
};

TEST_F(TokenFilesTest, ReadsRawUint16) {
  const auto tokens = std::vector<uint16_t>{0, 1, 50256, 7, 42};
  const TokenFile file(write("train.bin", raw_bytes(tokens)), kGpt2Vocab);
  EXPECT_EQ(file.format(), TokenFileFormat::raw_uint16);
  EXPECT_EQ(file.size(), tokens.size());
  EXPECT_EQ(read_file(file), widen(tokens));
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), file.tokens().begin(), file.tokens().end()));
}

TEST_F(TokenFilesTest, ReadsNpyVersions1And2) {
  const auto tokens = iota_tokens(37, 100);
  for (int major : {1, 2, 3}) {
    const std::string name = "shard_v" + std::to_string(major) + ".npy";
    const TokenFile file(write(name, npy_bytes(tokens, "<u2", "", major)), kGpt2Vocab);
    EXPECT_EQ(file.format(), TokenFileFormat::npy) << name;
    EXPECT_EQ(read_file(file), widen(tokens)) << name;
  }
}

TEST_F(TokenFilesTest, ReadsNpyContentUnderAnyName) {
  const auto tokens = iota_tokens(5, 9);
  const TokenFile file(write("shard.data", npy_bytes(tokens)), kGpt2Vocab);
  EXPECT_EQ(file.format(), TokenFileFormat::npy);
  EXPECT_EQ(read_file(file), widen(tokens));
}

TEST_F(TokenFilesTest, ReadsLlmcBin) {
  const auto tokens = iota_tokens(300, 49900);
  const TokenFile file(write("fineweb_val_000000.bin", llmc_bytes(tokens)), kGpt2Vocab);
  EXPECT_EQ(file.format(), TokenFileFormat::llmc_bin);
  EXPECT_EQ(read_file(file), widen(tokens));
  std::vector<int64_t> middle(3);
  file.read(297, 3, middle.data());
  EXPECT_EQ(middle, (std::vector<int64_t>{50197, 50198, 50199}));
  EXPECT_THROW(file.read(298, 3, middle.data()), std::out_of_range);
}

TEST_F(TokenFilesTest, LargeVocabularyAcceptsEveryUint16) {
  const TokenFile file(write("wide.bin", raw_bytes({65535, 0})), 65536);
  EXPECT_EQ(read_file(file), (std::vector<int64_t>{65535, 0}));
}

TEST_F(TokenFilesTest, RejectsMissingAndEmptyFiles) {
  try {
    TokenFile file(dir_ / "missing.bin", kGpt2Vocab);
    ADD_FAILURE() << "missing file accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("missing.bin"), std::string::npos) << error.what();
  }
  expect_rejected("empty.bin", "", "empty");
  expect_rejected("no_tokens.bin", llmc_bytes({}), "no tokens");
  expect_rejected("no_tokens.npy", npy_bytes({}), "no tokens");
}

TEST_F(TokenFilesTest, RejectsCorruptLlmcFiles) {
  const auto tokens = iota_tokens(10, 0);
  expect_rejected("version.bin", llmc_bytes(tokens, 2), "version 2");
  expect_rejected("short_header.bin", llmc_bytes(tokens).substr(0, 600), "header truncated");
  expect_rejected("truncated.bin", llmc_bytes(tokens).substr(0, 1024 + 2 * 9), "truncated");
  expect_rejected("too_long.bin", llmc_bytes(tokens) + std::string(2, '\0'), "size mismatch");
  expect_rejected("count.bin", llmc_bytes(tokens, 1, 11), "header says 11 tokens");
  expect_rejected("negative.bin", llmc_bytes(tokens, 1, 0).replace(8, 4, int32_bytes({-5})), "negative");
  std::string llama = llmc_bytes(tokens);
  llama.replace(0, 4, int32_bytes({20240801}));
  expect_rejected("llama.bin", llama, "LLaMA-3");
  // Only the magic damaged: the rest of the header still describes the file, so it is not raw tokens.
  std::string damaged = llmc_bytes(tokens);
  damaged.replace(0, 4, int32_bytes({20240521}));
  expect_rejected("damaged_magic.bin", damaged, "damaged magic");
}

TEST_F(TokenFilesTest, RejectsCorruptNpyFiles) {
  const auto tokens = iota_tokens(10, 0);
  expect_rejected("magic.npy", raw_bytes(tokens), "magic");
  expect_rejected("int32.npy", npy_bytes(tokens, "<i4"), "dtype '<i4'");
  expect_rejected("big_endian.npy", npy_bytes(tokens, ">u2"), "dtype '>u2'");
  expect_rejected("matrix.npy", npy_bytes(tokens, "<u2", "(2, 5)"), "(2, 5) is not 1-D");
  expect_rejected("scalar.npy", npy_bytes(tokens, "<u2", "()"), "is not 1-D");
  expect_rejected("short_data.npy", npy_bytes(tokens, "<u2", "(11,)"), "size mismatch");
  expect_rejected("long_data.npy", npy_bytes(tokens, "<u2", "(9,)"), "size mismatch");
  expect_rejected("cut_header.npy", npy_bytes(tokens).substr(0, 40), "header truncated");
  expect_rejected("cut_preamble.npy", npy_bytes(tokens).substr(0, 8), "preamble truncated");
  std::string version = npy_bytes(tokens);
  version[6] = 4;
  expect_rejected("version.npy", version, "version 4.0");
  std::string garbled = npy_bytes(tokens);
  garbled.replace(10, 11, "{'descr' ~ ");
  expect_rejected("garbled.npy", garbled, "bad npy header");
  std::string extra_key = npy_bytes(tokens);
  extra_key.replace(extra_key.find("'fortran_order'"), 15, "'fortran_orden'");
  expect_rejected("extra_key.npy", extra_key, "unexpected key 'fortran_orden'");
}

TEST_F(TokenFilesTest, RejectsOddRawSize) { expect_rejected("odd.bin", raw_bytes({1, 2, 3}) + "x", "odd size 7"); }

TEST_F(TokenFilesTest, RejectsTokensOutsideVocabularyWithOffset) {
  const std::vector<uint16_t> tokens{5, 6, 50257, 8};
  expect_rejected("raw_vocab.bin", raw_bytes(tokens), "token 50257 at offset 2");
  expect_rejected("npy_vocab.npy", npy_bytes(tokens), "token 50257 at offset 2");
  expect_rejected("llmc_vocab.bin", llmc_bytes(tokens), "token 50257 at offset 2");
  expect_rejected("small_vocab.bin", raw_bytes({0, 1, 2, 3, 64, 65}), "token 65 at offset 5", 65);
}

TEST_F(TokenFilesTest, StreamRefusesFilesOfDifferentKinds) {
  // Every kind reads alone; together they are refused, naming both files.
  const auto raw = write("a.bin", raw_bytes(iota_tokens(5, 100)));
  const auto npy = write("b.npy", npy_bytes(iota_tokens(7, 200)));
  const auto llmc = write("c.bin", llmc_bytes(iota_tokens(3, 300)));
  for (const auto& path : {raw, npy, llmc}) EXPECT_NO_THROW(TokenStream({path}, kGpt2Vocab)) << path;
  const std::string message = testing::invalid_argument_message([&] { TokenStream({raw, npy, llmc}, kGpt2Vocab); });
  EXPECT_NE(message.find("mixes formats"), std::string::npos) << message;
  EXPECT_NE(message.find("a.bin' is raw uint16"), std::string::npos) << message;
}

TEST_F(TokenFilesTest, RawTokensAreReadOnlyFromABinName) {
  // An even-sized file of any other name would parse as tokens: a README, a text corpus.
  const auto text = write("notes.txt", raw_bytes(iota_tokens(8, 100)));
  const std::string message = testing::invalid_argument_message([&] { TokenFile(text, kGpt2Vocab); });
  EXPECT_NE(message.find("notes.txt"), std::string::npos) << message;
  EXPECT_NE(message.find("only from a .bin file"), std::string::npos) << message;
  EXPECT_EQ(TokenFile(write("train.bin", raw_bytes(iota_tokens(8, 100))), kGpt2Vocab).format(),
            TokenFileFormat::raw_uint16);
}

TEST_F(TokenFilesTest, RefusesTextUnderABinName) {
  // Each pair of text bytes is a uint16 below GPT-2's vocabulary, so this once trained silently on text.
  std::string ascii;
  for (int i = 0; i < 200; ++i) ascii += "First Citizen:\r\nBefore we proceed any further, hear me speak.\n";
  expect_rejected("ascii.bin", ascii, "printable UTF-8 text");
  std::string utf8;
  for (int i = 0; i < 200; ++i) utf8 += "Gr\xc3\xbc\xc3\x9f Gott, \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80\t\n";
  expect_rejected("utf8.bin", utf8, "printable UTF-8 text");
  // 65536 is not a multiple of 3: the 64 KiB sample ends inside a 3-byte character and is still text.
  std::string cjk;
  for (int i = 0; i < 30000; ++i) cjk += "\xe4\xbd\xa0";
  expect_rejected("cut.bin", cjk, "printable UTF-8 text");
}

TEST_F(TokenFilesTest, RealTokenFilesAreNeverText) {
  // Real text's tokens: a character vocabulary's ids are all below 256 (a NUL high byte); GPT-2's frequent
  // ids are below 8192 (a control high byte). Both must read as tokens.
  const fs::path text_path = testing::test_data_dir() / "tinyshakespeare.txt";
  const fs::path gpt2_dir = testing::test_data_dir() / "gpt2";
  if (!fs::exists(text_path) || !fs::exists(gpt2_dir / "encoder.json")) {
    GTEST_SKIP() << "tinyshakespeare.txt or gpt2/encoder.json absent under " << testing::test_data_dir().string();
  }
  std::ifstream in(text_path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto tokenizer = Gpt2BpeTokenizer::load(gpt2_dir);
  // Every 64 KiB window of the encoded corpus would be a file's first sample; try several starts.
  const std::vector<int32_t> ids = tokenizer.encode(text.substr(0, 400000));
  for (std::size_t start = 0; start + 32768 < ids.size(); start += 7919) {
    std::vector<uint16_t> window;
    for (std::size_t i = start; i < start + 32768; ++i) window.push_back(static_cast<uint16_t>(ids[i]));
    const auto path = write("gpt2_" + std::to_string(start) + ".bin", raw_bytes(window));
    EXPECT_EQ(TokenFile(path, kGpt2Vocab).format(), TokenFileFormat::raw_uint16) << start;
  }
  std::vector<uint16_t> chars;
  for (unsigned char c : text.substr(0, 40000)) chars.push_back(c);
  EXPECT_EQ(TokenFile(write("chars.bin", raw_bytes(chars)), 256).format(), TokenFileFormat::raw_uint16);
}

TEST_F(TokenFilesTest, StreamReadsAcrossFilesAndWrapsAround) {
  // Given out of order; read in name order a, b, c.
  const auto a = iota_tokens(5, 100);
  const auto b = iota_tokens(7, 200);
  const auto c = iota_tokens(3, 300);
  const std::vector<fs::path> paths{write("c.bin", llmc_bytes(c)), write("a.bin", llmc_bytes(a)),
                                    write("b.bin", llmc_bytes(b))};
  const TokenStream stream(paths, kGpt2Vocab);
  ASSERT_EQ(stream.size(), 15u);
  ASSERT_EQ(stream.file_count(), 3u);
  EXPECT_EQ(stream.file(0).path().filename(), "a.bin");
  EXPECT_EQ(stream.file_start(2), 12u);

  std::vector<int64_t> all = widen(a);
  for (auto t : b) all.push_back(t);
  for (auto t : c) all.push_back(t);
  auto expected = [&](uint64_t offset, std::size_t count) {
    std::vector<int64_t> tokens;
    for (std::size_t i = 0; i < count; ++i) tokens.push_back(all[(offset + i) % all.size()]);
    return tokens;
  };
  auto read = [&](uint64_t offset, std::size_t count) {
    std::vector<int64_t> tokens(count, -1);
    stream.read(offset, count, tokens.data());
    return tokens;
  };
  EXPECT_EQ(read(0, 15), all);
  EXPECT_EQ(read(3, 11), expected(3, 11));    // crosses both file boundaries
  EXPECT_EQ(read(10, 8), expected(10, 8));    // crosses the end and wraps to token 0
  EXPECT_EQ(read(14, 40), expected(14, 40));  // wraps more than once
  EXPECT_EQ(read(15 * 3 + 4, 2), expected(4, 2));
  EXPECT_EQ(read(7, 0), std::vector<int64_t>{});
}

TEST_F(TokenFilesTest, StreamRejectsEmptyAndRepeatedLists) {
  EXPECT_THROW(TokenStream({}, kGpt2Vocab), std::invalid_argument);
  const fs::path path = write("a.bin", raw_bytes({1, 2}));
  EXPECT_THROW(TokenStream({path, path}, kGpt2Vocab), std::invalid_argument);
}

TEST_F(TokenFilesTest, ExpandsDirectorySortedWithSplit) {
  write("edufineweb_val_000000.npy", npy_bytes({1}));
  write("edufineweb_train_000002.npy", npy_bytes({2}));
  write("edufineweb_train_000001.npy", npy_bytes({3}));
  write(".edufineweb_train_000003.bin.tmp.1", raw_bytes({4}));
  write("sub/edufineweb_train_000000.npy", npy_bytes({5}));
  EXPECT_EQ(names(expand_token_paths(dir_.string())),
            (std::vector<std::string>{"edufineweb_train_000001.npy", "edufineweb_train_000002.npy",
                                      "edufineweb_val_000000.npy"}));
  EXPECT_EQ(names(expand_token_paths(dir_.string(), "train")),
            (std::vector<std::string>{"edufineweb_train_000001.npy", "edufineweb_train_000002.npy"}));
  EXPECT_EQ(names(expand_token_paths(dir_.string(), "val")), (std::vector<std::string>{"edufineweb_val_000000.npy"}));

  const TokenStream train = TokenStream::from_spec(dir_.string(), kGpt2Vocab, "train");
  std::vector<int64_t> tokens(2);
  train.read(0, 2, tokens.data());
  EXPECT_EQ(tokens, (std::vector<int64_t>{3, 2}));
}

TEST_F(TokenFilesTest, ExpandsGlobSortedAndSingleFile) {
  write("shard_10.bin", raw_bytes({1}));
  write("shard_02.bin", raw_bytes({2}));
  write("shard_1.bin", raw_bytes({3}));
  write("other.bin", raw_bytes({4}));
  fs::create_directories(dir_ / "shard_dir.bin");
  EXPECT_EQ(names(expand_token_paths((dir_ / "shard_*.bin").string())),
            (std::vector<std::string>{"shard_02.bin", "shard_1.bin", "shard_10.bin"}));
  EXPECT_EQ(names(expand_token_paths((dir_ / "shard_?.bin").string())), (std::vector<std::string>{"shard_1.bin"}));
  EXPECT_EQ(names(expand_token_paths((dir_ / "*.bin").string(), "1")),
            (std::vector<std::string>{"shard_1.bin", "shard_10.bin"}));
  // An explicitly named file is taken as is, whatever the split word.
  EXPECT_EQ(names(expand_token_paths((dir_ / "other.bin").string(), "train")), (std::vector<std::string>{"other.bin"}));
}

TEST_F(TokenFilesTest, ExpansionFindingNothingNamesTheSpec) {
  write("train.bin", raw_bytes({1}));
  fs::create_directories(dir_ / "empty");
  const std::vector<std::pair<std::string, std::string>> specs{
      {(dir_ / "missing.bin").string(), ""}, {(dir_ / "nothing_*.bin").string(), ""},
      {(dir_ / "empty").string(), ""},       {dir_.string(), "val"},
      {(dir_ / "*.bin").string(), "val"},
  };
  for (const auto& [spec, split] : specs) {
    try {
      TokenStream::from_spec(spec, kGpt2Vocab, split);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(spec), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(expand_token_paths(""), std::invalid_argument);
}

std::vector<std::string> directory_listing(const fs::path& dir) {
  std::vector<std::string> listing;
  for (const auto& entry : fs::directory_iterator(dir)) listing.push_back(entry.path().filename().string());
  std::sort(listing.begin(), listing.end());
  return listing;
}

TEST_F(TokenFilesTest, ShardWriterRoundTrip) {
  const fs::path out = dir_ / "shards";
  const auto tokens = iota_tokens(10, 1000);
  TokenShardWriter writer(out, "train", 4);
  writer.append(std::span<const uint16_t>(tokens.data(), 3));
  const std::vector<int32_t> middle(tokens.begin() + 3, tokens.begin() + 8);
  writer.append(std::span<const int32_t>(middle));
  EXPECT_EQ(writer.shard_paths().size(), 2u);  // 8 tokens: two full shards, nothing pending
  writer.append(std::span<const uint16_t>(tokens.data() + 8, 2));
  writer.finish();
  writer.finish();
  EXPECT_EQ(writer.tokens_written(), 10u);
  EXPECT_THROW(writer.append(std::span<const uint16_t>(tokens)), std::logic_error);

  EXPECT_EQ(directory_listing(out),
            (std::vector<std::string>{"train_000000.bin", "train_000001.bin", "train_000002.bin"}));
  ASSERT_EQ(writer.shard_paths().size(), 3u);
  const std::vector<uint64_t> counts{4, 4, 2};
  std::vector<int64_t> all;
  for (std::size_t i = 0; i < 3; ++i) {
    const fs::path& path = writer.shard_paths()[i];
    EXPECT_EQ(fs::file_size(path), 1024 + 2 * counts[i]);
    std::ifstream in(path, std::ios::binary);
    int32_t header[3];
    in.read(reinterpret_cast<char*>(header), sizeof(header));
    EXPECT_EQ(header[0], 20240520);
    EXPECT_EQ(header[1], 1);
    EXPECT_EQ(header[2], static_cast<int32_t>(counts[i]));
    const TokenFile file(path, kGpt2Vocab);
    EXPECT_EQ(file.format(), TokenFileFormat::llmc_bin);
    for (auto t : read_file(file)) all.push_back(t);
  }
  EXPECT_EQ(all, widen(tokens));
}

TEST_F(TokenFilesTest, ShardWriterExactMultipleLeavesNoEmptyShard) {
  const auto tokens = iota_tokens(8, 0);
  TokenShardWriter writer(dir_, "val", 4);
  writer.append(std::span<const uint16_t>(tokens));
  writer.finish();
  EXPECT_EQ(directory_listing(dir_), (std::vector<std::string>{"val_000000.bin", "val_000001.bin"}));
}

TEST_F(TokenFilesTest, ShardWriterRejectsBadTokensAndArguments) {
  TokenShardWriter writer(dir_, "train", 4);
  const std::vector<int32_t> bad{1, 2, 65536};
  try {
    writer.append(std::span<const int32_t>(bad));
    ADD_FAILURE() << "token 65536 accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("token 65536 at input index 2"), std::string::npos) << error.what();
  }
  EXPECT_THROW(writer.append(std::span<const int32_t>(std::vector<int32_t>{-1})), std::invalid_argument);
  writer.finish();
  EXPECT_TRUE(writer.shard_paths().empty());
  EXPECT_TRUE(directory_listing(dir_).empty());

  EXPECT_THROW(TokenShardWriter(dir_, "train", 0), std::invalid_argument);
  EXPECT_THROW(TokenShardWriter(dir_, "", 4), std::invalid_argument);
  EXPECT_THROW(TokenShardWriter(dir_, "a/b", 4), std::invalid_argument);
  EXPECT_THROW(TokenShardWriter(dir_, "train", uint64_t{1} << 31), std::invalid_argument);
}

TEST_F(TokenFilesTest, ShardWriterDiscardsUnfinishedShard) {
  const auto tokens = iota_tokens(6, 0);
  {
    TokenShardWriter writer(dir_, "train", 4);
    writer.append(std::span<const uint16_t>(tokens));
    // Destroyed without finish(): the completed shard stays, the partial one
    // and its temporary file vanish.
  }
  EXPECT_EQ(directory_listing(dir_), (std::vector<std::string>{"train_000000.bin"}));
}

TEST_F(TokenFilesTest, ShardWriterLargeShardsSpanSeveralBufferFlushes) {
  std::vector<uint16_t> tokens(1'300'000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>((i * 7919) % kGpt2Vocab);
  TokenShardWriter writer(dir_, "big", 1'200'000);
  for (std::size_t i = 0; i < tokens.size(); i += 100'000) {
    writer.append(std::span<const uint16_t>(tokens.data() + i, 100'000));
  }
  writer.finish();
  const TokenStream stream = TokenStream::from_spec(dir_.string(), kGpt2Vocab, "big");
  ASSERT_EQ(stream.size(), tokens.size());
  std::vector<int64_t> back(tokens.size());
  stream.read(0, back.size(), back.data());
  EXPECT_EQ(back, widen(tokens));
}

}  // namespace
}  // namespace mygpt::token_files_test
