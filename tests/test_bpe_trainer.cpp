// The BPE trainer (tokenizer/bpe_trainer.h): merges by hand on a text whose counts tie, nanochat's document
// cap and character budget, the refusals; and, where the venv has them, the same merges and ranks as
// rustbpe on Tiny Shakespeare and on random Unicode text (vocabularies 300, 1024 and 4096, each named
// pattern), and the ids of the tokenizer.json written equal to tokenizers' on it and tiktoken's with
// rustbpe's ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "tests/reference_python.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/hf_bpe_tokenizer.h"

namespace mygpt::bpe_trainer_test {
namespace {

namespace fs = std::filesystem;
using testing::invalid_argument_message;
using testing::python_imports;
using testing::run_python_json;

const fs::path kData = testing::test_data_dir();
const std::string kScript = (fs::path(MYGPT_HF_REFERENCE_SCRIPT).parent_path() / "bpe_trainer_reference.py").string();

TrainedBpe train(const std::vector<std::string>& docs, std::size_t vocab, const std::string& pattern,
                 std::vector<std::string> specials = {}, int threads = 2) {
  BpeTrainingOptions options;
  options.split_regex = *named_split_pattern(pattern);
  options.vocab_size = vocab;
  options.special_tokens = std::move(specials);
  options.threads = threads;
  BpeTrainer trainer(options);
  for (const auto& doc : docs) trainer.add(doc, true);
  return trainer.finish();
}

std::vector<std::string> learned_bytes(const TrainedBpe& trained) {
  return {trained.token_bytes.begin() + 256, trained.token_bytes.end()};
}

// Counts that tie, worked by hand with GPT-2's pattern: "ab", " ab", " cd" x2 give (' ','c'), (a,b) and
// (c,d) twice each; the smallest pair wins, ' ' (32) before 'a' (97) before 'c' (99). Then " cd" is
// [256, d]: (256, d) and (a, b) tie, and (97, 98) is the smaller. Then (256, d), then (' ', 257).
TEST(BpeTrainer, TiesGoToTheSmallestPairAsInRustbpe) {
  const TrainedBpe trained = train({"ab ab cd cd"}, 256 + 4, "gpt2");
  EXPECT_EQ(learned_bytes(trained), (std::vector<std::string>{" c", "ab", " cd", " ab"}));
  ASSERT_EQ(trained.merges.size(), 4u);
  EXPECT_EQ(trained.merges[2].left, 256u);
  EXPECT_EQ(trained.merges[2].right, static_cast<uint32_t>('d'));
  EXPECT_EQ(trained.merges[3].right, 257u);
  // No pair is left after those: the vocabulary stops short of the size asked for.
  EXPECT_EQ(train({"ab ab cd cd"}, 256 + 50, "gpt2").merges.size(), 4u);
  // Counting threads change nothing (on Tiny Shakespeare where the data has it, else on generated English).
  const std::string text = fs::exists(kData / "tinyshakespeare.txt")
                               ? read_whole_file(kData / "tinyshakespeare.txt", "test").substr(0, 200000)
                               : testing::generated_english(200000);
  EXPECT_EQ(learned_bytes(train({text}, 700, "gpt4", {}, 1)), learned_bytes(train({text}, 700, "gpt4", {}, 3)));
}

// nanochat's tok_train: each document cut to doc_cap characters (code points), documents taken until the
// characters passed max_chars, the one that passes it whole.
TEST(BpeTrainer, DocumentCapAndCharacterBudgetAsNanochatsTokTrain) {
  BpeTrainingOptions options;
  options.split_regex = *named_split_pattern("gpt4");
  options.vocab_size = 300;
  options.doc_cap = 3;
  options.max_chars = 5;
  BpeTrainer trainer(options);
  EXPECT_TRUE(trainer.add("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", true));  // "éééé": 3 characters of 4
  EXPECT_TRUE(trainer.add("xy", true));
  EXPECT_TRUE(trainer.add("z", false));  // the same document: its cap holds across pieces
  EXPECT_TRUE(trainer.add("w", false));  // beyond the cap
  EXPECT_FALSE(trainer.add("qqq", true));  // 6 characters passed 5: no more documents
  const TrainedBpe trained = trainer.finish();
  EXPECT_EQ(trained.characters, 6u);
  EXPECT_EQ(trained.documents, 2u);
  // Chunks "ééé" and "xy", "z" (pieces are split apart): é's two bytes twice, then (é, é) once per chunk...
  ASSERT_FALSE(trained.merges.empty());
  EXPECT_EQ(trained.token_bytes[256], "\xc3\xa9");
}

TEST(BpeTrainer, RefusesBadOptionsAndEmptyInput) {
  BpeTrainingOptions options;
  options.split_regex = *named_split_pattern("gpt4");
  options.vocab_size = 257;
  options.special_tokens = {"<|bos|>", "<|eos|>"};
  EXPECT_NE(invalid_argument_message([&] { BpeTrainer t(options); }).find("--vocab-size 257 is below 256 bytes + 2"),
            std::string::npos);
  options.vocab_size = 300;
  options.special_tokens = {"<|bos|>", "<|bos|>"};
  EXPECT_NE(invalid_argument_message([&] { BpeTrainer t(options); }).find("given twice"), std::string::npos);
  // Issue 64: `--special the` was taken, and tokenizers would cut every "the" out of every document.
  for (const char* plain : {"the", "<|a b|>", "<>", "<|bos|", "[x"}) {
    options.special_tokens = {plain};
    EXPECT_NE(invalid_argument_message([&] { BpeTrainer t(options); }).find("must be marked off"), std::string::npos)
        << plain;
  }
  for (const char* marked : {"<|endoftext|>", "<s>", "[CLS]"}) EXPECT_TRUE(has_special_form(marked)) << marked;
  options.special_tokens = {};
  options.split_regex = "(unclosed";
  EXPECT_NE(invalid_argument_message([&] { BpeTrainer t(options); }).find("--pattern"), std::string::npos);
  options.split_regex = *named_split_pattern("gpt4");
  BpeTrainer empty(options);
  empty.add("", true);
  EXPECT_NE(invalid_argument_message([&] { empty.finish(); }).find("no text"), std::string::npos);
  EXPECT_FALSE(named_split_pattern("gpt5").has_value());
}

class BpeTrainerVersusRustbpe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!python_imports("rustbpe, tiktoken, tokenizers"))
      GTEST_SKIP() << "Python with rustbpe, tiktoken and tokenizers not found: no reference to compare with";
  }

  // Our learned bytes and rustbpe's, for each vocabulary and named pattern, on these documents.
  void expect_rustbpes_merges(const std::vector<std::string>& docs) {
    const fs::path docs_path = dir_.path() / "docs.json";
    write_file_atomically(docs_path, nlohmann::json(docs).dump());
    nlohmann::json jobs = nlohmann::json::array();
    std::vector<std::vector<std::string>> ours;
    for (const char* pattern : {"gpt4", "gpt2", "nanochat"}) {
      for (const std::size_t vocab : {300, 1024, 4096}) {
        jobs.push_back({{"docs", docs_path.string()}, {"vocab", vocab}, {"pattern", *named_split_pattern(pattern)}});
        std::vector<std::string> hex;
        for (const std::string& bytes : learned_bytes(train(docs, vocab, pattern))) {
          std::string h;
          for (const unsigned char c : bytes) h += "0123456789abcdef"[c >> 4], h += "0123456789abcdef"[c & 15];
          hex.push_back(h);
        }
        ours.push_back(hex);
      }
    }
    const fs::path jobs_path = dir_.path() / "jobs.json", out = dir_.path() / "ranks.json";
    write_file_atomically(jobs_path, jobs.dump());
    ASSERT_FALSE(run_python_json(kScript, {"rustbpe", jobs_path.string(), out.string()}, dir_.path()).is_null());
    const auto theirs = nlohmann::json::parse(read_whole_file(out, "test"));
    ASSERT_EQ(theirs.size(), ours.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
      const auto expected = theirs[i].get<std::vector<std::string>>();
      ASSERT_EQ(ours[i].size(), expected.size()) << jobs[i]["pattern"] << " vocab " << jobs[i]["vocab"];
      for (std::size_t k = 0; k < expected.size(); ++k) {
        ASSERT_EQ(ours[i][k], expected[k]) << "id " << 256 + k << ", " << jobs[i]["pattern"] << " vocab " << jobs[i]["vocab"];
      }
    }
  }

  ScratchDir dir_;
};

