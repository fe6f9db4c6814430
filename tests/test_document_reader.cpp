// prepare's streamed input and parallel tokenizing: pieces cut where GPT-2's pre-tokenizer (and the
// character tokenizer) give the same tokens as the whole text, JSON-lines documents, and the same tokens
// in the same order on any number of threads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dataloader/document_reader.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "dataloader/parallel_encoder.h"
#include "tokenizer/text_codec.h"
#include "tests/scratch_dir.h"
#include "tests/test_data.h"

namespace mygpt::document_reader_test {
namespace {

const std::string kGpt2Dir = (testing::test_data_dir() / "gpt2").string();
const std::string kShakespeare = (testing::test_data_dir() / "tinyshakespeare.txt").string();

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::vector<TextPiece> all_pieces(const std::string& path, std::size_t piece_bytes) {
  DocumentReader reader(path, {.piece_bytes = piece_bytes});
  std::vector<TextPiece> pieces;
  while (auto piece = reader.next()) pieces.push_back(std::move(*piece));
  EXPECT_EQ(reader.bytes_read(), reader.size());
  return pieces;
}

// Text where a careless cut would change GPT-2's tokens: runs of newlines and spaces before letters
// ("\n\n" is one token at the end of a piece, two before a letter), a no-break space, digits.
std::string tricky_text() {
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text += "Line " + std::to_string(i) + ".\n\nNext  \n line\n" + (i % 3 ? "x" : " y") + "\xC2\xA0z\n\n\n" +
            (i % 5 ? "a\nb" : "'s\n12") + "\n";
  }
  return text;
}

TEST(DocumentReader, CutsOnlyWhereTheTokensStayTheSame) {
  if (!std::filesystem::exists(kGpt2Dir + "/encoder.json")) GTEST_SKIP() << "no GPT-2 files in " << kGpt2Dir;
  const ScratchDir dir;
  const auto gpt2 = make_text_codec(TokenizerKind::gpt2, kGpt2Dir);
  std::vector<std::string> texts = {tricky_text()};
  if (std::filesystem::exists(kShakespeare)) {
    std::ifstream in(kShakespeare, std::ios::binary);
    texts.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (const std::string& text : texts) {
    const std::string path = write_file(dir.path() / "text.txt", text);
    const auto chars = make_char_codec_for(text);
    for (const TextCodec* codec : {gpt2.get(), chars.get()}) {
      const std::vector<TextPiece> pieces = all_pieces(path, 997);
      EXPECT_GT(pieces.size(), 10u) << "the text was cut into pieces";
      EXPECT_TRUE(pieces.front().starts_document);
      std::string joined;
      for (size_t i = 0; i < pieces.size(); ++i) {
        joined += pieces[i].text;
        if (i > 0) {
          EXPECT_FALSE(pieces[i].starts_document);
        }
      }
      EXPECT_EQ(joined, text) << "the pieces are the text";
      std::vector<int32_t> whole;
      if (codec->end_of_text() >= 0) whole.push_back(static_cast<int32_t>(codec->end_of_text()));
      for (int64_t id : codec->encode(text)) whole.push_back(static_cast<int32_t>(id));
      EXPECT_EQ(encode_batch(*codec, pieces), whole) << "tokens of the pieces == tokens of the whole text";
    }
  }
}

TEST(DocumentReader, NoSafePlaceKeepsTheTextWhole) {
  const ScratchDir dir;
  const std::string text(5000, 'a');  // no newline at all
  EXPECT_EQ(all_pieces(write_file(dir.path() / "a.txt", text), 100).size(), 1u);
  EXPECT_FALSE(last_safe_cut("a\n\nb", 0, 3).has_value()) << "two newlines: not a safe cut";
  EXPECT_FALSE(last_safe_cut("a \nb", 0, 3).has_value()) << "a space before the newline: not safe";
  EXPECT_EQ(last_safe_cut("ab\ncd\nef", 0, 7), 6u);
}

// GPT-2's and the character tokenizer's rule cuts CRLF text (between the '\r' and the '\n') and lines that end
// or start with a non-ASCII character (CJK text), but never next to a space of any kind, a control, a
// combining mark, or a character NFKC turns into a space (tokenizer/line_cuts.h). test_document_cuts.cpp
// checks the ids against tiktoken and tokenizers.
TEST(DocumentReader, CutsAtCrlfAndNonAsciiLineEndsBetweenVisibleCharacters) {
  EXPECT_EQ(last_safe_cut("ab\r\ncd", 0, 5), 3u) << "between the CR and the LF";
  EXPECT_EQ(last_safe_cut("\xe4\xb8\xad\xe6\x96\x87\n\xe6\x97\xa5\xe6\x9c\xac", 0, 12), 7u) << "CJK lines";
  EXPECT_EQ(last_safe_cut("\xe3\x80\x82\r\n\xe3\x80\x8cx", 0, 8), 4u) << "CJK punctuation, CRLF";
  const std::vector<std::string> refused = {
      "a\xe3\x80\x80\nb",  // U+3000 ideographic space before the line end
      "a\n\xe3\x80\x80x",  // after it
      "a\xc2\xa0\nb",      // no-break space
      "a\n\xcc\x81x",      // a combining mark starts the line
      "a\xc2\xa8\nb",      // U+00A8, " \u0308" in NFKC
      "a\n\xe2\x80\x8bx",  // zero-width space
      "a\xc2\x85\nb",      // NEL, a control
      "a\r\r\nb",          // a lone CR before the CRLF
  };
  for (const std::string& text : refused) {
    EXPECT_FALSE(last_safe_cut(text, 0, text.size() - 1).has_value()) << nlohmann::json(text).dump();
  }
}

TEST(DocumentReader, JsonLinesAreDocumentsAndBadLinesAreNamed) {
  const ScratchDir dir;
  const auto pieces =
      all_pieces(write_file(dir.path() / "d.jsonl", "{\"text\": \"one\"}\n\n{\"text\": \"two\\nlines\"}\n"), 4);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].text, "two\nlines");
  EXPECT_TRUE(pieces[0].starts_document && pieces[1].starts_document);
  const std::string bad = write_file(dir.path() / "bad.jsonl", "{\"text\": \"ok\"}\n{\"txt\": 1}\n");
  try {
    all_pieces(bad, 1 << 20);
    ADD_FAILURE() << "a line without a text field was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl' line 2 has no \"text\" string"), std::string::npos) << e.what();
  }
  EXPECT_THROW(DocumentReader((dir.path() / "missing.txt").string()), std::invalid_argument);
  EXPECT_THROW(DocumentReader(write_file(dir.path() / "empty.txt", "")), std::invalid_argument);
  const std::string latin1 = write_file(dir.path() / "latin1.txt", "caf\xE9\nabc\n");
  EXPECT_THROW(all_pieces(latin1, 1 << 20), std::invalid_argument);
}

