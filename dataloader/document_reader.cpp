#include "dataloader/document_reader.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/file_io.h"

namespace mygpt {
namespace {

bool printable_ascii(char c) { return c > ' ' && c < 0x7f; }

bool is_json_lines_start(const std::string& path, const std::string& head) {
  const auto ext = std::filesystem::path(path).extension().string();
  if (ext == ".jsonl" || ext == ".json") return true;
  const auto first = head.find_first_not_of(" \t\r\n");
  return first != std::string::npos && head[first] == '{';
}

}  // namespace

std::optional<std::size_t> last_safe_cut(const std::string& text, std::size_t from, std::size_t before) {
  if (text.size() < 3) return std::nullopt;
  for (std::size_t cut = std::min(before, text.size() - 1); cut >= std::max<std::size_t>(from, 2); --cut) {
    if (text[cut - 1] == '\n' && printable_ascii(text[cut - 2]) && printable_ascii(text[cut])) return cut;
  }
  return std::nullopt;
}

DocumentReader::DocumentReader(const std::string& path, std::size_t piece_bytes) : path_(path), piece_bytes_(piece_bytes) {
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
  json_lines_ = is_json_lines_start(path, head);
}

std::optional<TextPiece> DocumentReader::next() { return json_lines_ ? next_line_document() : next_text_piece(); }

std::optional<TextPiece> DocumentReader::next_line_document() {
  std::string line;
  while (std::getline(in_, line)) {
    consumed_ += line.size() + 1;
    ++line_number_;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "'" + path_ + "' line " + std::to_string(line_number_);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw std::invalid_argument(where + " is not valid JSON");
    }
    if (!record.is_object() || !record.contains("text") || !record["text"].is_string()) {
      throw std::invalid_argument(where + " has no \"text\" string");
    }
    return TextPiece{record["text"].get<std::string>(), true};
  }
  consumed_ = size_;
  return std::nullopt;
}

std::optional<TextPiece> DocumentReader::next_text_piece() {
  const auto hand_out = [this](std::size_t length) {
    TextPiece piece{carry_.substr(0, length), !started_};
    carry_.erase(0, length);
    // Whole UTF-8 characters: a cut lies between two ASCII characters.
    require_utf8(piece.text, "input file '" + path_ + "' (from byte " + std::to_string(consumed_) + ")");
    started_ = true;
    consumed_ += piece.text.size();
    return piece;
  };
  // Read until a safe cut lies beyond piece_bytes (or the file ends); hand out what is before it.
  std::size_t searched = 0;  // no safe cut at or below this offset of carry_
  while (true) {
    if (carry_.size() > piece_bytes_) {
      const auto cut = last_safe_cut(carry_, searched, carry_.size() - 1);
      if (cut) return hand_out(*cut);
      searched = carry_.size() - 1;
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
