// prepare cuts a long document into pieces that are tokenized apart; the ids of the pieces must be the
// reference's ids of the whole document, with special tokens' text as text (encode_ordinary). Judged by
// `tokenizers` itself for a tokenizer.json, over three texts of ~50 pieces each (LF lines, the same with CRLF,
// CJK lines with LF and CRLF) whose lines start and end with what a cut sits between, for every pre-tokenizer
// and added-token flag the reader accepts: where a cut is proven (GPT-2's, Llama 3's, Qwen2's, nanochat's
// patterns) the text is cut, elsewhere it stays whole; either way the ids are the reference's. GPT-2's own
// tokenizer is judged by tiktoken's encode_ordinary on the same texts, and so is `train` on a text file.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "dataloader/document_reader.h"
#include "dataloader/parallel_encoder.h"
#include "dataloader/training_data.h"
#include "tests/reference_python.h"
#include "tests/scratch_dir.h"
#include "tests/test_data.h"
#include "tokenizer/text_codec.h"

namespace mygpt::document_cuts_test {
namespace {

namespace fs = std::filesystem;
using testing::python_imports;
using testing::run_python_json;

const std::string kScript = (fs::path(MYGPT_HF_REFERENCE_SCRIPT).parent_path() / "tokenizer_reference.py").string();

// The tokenizers whose definition proves cuts (at "x\n|y", or only at "x\n| y" after a prefix space).
// The texts of tokenizer_reference.py's long-text: LF lines, the same lines with CRLF, CJK lines.
const std::vector<std::string> kTexts = {"long", "crlf", "cjk"};

const std::set<std::string> kCut = {"gpt4",  "byte_level_regex", "gpt2_split", "llama3",        "qwen2_after_digits",
                                    "lstrip", "rstrip",          "lstrip_special", "prefix_space", "split_then_prefix_space",
                                    "added_tokens", "ignore_merges", "nfc",  "nfkc", "sequence_nfc", "gpt2"};

// Whether a tokenizer cuts a text: those of kCut, and at CRLF line ends all but ByteLevel's prefix space
// before its own split (which cuts only before a line that starts with a space; after a Split, as in
// split_then_prefix_space, the tight cuts hold).
bool cuts_text(const std::string& tokenizer, const std::string& text) {
  if (!kCut.contains(tokenizer)) return false;
  return text != "crlf" || tokenizer != "prefix_space";
}

// The pieces DocumentReader cuts `document` into under `codec`'s restarts_at, and their ids as prepare encodes
// them (without the delimiter before the document).
std::vector<int32_t> piecewise_ids(const TextCodec& codec, const fs::path& document, std::size_t& pieces) {
  constexpr std::size_t kPieceBytes = 2048;  // prepare's are 1 MiB: the same cuts, 50 of them in 100 KB
  DocumentReader reader(document.string(), {.piece_bytes = kPieceBytes, .restarts_at = [&codec](std::string_view t,
                                                                                                 std::size_t cut) {
                                              return codec.restarts_at(t, cut);
                                            }});
  std::vector<TextPiece> batch;
  while (auto piece = reader.next()) batch.push_back(std::move(*piece));
  pieces = batch.size();
  std::vector<int32_t> ids = encode_batch(codec, batch);
  if (codec.end_of_text() >= 0) ids.erase(ids.begin());  // prepare's delimiter before the document
  return ids;
}

std::string first_difference(const std::vector<int32_t>& ids, const std::vector<int32_t>& want) {
  std::size_t first = 0;
  while (first < ids.size() && first < want.size() && ids[first] == want[first]) ++first;
  return "ids differ from token " + std::to_string(first) + " of " + std::to_string(want.size());
}

TEST(DocumentCutsVersusTokenizers, PiecesGiveTheWholeDocumentsIdsForEveryPreTokenizerAndAddedTokenFlag) {
  if (!python_imports("tokenizers")) GTEST_SKIP() << "Python with `tokenizers` not found: no reference to compare with";
  const ScratchDir dir;
  const fs::path training = testing::tokenizer_training_text(dir.path());
  std::vector<fs::path> tokenizers;  // folders holding a tokenizer.json
  const fs::path gpt4 = dir.path() / "gpt4";
  ASSERT_FALSE(run_python_json(kScript, {"make-gpt4", training.string(), gpt4.string()}, dir.path()).is_null());
  tokenizers.push_back(gpt4);
  for (const char* mode : {"variants", "cut-variants"}) {
    const fs::path out = dir.path() / mode;
    ASSERT_FALSE(run_python_json(kScript, {mode, gpt4.string(), out.string()}, dir.path()).is_null());
    for (const auto& entry : fs::directory_iterator(out)) tokenizers.push_back(entry.path());
  }
  const fs::path normalized = dir.path() / "normalized";
  ASSERT_FALSE(
      run_python_json(kScript, {"make-normalized", training.string(), normalized.string()}, dir.path()).is_null());
  for (const auto& entry : fs::directory_iterator(normalized)) tokenizers.push_back(entry.path());
  if (const fs::path gpt2_files = testing::test_data_dir() / "gpt2"; fs::exists(gpt2_files / "encoder.json")) {
    ASSERT_FALSE(run_python_json(kScript, {"make-gpt2", gpt2_files.string(), (dir.path() / "gpt2").string()},
                                 dir.path())
                     .is_null());
    tokenizers.push_back(dir.path() / "gpt2");
  }
  EXPECT_EQ(tokenizers.size(), 26u + (fs::exists(testing::test_data_dir() / "gpt2" / "encoder.json") ? 1 : 0));

  const fs::path texts = dir.path() / "long.json";
  ASSERT_FALSE(run_python_json(kScript, {"long-text", texts.string()}, dir.path()).is_null());
  const auto text_json = nlohmann::json::parse(read_whole_file(texts, "test"));
  std::map<std::string, fs::path> documents;
  for (const std::string& text : kTexts) documents[text] = dir.write(text + ".txt", text_json[text].get<std::string>());

  for (const fs::path& folder : tokenizers) {
    const std::string name = folder.filename().string();
    SCOPED_TRACE(name);
    const fs::path answer = dir.path() / ("reference_" + name + ".json");
    // Special tokens' text is text (tokenizers' encode_special_tokens), as prepare encodes documents.
    ASSERT_FALSE(run_python_json(kScript, {"encode-specials-as-text", (folder / "tokenizer.json").string(),
                                           texts.string(), answer.string()},
                                 dir.path())
                     .is_null());
    const auto reference = nlohmann::json::parse(read_whole_file(answer, "test"));
    const auto codec = make_text_codec(TokenizerKind::hf, folder.string());
    for (const std::string& text : kTexts) {
      SCOPED_TRACE(text);
      const auto want = reference[text]["ids"].get<std::vector<int32_t>>();
      std::size_t pieces = 0;
      const std::vector<int32_t> ids = piecewise_ids(*codec, documents[text], pieces);
      EXPECT_EQ(ids, want) << first_difference(ids, want) << " (" << pieces << " pieces)";
      if (cuts_text(name, text)) {
        EXPECT_GT(pieces, 20u) << "a tokenizer whose definition proves cuts is tokenized in pieces";
      } else {
        EXPECT_EQ(pieces, 1u) << "no cut is proven for this pre-tokenizer: the document stays whole";
      }
    }
  }
}

// GPT-2's tokenizer (encoder.json, vocab.bpe) against tiktoken's encode_ordinary on the three texts: cut into
// ~50 pieces each (LF, CRLF and CJK line ends alike), with the ids of the whole; a literal <|endoftext|> in
// them is text. And `train` on a text file encodes it as tiktoken's encode_ordinary does.
TEST(DocumentCutsVersusTiktoken, Gpt2PiecesAndTrainingTextGiveEncodeOrdinaryIds) {
  const fs::path gpt2 = testing::test_data_dir() / "gpt2";
  if (!fs::exists(gpt2 / "encoder.json")) GTEST_SKIP() << "GPT-2's tokenizer files are not in the test data";
  if (!python_imports("tiktoken, numpy")) GTEST_SKIP() << "Python with `tiktoken` not found: no reference to compare with";
  const ScratchDir dir;
  const fs::path texts = dir.path() / "long.json";
  ASSERT_FALSE(run_python_json(kScript, {"long-text", texts.string()}, dir.path()).is_null());
  const fs::path answer = dir.path() / "tiktoken.json";
  ASSERT_FALSE(
      run_python_json(kScript, {"tiktoken-gpt2", gpt2.string(), texts.string(), answer.string()}, dir.path()).is_null());
  const auto text_json = nlohmann::json::parse(read_whole_file(texts, "test"));
  const auto reference = nlohmann::json::parse(read_whole_file(answer, "test"));
  const auto codec = make_text_codec(TokenizerKind::gpt2, gpt2.string());
  for (const std::string& text : kTexts) {
    SCOPED_TRACE(text);
    const auto want = reference[text]["ids"].get<std::vector<int32_t>>();
    const fs::path document = dir.write(text + ".txt", text_json[text].get<std::string>());
    std::size_t pieces = 0;
    const std::vector<int32_t> ids = piecewise_ids(*codec, document, pieces);
    EXPECT_EQ(ids, want) << first_difference(ids, want) << " (" << pieces << " pieces)";
    EXPECT_GT(pieces, 20u) << "GPT-2's tokenizer restarts at these line ends: the text is cut";

    DataOptions options;
    options.data = document.string();
    options.tokenizer = TokenizerKind::gpt2;
    options.vocab = gpt2.string();
    const TrainingData data = load_training_data(options);  // val_fraction 0: every token trains
    std::vector<int64_t> trained(data.train->size());
    data.train->read(0, trained.size(), trained.data());
    EXPECT_EQ(std::vector<int32_t>(trained.begin(), trained.end()), want) << "train on a text file";
  }
}

}  // namespace
}  // namespace mygpt::document_cuts_test