// The SAX reading of a record's "text" against nlohmann's whole-document parse (the reference it replaces),
// on records a careless reader gets wrong, read by the reader and handed to the caller alike.
TEST(DocumentReader, JsonTextAsTheWholeDocumentParseReadsIt) {
  const ScratchDir dir;
  const std::vector<std::string> good = {
      R"({"text": "plain"})",
      R"({"id": "<urn:1>", "meta": {"text": "nested, not this"}, "text": "escaped \"quote\" \u00e9\ud83d\ude00\n", "score": 3.5})",
      R"({"text": "first", "list": [{"text": 1}, "text"], "text": "last wins"})",
      R"({"text": ""})",
  };
  const std::vector<std::string> bad = {
      R"({"text": 5})",        R"({"text": "a", "text": null})", R"(["text", "array"])", R"({"meta": {"text": "x"}})",
      R"({"text": "unterminated})", R"({"text": "x"} trailing)",     "{\"text\": \"bad \xff byte\"}",
  };
  std::string file;
  for (const auto& line : good) file += line + "\n";
  const std::string path = write_file(dir.path() / "good.jsonl", file);
  for (JsonParsing parsing : {JsonParsing::by_reader, JsonParsing::by_caller}) {
    DocumentReader reader(path, {.json_parsing = parsing});
    for (const auto& line : good) {
      const auto piece = reader.next();
      ASSERT_TRUE(piece.has_value());
      EXPECT_EQ(piece->json_line.empty(), parsing == JsonParsing::by_reader);
      EXPECT_EQ(text_of(*piece), nlohmann::json::parse(line)["text"].get<std::string>()) << line;
    }
    EXPECT_FALSE(reader.next().has_value());
  }
  for (std::size_t i = 0; i < bad.size(); ++i) {
    const std::string bad_path = write_file(dir.path() / ("bad" + std::to_string(i) + ".jsonl"), "{\"text\": \"ok\"}\n" + bad[i]);
    DocumentReader reader(bad_path, {.json_parsing = JsonParsing::by_caller});
    EXPECT_EQ(text_of(*reader.next()), "ok");
    const auto piece = reader.next();  // handed out unparsed: the error comes from text_of, naming the line
    ASSERT_TRUE(piece.has_value());
    try {
      text_of(*piece);
      ADD_FAILURE() << "accepted: " << bad[i];
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(".jsonl' line 2 "), std::string::npos) << e.what();
    }
  }
}

