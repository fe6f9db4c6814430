#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "tests/scratch_dir.h"
#include "tests/test_data.h"


namespace mygpt::gpt2_bpe_tokenizer_test {
namespace {

namespace fs = std::filesystem;

const fs::path kSharedData = testing::test_data_dir();
const fs::path kGpt2Dir = kSharedData / "gpt2";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// --- Real OpenAI files -------------------------------------------------------------------------

class RealGpt2Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kGpt2Dir / "encoder.json") || !fs::exists(kGpt2Dir / "vocab.bpe")) {
      GTEST_SKIP() << kGpt2Dir.string() << "/{encoder.json,vocab.bpe} absent; see README";
    }
    static const Gpt2BpeTokenizer shared = Gpt2BpeTokenizer::load(kGpt2Dir);  // loading takes ~0.1 s
    tokenizer = &shared;
  }
  const Gpt2BpeTokenizer* tokenizer = nullptr;
};

TEST_F(RealGpt2Tokenizer, MatchesEveryR50kBaseTestVector) {
  const fs::path vectors = kGpt2Dir / "test_vectors.gpt-tokenizer.txt";
  if (!fs::exists(vectors)) GTEST_SKIP() << vectors.string() << " absent; see README";
  std::istringstream lines(read_file(vectors));
  std::string name_line, sample_line, encoded_line, blank;
  int checked = 0;
  while (std::getline(lines, name_line)) {
    if (!name_line.starts_with("EncodingName: ")) continue;
    ASSERT_TRUE(std::getline(lines, sample_line) && std::getline(lines, encoded_line));
    if (name_line != "EncodingName: r50k_base") continue;
    ASSERT_TRUE(sample_line.starts_with("Sample:")) << sample_line;
    ASSERT_TRUE(encoded_line.starts_with("Encoded: ")) << encoded_line;
    const std::string sample = sample_line.size() > 8 ? sample_line.substr(8) : "";
    const auto expected = nlohmann::json::parse(encoded_line.substr(9)).get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = tokenizer->encode(sample);
    EXPECT_EQ(ids, expected) << "sample: " << sample;
    EXPECT_EQ(tokenizer->decode(ids), sample);
    ++checked;
  }
  EXPECT_EQ(checked, 64);  // gpt-tokenizer's r50k_base blocks, the first one with an empty sample
}

TEST_F(RealGpt2Tokenizer, KnownIdsAndEndOfText) {
  EXPECT_EQ(tokenizer->vocab_size(), 50257u);
  EXPECT_EQ(tokenizer->eot_token(), 50256);
  EXPECT_EQ(tokenizer->token_bytes(50256), "<|endoftext|>");
  EXPECT_EQ(tokenizer->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tokenizer->encode("a  b"), (std::vector<int32_t>{64, 220, 275}));  // "a", " ", " b"

  EXPECT_EQ(tokenizer->encode("a<|endoftext|>b", true), (std::vector<int32_t>{64, 50256, 65}));
  EXPECT_EQ(tokenizer->encode("<|endoftext|><|endoftext|>", true), (std::vector<int32_t>{50256, 50256}));
  const std::vector<int32_t> as_text = tokenizer->encode("a<|endoftext|>b");
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), 50256), 0);
  EXPECT_EQ(tokenizer->decode(as_text), "a<|endoftext|>b");
  // Whitespace before a special token is split as at the end of a text, as tiktoken does.
  const std::vector<int32_t> special = tokenizer->encode("x \n<|endoftext|> y", true);
  EXPECT_EQ(tokenizer->decode(special), "x \n<|endoftext|> y");

  std::vector<int32_t> appended = {7};
  tokenizer->encode_append("Hello world", appended);
  EXPECT_EQ(appended, (std::vector<int32_t>{7, 15496, 995}));
}

TEST_F(RealGpt2Tokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  EXPECT_THROW(tokenizer->decode(std::vector<int32_t>{50257}), std::invalid_argument);
  EXPECT_THROW(tokenizer->decode(std::vector<int32_t>{-1}), std::invalid_argument);
}

