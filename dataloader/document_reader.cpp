#include "dataloader/document_reader.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/file_io.h"
#include "dataloader/parquet_text_reader.h"

namespace mygpt {
namespace {

bool is_json_lines_start(const std::string& path, const std::string& head) {
  const auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".jsonl" || ext == ".json") return true;
  const auto first = head.find_first_not_of(" \t\r\n");
  return first != std::string::npos && head[first] == '{';
}

// The last top-level member `name` ("text") of a JSON record (the last, as a parse into a document keeps
// it), read with nlohmann's SAX interface: FineWeb's records carry a dozen other members that need no copies.
class RecordTextField : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit RecordTextField(const std::string& name) : name_(name) {}
  bool record_is_object = false;
  std::optional<std::string> text;  // none: no "text" member, or its last one is not a string

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool string(string_t& value) override {
    if (at_text_) text = std::move(value);
    at_text_ = false;
    return true;
  }
  bool start_object(std::size_t) override {
    if (depth_ == 0) record_is_object = true;
    return open();
  }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& name) override {
    at_text_ = depth_ == 1 && name == name_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool scalar() {
    if (at_text_) text.reset();
    at_text_ = false;
    return true;
  }
  bool open() {
    scalar();
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  const std::string& name_;
  int depth_ = 0;
  bool at_text_ = false;  // the next value is the record's member name_
};

std::string json_line_text(const std::string& line, const std::string& where, const std::string& key) {
  RecordTextField record(key);
  if (!nlohmann::json::sax_parse(line, &record)) throw std::invalid_argument(where + " is not valid JSON");
  if (!record.record_is_object || !record.text) {
    throw std::invalid_argument(where + " has no \"" + key + "\" string" + (key == "text" ? "" : " (--text-column)"));
  }
  return std::move(*record.text);
}

}  // namespace

std::string text_of(const TextPiece& piece) {
  return piece.json_line.empty() ? piece.text : json_line_text(piece.text, piece.json_line, piece.text_key);
}

std::optional<std::size_t> last_safe_cut(const std::string& text, std::size_t from, std::size_t before,
                                         const CutRule& restarts_at) {
  if (text.size() < 3) return std::nullopt;
  for (std::size_t cut = std::min(before, text.size() - 1); cut >= std::max<std::size_t>(from, 2); --cut) {
    // Every rule cuts after a '\n' or a '\r': the other places need no asking.
    if ((text[cut - 1] == '\n' || text[cut - 1] == '\r') && restarts_at(text, cut)) return cut;
  }
  return std::nullopt;
}

bool looks_like_parquet(const std::string& path, const std::string& head) {
  return std::filesystem::path(path).extension() == ".parquet" || head.rfind("PAR1", 0) == 0;
}

DocumentReader::DocumentReader(const std::string& path, DocumentReaderOptions options)
    : path_(path),
      piece_bytes_(options.piece_bytes),
      json_parsing_(options.json_parsing),
      restarts_at_(std::move(options.restarts_at)),
      text_key_(options.text_column) {
  require_regular_file(path, "input file");
  std::error_code ec;
  size_ = std::filesystem::file_size(path, ec);
  in_.open(path, std::ios::binary);
  if (!in_) throw std::invalid_argument("input file '" + path + "' cannot be read");
  if (size_ == 0) throw std::invalid_argument("input file '" + path + "' is empty");
  std::string head(static_cast<std::size_t>(std::min<uint64_t>(size_, 4096)), '\0');
  in_.read(head.data(), static_cast<std::streamsize>(head.size()));
  in_.clear();
  in_.seekg(0);
  if (looks_like_parquet(path, head)) {
    in_.close();
    parquet_ = std::make_unique<ParquetTextReader>(path, options.text_column);
    size_ = parquet_->text_bytes();
    return;
  }
  json_lines_ = is_json_lines_start(path, head);
}

DocumentReader::~DocumentReader() = default;

uint64_t DocumentReader::bytes_read() const {
  if (!parquet_) return consumed_;
  if (parquet_->rows() == 0) return size_;
  return static_cast<uint64_t>(static_cast<double>(size_) * static_cast<double>(parquet_->rows_read()) /
                               static_cast<double>(parquet_->rows()));
}

uint64_t DocumentReader::null_rows() const { return parquet_ ? parquet_->nulls() : 0; }

std::optional<TextPiece> DocumentReader::next() {
  if (parquet_) return next_parquet_row();
  return json_lines_ ? next_line_document() : next_text_piece();
}

std::optional<TextPiece> DocumentReader::next_parquet_row() {
  while (row_at_ == rows_.size()) {
    row_at_ = 0;
    if (!parquet_->next(rows_)) return std::nullopt;
  }
  std::string text = std::move(rows_[row_at_++]);
  // Arrow does not check that a string column holds UTF-8; the tokenizers need it.
  require_utf8(text, "input file '" + path_ + "' (its non-null text " + std::to_string(++texts_handed_out_) + ")");
  return TextPiece{std::move(text), true, {}};
}

std::optional<TextPiece> DocumentReader::next_line_document() {
  std::string line;
  while (std::getline(in_, line)) {
    consumed_ += line.size() + 1;
    ++line_number_;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = "'" + path_ + "' line " + std::to_string(line_number_);
    if (json_parsing_ == JsonParsing::by_caller) return TextPiece{std::move(line), true, std::move(where), text_key_};
    return TextPiece{json_line_text(line, where, text_key_), true, {}};
  }
  consumed_ = size_;
  return std::nullopt;
}

std::optional<TextPiece> DocumentReader::next_text_piece() {
  const auto hand_out = [this](std::size_t length) {
    TextPiece piece{carry_.substr(0, length), !started_, {}};
    carry_.erase(0, length);
    // Whole UTF-8 characters: a cut lies right after a '\n' or a '\r'.
    require_utf8(piece.text, "input file '" + path_ + "' (from byte " + std::to_string(consumed_) + ")");
    started_ = true;
    consumed_ += piece.text.size();
    return piece;
  };
  // Read until a safe cut lies beyond piece_bytes (or the file ends); hand out what is before it.
  std::size_t searched = 0;  // no safe cut at or below this offset of carry_
  while (true) {
    if (carry_.size() > piece_bytes_) {
      const auto cut = last_safe_cut(carry_, searched, carry_.size() - 1, restarts_at_);
      if (cut) return hand_out(*cut);
      // A rule may have refused the last cuts for want of text after them: they are asked again.
      searched = carry_.size() > kCutRuleLookahead ? carry_.size() - kCutRuleLookahead : 0;
    }
    std::string block(piece_bytes_, '\0');
    in_.read(block.data(), static_cast<std::streamsize>(block.size()));
    block.resize(static_cast<std::size_t>(in_.gcount()));
    if (block.empty()) {
      if (carry_.empty()) return std::nullopt;
      return hand_out(carry_.size());
    }
    carry_ += block;
  }
}

}  // namespace mygpt
