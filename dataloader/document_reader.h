#pragma once
// The documents of `prepare`'s input files, read as a stream (a corpus of any size passes through a few
// MiB of memory): a JSON-lines file (.jsonl/.json, or text starting with '{') gives one document per
// line (its "text" field); any other file is one document, handed out in pieces cut only where cutting
// cannot change its tokens: where the tokenizer says it restarts (TextCodec::restarts_at; by default
// restarts_between_printable_lines, GPT-2's and the character tokenizer's). A file without such a place
// stays in one piece, tokenized whole.
#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/text_codec.h"

namespace mygpt {

struct TextPiece {
  std::string text;              // the text, or (json_line set) the JSON line that holds it
  bool starts_document = false;  // the tokenizer's <|endoftext|> goes before it
  std::string json_line;         // not empty: `text` is this JSON line ("'f.jsonl' line 7"), not parsed yet
};

// Whether a JSON-lines reader parses each line itself or hands out the line for the caller to parse
// with text_of (on the threads that tokenize: parsing is about a third of `prepare`'s work).
enum class JsonParsing { by_reader, by_caller };

// Whether a text may be cut at a place right after a '\n' (TextCodec::restarts_at); asked of no other place.
using CutRule = std::function<bool(std::string_view text, std::size_t cut)>;

class DocumentReader {
 public:
  // Opens `path` (std::invalid_argument naming it when it is not a readable regular file, or empty).
  // Pieces of plain text are about piece_bytes long (more where the rule allows no cut sooner).
  explicit DocumentReader(const std::string& path, std::size_t piece_bytes = std::size_t{1} << 20,
                          JsonParsing json_parsing = JsonParsing::by_reader,
                          CutRule restarts_at = restarts_between_printable_lines);
  // The next piece, or none at the end. Throws std::invalid_argument naming the file (and line) for text
  // that is not UTF-8, a line that is not JSON, or one without a "text" string.
  std::optional<TextPiece> next();
  // Bytes of the file consumed so far, and its size.
  uint64_t bytes_read() const { return consumed_; }
  uint64_t size() const { return size_; }
  bool json_lines() const { return json_lines_; }

 private:
  std::optional<TextPiece> next_line_document();
  std::optional<TextPiece> next_text_piece();

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
};

// The text of a piece: its own, or that of its JSON line's top-level "text" member. Throws
// std::invalid_argument naming the line when it is not JSON or has no "text" string.
std::string text_of(const TextPiece& piece);

// The largest position in [from, before] of `text` at which `restarts_at` allows a cut; none when there is
// no such place there. A rule may refuse a cut for want of text after it: it sees at most
// kCutRuleLookahead bytes there before the reader gives up on that cut.
std::optional<std::size_t> last_safe_cut(const std::string& text, std::size_t from, std::size_t before,
                                         const CutRule& restarts_at = restarts_between_printable_lines);
inline constexpr std::size_t kCutRuleLookahead = 4096;

}  // namespace mygpt
