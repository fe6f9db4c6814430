// prepare cuts a long document into pieces that are tokenized apart; with a tokenizer.json the ids of
// the pieces must be `tokenizers`' ids of the whole document. Judged by `tokenizers` itself, over a text
// of ~50 pieces (100 KB) whose lines start and end with what a cut sits between, for every pre-tokenizer and
// added-token flag the reader accepts: where a cut is proven (GPT-2's, Llama 3's, Qwen2's, nanochat's
// patterns) the text is cut, elsewhere it stays whole; either way the ids are the reference's.
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
#include "tests/reference_python.h"
#include "tests/scratch_dir.h"
#include "tests/test_data.h"
#include "tokenizer/text_codec.h"

namespace mygpt {
namespace {

namespace fs = std::filesystem;
using testing::python_imports;
using testing::run_python_json;

const std::string kScript = (fs::path(MYGPT_HF_REFERENCE_SCRIPT).parent_path() / "tokenizer_reference.py").string();

// The tokenizers whose definition proves cuts (at "x\n|y", or only at "x\n| y" after a prefix space).
const std::set<std::string> kCut = {"gpt4",  "byte_level_regex", "gpt2_split", "llama3",        "qwen2_after_digits",
                                    "lstrip", "rstrip",          "lstrip_special", "prefix_space", "split_then_prefix_space",
                                    "added_tokens", "ignore_merges", "nfc",  "nfkc", "sequence_nfc", "gpt2"};

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
  const std::string text = nlohmann::json::parse(read_whole_file(texts, "test"))["long"].get<std::string>();
  const fs::path document = dir.write("long.txt", text);
  constexpr std::size_t kPieceBytes = 2048;  // prepare's are 1 MiB: the same cuts, 50 of them in 100 KB

  for (const fs::path& folder : tokenizers) {
    const std::string name = folder.filename().string();
    SCOPED_TRACE(name);
    const fs::path answer = dir.path() / ("reference_" + name + ".json");
    ASSERT_FALSE(run_python_json(kScript, {"encode", (folder / "tokenizer.json").string(), texts.string(),
                                           answer.string()},
                                 dir.path())
                     .is_null());
    const auto want = nlohmann::json::parse(read_whole_file(answer, "test"))["long"]["ids"].get<std::vector<int32_t>>();

    const auto codec = make_text_codec(TokenizerKind::hf, folder.string());
    DocumentReader reader(document.string(),
                          {.piece_bytes = kPieceBytes, .restarts_at = [&codec](std::string_view t, std::size_t cut) {
                             return codec->restarts_at(t, cut);
                           }});
    std::vector<TextPiece> pieces;
    while (auto piece = reader.next()) pieces.push_back(std::move(*piece));
    std::vector<int32_t> ids = encode_batch(*codec, pieces);
    if (codec->end_of_text() >= 0) ids.erase(ids.begin());  // prepare's delimiter before the document
    std::size_t first = 0;
    while (first < ids.size() && first < want.size() && ids[first] == want[first]) ++first;
    EXPECT_EQ(ids, want) << "ids differ from token " << first << " of " << want.size() << " (" << pieces.size()
                         << " pieces)";
    if (kCut.contains(name)) {
      EXPECT_GT(pieces.size(), 20u) << "a tokenizer whose definition proves cuts is tokenized in pieces";
    } else {
      EXPECT_EQ(pieces.size(), 1u) << "no cut is proven for this pre-tokenizer: the document stays whole";
    }
  }
}

}  // namespace
}  // namespace mygpt