TEST_F(BpeTrainerVersusRustbpe, SameMergesOnTinyShakespeare) {
  if (!fs::exists(kData / "tinyshakespeare.txt")) GTEST_SKIP() << "Tiny Shakespeare absent";
  expect_rustbpes_merges({read_text_file(kData / "tinyshakespeare.txt", "test")});
}

TEST_F(BpeTrainerVersusRustbpe, SameMergesOnRandomUnicode) {
  const fs::path docs = dir_.path() / "random.json";
  ASSERT_FALSE(run_python_json(kScript, {"random-docs", docs.string()}, dir_.path()).is_null());
  expect_rustbpes_merges(nlohmann::json::parse(read_whole_file(docs, "test")).get<std::vector<std::string>>());
}

// The tokenizer.json written: tokenizers gives our ids on it (HfBpeTokenizer, the loader every command
// uses), and so does tiktoken with rustbpe's ranks, as nanochat encodes; the special tokens included.
TEST_F(BpeTrainerVersusRustbpe, TokenizersAndTiktokenGiveOurIds) {
  if (!fs::exists(kData / "tinyshakespeare.txt")) GTEST_SKIP() << "Tiny Shakespeare absent";
  const std::string text = read_text_file(kData / "tinyshakespeare.txt", "test");
  const fs::path random_path = dir_.path() / "random.json";
  ASSERT_FALSE(run_python_json(kScript, {"random-docs", random_path.string()}, dir_.path()).is_null());
  auto texts = nlohmann::json::parse(read_whole_file(random_path, "test")).get<std::vector<std::string>>();
  texts.push_back(text);
  texts.push_back("<|bos|>Hello world<|user_start|>It's 12345 o'clock\r\n\n  x");
  const TrainedBpe trained = train({text}, 4096, "nanochat", nanochat_special_tokens());
  const fs::path tokenizer_json = dir_.path() / "tokenizer.json", texts_path = dir_.path() / "texts.json";
  const fs::path docs_path = dir_.path() / "docs.json", job_path = dir_.path() / "job.json", out = dir_.path() / "ids.json";
  write_file_atomically(tokenizer_json, trained.tokenizer_json());
  write_file_atomically(texts_path, nlohmann::json(texts).dump());
  write_file_atomically(docs_path, nlohmann::json(std::vector<std::string>{text}).dump());
  // rustbpe learns the vocabulary without the special tokens, as nanochat asks it to.
  write_file_atomically(job_path, nlohmann::json{{"docs", docs_path.string()},
                                                 {"vocab", 4096 - nanochat_special_tokens().size()},
                                                 {"pattern", *named_split_pattern("nanochat")}}
                                       .dump());
  ASSERT_FALSE(run_python_json(kScript, {"ids", tokenizer_json.string(), job_path.string(), texts_path.string(),
                                         out.string()},
                                dir_.path())
                   .is_null());
  const auto theirs = nlohmann::json::parse(read_whole_file(out, "test"));
  const HfBpeTokenizer ours = HfBpeTokenizer::load(tokenizer_json);
  EXPECT_EQ(ours.vocab_size(), 4096u);
  EXPECT_EQ(ours.token_id("<|bos|>"), 4096 - 9);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto ids = ours.encode(texts[i]);
    ASSERT_EQ(ids, theirs["tokenizers"][i].get<std::vector<int32_t>>()) << "text " << i;
    ASSERT_EQ(ids, theirs["tiktoken"][i].get<std::vector<int32_t>>()) << "text " << i;
  }
}

}  // namespace
}  // namespace mygpt::bpe_trainer_test
