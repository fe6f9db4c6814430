#pragma once
// The documents of `prepare`'s input files, read as a stream (a corpus of any size passes through a few
// MiB of memory): a JSON-lines file (.jsonl/.json, or text starting with '{') gives one document per
// line (its "text" member, or the one options.text_column names); any other file is one document, handed out in pieces cut only where cutting
// cannot change its tokens: where the tokenizer says it restarts (TextCodec::restarts_at; by default
// restarts_between_printable_lines, GPT-2's and the character tokenizer's: line ends, LF or CRLF, between
// visible characters, ASCII or not). A file without such a place stays in one piece, tokenized whole.
// A Parquet file (.parquet, or starting with "PAR1") gives one document per row of its text column, read
// a batch of rows at a time (dataloader/parquet_text_reader.h); null rows are skipped and counted.
#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/text_codec.h"

namespace mygpt {

class ParquetTextReader;

struct TextPiece {
  std::string text;              // the text, or (json_line set) the JSON line that holds it
  bool starts_document = false;  // the tokenizer's <|endoftext|> goes before it
  std::string json_line;         // not empty: `text` is this JSON line ("'f.jsonl' line 7"), not parsed yet
  std::string text_key = "text";  // json_line: the member that holds the document
};

// Whether a JSON-lines reader parses each line itself or hands out the line for the caller to parse
// with text_of (on the threads that tokenize: parsing is about a third of `prepare`'s work).
enum class JsonParsing { by_reader, by_caller };

// Whether a text may be cut at a place right after a '\n' or a '\r' (TextCodec::restarts_at); asked of no
// other place.
using CutRule = std::function<bool(std::string_view text, std::size_t cut)>;

// How a DocumentReader reads; give only what differs, by name ({.text_column = "content"}).
struct DocumentReaderOptions {
  // Plain text's pieces are about this long (more where the rule allows no cut sooner).
  std::size_t piece_bytes = std::size_t{1} << 20;
  JsonParsing json_parsing = JsonParsing::by_reader;
  CutRule restarts_at = restarts_between_printable_lines;
  std::string text_column = "text";  // a Parquet file's column of documents, a JSON line's member
};

class DocumentReader {
 public:
  // Opens `path` (std::invalid_argument naming it when it is not a readable regular file, or empty, or
  // Parquet without a string column options.text_column).
  explicit DocumentReader(const std::string& path, DocumentReaderOptions options = {});
  ~DocumentReader();
  // The next piece, or none at the end. Throws std::invalid_argument naming the file (and line) for text
  // that is not UTF-8, a line that is not JSON, or one without a string options.text_column.
  std::optional<TextPiece> next();
  // Bytes of the file consumed so far, and its size (Parquet: of its text column uncompressed, consumed
  // in proportion to the rows read).
  uint64_t bytes_read() const;
  uint64_t size() const { return size_; }
  bool json_lines() const { return json_lines_; }
  bool parquet() const { return parquet_ != nullptr; }
  // Parquet rows skipped so far because their text is null.
  uint64_t null_rows() const;

 private:
  std::optional<TextPiece> next_line_document();
  std::optional<TextPiece> next_text_piece();
  std::optional<TextPiece> next_parquet_row();

  std::string path_;
  std::ifstream in_;
  std::size_t piece_bytes_;
  uint64_t size_ = 0, consumed_ = 0;
  bool json_lines_ = false;
  JsonParsing json_parsing_;
  CutRule restarts_at_;
  bool started_ = false;  // a plain text's first piece was handed out
  uint64_t line_number_ = 0;
  std::string carry_;  // plain text read but not handed out yet
  std::unique_ptr<ParquetTextReader> parquet_;
  std::vector<std::string> rows_;  // Parquet texts read, not handed out yet, from row_at_
  std::size_t row_at_ = 0;
  uint64_t texts_handed_out_ = 0;
  std::string text_key_;  // a JSON line's member of the document
};

// Whether a file is Parquet: its name ends in .parquet, or it starts with the magic "PAR1".
bool looks_like_parquet(const std::string& path, const std::string& head);

// The text of a piece: its own, or that of its JSON line's top-level member text_key. Throws
// std::invalid_argument naming the line when it is not JSON or has no such string.
std::string text_of(const TextPiece& piece);

// The largest position in [from, before] of `text` at which `restarts_at` allows a cut; none when there is
// no such place there. A rule may refuse a cut for want of text after it: it sees at most
// kCutRuleLookahead bytes there before the reader gives up on that cut.
std::optional<std::size_t> last_safe_cut(const std::string& text, std::size_t from, std::size_t before,
                                         const CutRule& restarts_at = restarts_between_printable_lines);
inline constexpr std::size_t kCutRuleLookahead = 4096;

}  // namespace mygpt