TEST_F(RealGpt2Tokenizer, RoundTripsAnyBytes) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  const std::vector<std::string> samples = {"",
                                            " ",
                                            "\n\n\n",
                                            "  \t \n x  \n",
                                            "it's I'm we'll they'd you've 'S",
                                            "1234567 8.9e10",
                                            "caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80",  // é — 😀
                                            "a\xE1\xA0\x8E"
                                            "b",  // U+180E is not White_Space for Python's regex
                                            "\xFF\xFE abc \xC3",
                                            "abc\xE2\x82",  // invalid UTF-8 and a cut-off character
                                            every_byte,
                                            std::string(1000, ' ') + "x" + std::string(3000, 'q')};
  for (const std::string& s : samples) {
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(s)), s) << "sample of " << s.size() << " bytes";
  }
}

TEST_F(RealGpt2Tokenizer, TinyShakespeareRoundTripAndTokenCounts) {
  const fs::path path = kSharedData / "tinyshakespeare.txt";
  if (!fs::exists(path)) GTEST_SKIP() << path.string() << " absent; see README";
  const std::string text = read_file(path);
  const std::vector<int32_t> ids = tokenizer->encode(text);
  std::printf("[ info ] tinyshakespeare.txt: %zu bytes -> %zu tokens as one string\n", text.size(), ids.size());
  EXPECT_EQ(ids.size(), 338025u);  // also what an independent Python encoder.py-style encoder gives
  EXPECT_EQ(tokenizer->decode(ids), text);

  // llm.c's dev/data/tinyshakespeare.py: <|endoftext|> before every "\n\n"-separated section, and
  // "\n\n" given back to every section but the last. llm.c's README reports 32768 + 305260 tokens.
  std::vector<int32_t> llmc;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find("\n\n", start);
    llmc.push_back(tokenizer->eot_token());
    if (end == std::string::npos) {
      tokenizer->encode_append(std::string_view(text).substr(start), llmc);
      break;
    }
    tokenizer->encode_append(std::string_view(text).substr(start, end + 2 - start), llmc);
    start = end + 2;
  }
  EXPECT_EQ(llmc.size(), 338028u);
}

// --- Small generated vocabularies: merge order and every way loading can fail --------------------

// OpenAI's bytes_to_unicode(), written out again here so the test does not trust the code it tests.
std::string spell_byte(unsigned char byte) {
  static const std::vector<std::string> spellings = [] {
    std::vector<std::string> result(256);
    int substitute = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const int cp = printable ? b : substitute++;
      result[b] = cp < 0x80 ? std::string(1, static_cast<char>(cp))
                            : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    return result;
  }();
  return spellings[byte];
}

std::string spell(std::string_view bytes) {
  std::string spelled;
  for (const char c : bytes) spelled += spell_byte(static_cast<unsigned char>(c));
  return spelled;
}

// A complete, valid vocabulary: byte b has id b, `leading` merges (raw bytes) come first, filler
// merges of two bytes that are not lowercase letters make up 50000 merges, and padding tokens make up 50257 entries.
struct GeneratedVocab {
  nlohmann::json encoder = nlohmann::json::object();
  std::vector<std::string> merge_lines;

  explicit GeneratedVocab(const std::vector<std::pair<std::string, std::string>>& leading) {
    for (int b = 0; b < 256; ++b) encoder[spell_byte(static_cast<unsigned char>(b))] = b;
    const auto add_merge = [&](const std::string& left, const std::string& right) {
      merge_lines.push_back(left + " " + right);
      if (!encoder.contains(left + right)) encoder[left + right] = encoder.size();
    };
    for (const auto& [left, right] : leading) add_merge(spell(left), spell(right));
    const auto is_letter = [](int b) { return b >= 'a' && b <= 'z'; };
    for (int x = 0; x < 256 && merge_lines.size() < Gpt2BpeTokenizer::kMergeCount; ++x) {
      for (int y = 0; y < 256 && merge_lines.size() < Gpt2BpeTokenizer::kMergeCount; ++y) {
        if (!is_letter(x) && !is_letter(y)) add_merge(spell_byte(x), spell_byte(y));
      }
    }
    for (int pad = 0; encoder.size() < Gpt2BpeTokenizer::kVocabSize - 1; ++pad) {
      encoder[spell("~~~" + std::to_string(pad))] = encoder.size();
    }
    encoder["<|endoftext|>"] = Gpt2BpeTokenizer::kEndOfTextId;
  }