// Issue 64: --text-column named a Parquet column and was ignored for JSON lines, which always gave their
// "text". It names the member a JSON line's document is, read by the reader or by the caller alike.
TEST(DocumentReader, TextColumnNamesTheMemberOfAJsonLine) {
  ScratchDir dir;
  const std::string path = write_file(dir.path() / "docs.jsonl",
                                      "{\"text\": \"not this\", \"content\": \"first\"}\n{\"content\": \"second\"}\n");
  for (JsonParsing parsing : {JsonParsing::by_reader, JsonParsing::by_caller}) {
    DocumentReader reader(path, {.json_parsing = parsing, .text_column = "content"});
    EXPECT_EQ(text_of(*reader.next()), "first");
    EXPECT_EQ(text_of(*reader.next()), "second");
    EXPECT_FALSE(reader.next().has_value());
  }
  DocumentReader plain(path, {.json_parsing = JsonParsing::by_caller});
  EXPECT_EQ(text_of(*plain.next()), "not this");
  try {
    text_of(*plain.next());
    ADD_FAILURE() << "a line without \"text\" was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("line 2 has no \"text\" string"), std::string::npos) << e.what();
  }
  DocumentReader missing(path, {.text_column = "body"});
  try {
    missing.next();
    ADD_FAILURE() << "a line without \"body\" was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("line 1 has no \"body\" string (--text-column)"), std::string::npos) << e.what();
  }
}

TEST(ParallelEncoder, SameTokensInTheSameOrderOnAnyNumberOfThreads) {
  std::string text;  // ASCII, so that any slice of it is whole characters
  for (int i = 0; i < 1000; ++i) text += "word " + std::to_string(i * 7919 % 1000) + (i % 9 ? " " : ".\n");
  const auto make = [&text] { return make_char_codec_for(text); };
  std::vector<std::vector<TextPiece>> batches;
  for (int b = 0; b < 40; ++b) {
    batches.push_back({TextPiece{text.substr(static_cast<size_t>(b) * 97, 500), b % 7 == 0, {}}});
  }
  std::vector<int32_t> expected;
  const auto codec = make();
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const auto tokens = encode_batch(*codec, batches[b]);
    expected.insert(expected.end(), tokens.begin(), tokens.end());
    if (b % 2 == 1) {  // every other batch goes to the threads as a JSON line, parsed there: the same tokens
      batches[b][0].text = nlohmann::json{{"text", batches[b][0].text}}.dump();
      batches[b][0].json_line = "'test.jsonl' line 1";
    }
  }
  for (int threads : {1, 2, 5}) {
    ParallelEncoder encoder(make, threads);
    std::vector<int32_t> got;
    for (const auto& batch : batches) {
      if (encoder.pending() >= 3) {
        const auto tokens = encoder.take();
        got.insert(got.end(), tokens.begin(), tokens.end());
      }
      encoder.submit(batch);
    }
    while (encoder.pending() > 0) {
      const auto tokens = encoder.take();
      got.insert(got.end(), tokens.begin(), tokens.end());
    }
    EXPECT_EQ(got, expected) << threads << " thread(s)";
  }
  // A codec that cannot be made is reported to the caller, not lost in a thread.
  ParallelEncoder broken([]() -> std::unique_ptr<TextCodec> { throw std::invalid_argument("no vocabulary"); }, 2);
  broken.submit(batches[0]);
  EXPECT_THROW(broken.take(), std::invalid_argument);
}

}  // namespace
}  // namespace mygpt::document_reader_test