  std::string vocab_bpe() const {
    std::string text = "#version: 0.2\n";
    for (const std::string& line : merge_lines) text += line + "\n";
    return text;
  }
  int32_t id(std::string_view bytes) const { return encoder.at(spell(bytes)).get<int32_t>(); }
  void write(const fs::path& dir) const {
    write_file(dir / "encoder.json", encoder.dump());
    write_file(dir / "vocab.bpe", vocab_bpe());
  }
};

TEST(Gpt2BpeTokenizerMerges, FollowEncoderPyOrder) {
  // "abc ab" ranks before "ab c" but needs "abc", which only "ab c" can make here. encoder.py merges
  // every "ab c" of a round before it looks at new pairs, so "abcabc" stays two tokens; merging one
  // pair at a time would give "abcab" + "c".
  const GeneratedVocab vocab({{"a", "b"}, {"a", "bc"}, {"abc", "ab"}, {"ab", "c"}, {"b", "c"}, {"a", "a"}});
  const ScratchDir dir;
  vocab.write(dir.path());
  const Gpt2BpeTokenizer tokenizer = Gpt2BpeTokenizer::load(dir.path());
  EXPECT_EQ(tokenizer.encode("abcabc"), (std::vector<int32_t>{vocab.id("abc"), vocab.id("abc")}));
  EXPECT_EQ(tokenizer.encode("abc"), (std::vector<int32_t>{vocab.id("abc")}));
  EXPECT_EQ(tokenizer.encode("bc"), (std::vector<int32_t>{vocab.id("bc")}));
  EXPECT_EQ(tokenizer.encode("aaa"), (std::vector<int32_t>{vocab.id("aa"), vocab.id("a")}));  // leftmost first
  EXPECT_EQ(tokenizer.encode("aaaa"), (std::vector<int32_t>{vocab.id("aa"), vocab.id("aa")}));
  // Merges never cross pre-tokens: " ab" is " " + "ab".
  EXPECT_EQ(tokenizer.encode("ab ab"), (std::vector<int32_t>{vocab.id("ab"), vocab.id(" "), vocab.id("ab")}));
  EXPECT_EQ(tokenizer.encode("zq"), (std::vector<int32_t>{'z', 'q'}));
}

// Loading must fail with std::invalid_argument whose one-line message holds every fragment.
void expect_load_error(const fs::path& dir, std::initializer_list<std::string_view> fragments) {
  try {
    Gpt2BpeTokenizer::load(dir);
    ADD_FAILURE() << "load() accepted a bad tokenizer directory";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const std::string_view fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

// The first filler merge's token: bytes 0 and 0.
const std::string kFirstFiller = spell_byte(0) + spell_byte(0);

class Gpt2BpeTokenizerErrors : public ::testing::Test {
 protected:
  static const GeneratedVocab& vocab() {
    static const GeneratedVocab shared({});
    return shared;
  }
  ScratchDir dir;
};

TEST_F(Gpt2BpeTokenizerErrors, MissingDirectoryOrFile) {
  expect_load_error(dir.path() / "nowhere", {"nowhere", "directory not found"});
  write_file(dir.path() / "vocab.bpe", vocab().vocab_bpe());
  expect_load_error(dir.path(), {"encoder.json", "does not exist"});
  fs::remove(dir.path() / "vocab.bpe");
  write_file(dir.path() / "encoder.json", vocab().encoder.dump());
  expect_load_error(dir.path(), {"vocab.bpe", "does not exist"});
}

TEST_F(Gpt2BpeTokenizerErrors, MalformedOrTruncatedEncoderJson) {
  write_file(dir.path() / "vocab.bpe", vocab().vocab_bpe());
  write_file(dir.path() / "encoder.json", R"({"a": 1,, "b": 2})");
  expect_load_error(dir.path(), {"encoder.json", "malformed JSON"});
  const std::string json = vocab().encoder.dump();
  write_file(dir.path() / "encoder.json", json.substr(0, json.size() / 2));
  expect_load_error(dir.path(), {"encoder.json", "truncated"});
  write_file(dir.path() / "encoder.json", "[1, 2]");
  expect_load_error(dir.path(), {"encoder.json", "JSON object"});
  // Found by fuzzing: a number beyond every type is nlohmann's out_of_range, not a parse error.
  write_file(dir.path() / "encoder.json", R"({"a": 5555555555555555555555e555555555})");
  expect_load_error(dir.path(), {"encoder.json", "malformed JSON"});
}

TEST_F(Gpt2BpeTokenizerErrors, WrongEncoderJsonContents) {
  write_file(dir.path() / "vocab.bpe", vocab().vocab_bpe());
  write_file(dir.path() / "encoder.json", R"({"a": 0, "b": 1, "<|endoftext|>": 2})");
  expect_load_error(dir.path(), {"encoder.json", "expected 50257 tokens, found 3"});

  nlohmann::json bad_id = vocab().encoder;
  bad_id[kFirstFiller] = "seven";
  write_file(dir.path() / "encoder.json", bad_id.dump());
  expect_load_error(dir.path(), {"encoder.json", "has id \"seven\""});

  nlohmann::json duplicate_id = vocab().encoder;
  duplicate_id[kFirstFiller] = 0;
  write_file(dir.path() / "encoder.json", duplicate_id.dump());
  expect_load_error(dir.path(), {"encoder.json", "id 0 is used twice"});

  nlohmann::json raw_space = vocab().encoder;
  raw_space["a b"] = raw_space[kFirstFiller];  // a raw space is outside the byte alphabet (space is U+0120)
  raw_space.erase(kFirstFiller);
  write_file(dir.path() / "encoder.json", raw_space.dump());
  expect_load_error(dir.path(), {"encoder.json", "\"a b\"", "byte alphabet"});
}

TEST_F(Gpt2BpeTokenizerErrors, BadVocabBpe) {
  write_file(dir.path() / "encoder.json", vocab().encoder.dump());
  const std::string good = vocab().vocab_bpe();
  const std::string without_header = good.substr(good.find('\n') + 1);

  write_file(dir.path() / "vocab.bpe", without_header);
  expect_load_error(dir.path(), {"vocab.bpe:1:", "#version"});
  write_file(dir.path() / "vocab.bpe", "");
  expect_load_error(dir.path(), {"vocab.bpe", "#version"});

  const std::string one_merge_short = good.substr(0, good.rfind('\n', good.size() - 2) + 1);
  write_file(dir.path() / "vocab.bpe", one_merge_short);
  expect_load_error(dir.path(), {"vocab.bpe", "expected 50000 merges, found 49999"});

  write_file(dir.path() / "vocab.bpe", good.substr(0, good.size() - 3));  // cut inside the last line
  expect_load_error(dir.path(), {"vocab.bpe", "truncated"});
  write_file(dir.path() / "vocab.bpe", good.substr(0, good.size() - 1));  // only the final newline gone
  expect_load_error(dir.path(), {"vocab.bpe", "truncated"});

  write_file(dir.path() / "vocab.bpe", "#version: 0.2\n" + spell("a") + " " + spell("zz") + "\n");
  expect_load_error(dir.path(), {"vocab.bpe:2:", "missing from encoder.json"});
  write_file(dir.path() / "vocab.bpe", "#version: 0.2\nab\n");
  expect_load_error(dir.path(), {"vocab.bpe:2:", "two tokens"});
  write_file(dir.path() / "vocab.bpe", good + vocab().merge_lines.front() + "\n");
  expect_load_error(dir.path(), {"vocab.bpe:50002:", "more than 50000 merges"});

  const std::string duplicated = "#version: 0.2\n" + vocab().merge_lines.front() + "\n" + without_header;
  write_file(dir.path() / "vocab.bpe", duplicated.substr(0, duplicated.rfind('\n', duplicated.size() - 2) + 1));
  expect_load_error(dir.path(), {"vocab.bpe:3:", "duplicate merge"});
}

}  // namespace
}  // namespace mygpt::gpt2_bpe_tokenizer_test
