#include "dataloader/best_fit_packer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mygpt {
namespace {

constexpr uint64_t kScanTokens = uint64_t{1} << 16;  // read ahead per look for a delimiter
constexpr int64_t kStateTag = 0x42455354;             // "BEST": a best-fit packer's state follows

}  // namespace

BestFitPacker::BestFitPacker(std::shared_ptr<const TokenSource> source, int64_t bos, uint64_t row_tokens,
                             std::size_t buffer_documents)
    : source_(std::move(source)), bos_(bos), row_tokens_(row_tokens), buffer_documents_(buffer_documents) {
  if (row_tokens_ == 0 || buffer_documents_ == 0) throw std::logic_error("best-fit rows and buffer must be positive");
  const uint64_t size = source_->size();
  uint64_t at = 0;
  for (; at < size; at += kScanTokens) {
    scan_.resize(static_cast<std::size_t>(std::min(kScanTokens, size - at)));
    source_->read(at, scan_.size(), scan_.data());
    scan_start_ = at;
    const auto it = std::find(scan_.begin(), scan_.end(), bos_);
    if (it != scan_.end()) {
      first_bos_ = at + static_cast<uint64_t>(it - scan_.begin());
      break;
    }
  }
  if (at >= size) {
    throw std::invalid_argument("--packing best-fit: the training data holds no document delimiter (token " +
                                std::to_string(bos_) +
                                ", the tokenizer's BOS / <|endoftext|>, which prepare writes before each document): "
                                "prepare the documents (mygpt-ddp prepare --input FILE --vocab DIR --out SHARDS) and "
                                "train on SHARDS, or leave out --packing");
  }
  cursor_ = first_bos_;
  cropped_ = first_bos_;
}

TokenSpan BestFitPacker::next_document() {
  const uint64_t size = source_->size();
  const uint64_t start = cursor_;
  // The document runs to the next delimiter, or to the end of the stream.
  uint64_t end = start + 1;
  while (end < size) {
    if (end < scan_start_ || end >= scan_start_ + scan_.size()) {
      scan_.resize(static_cast<std::size_t>(std::min(kScanTokens, size - end)));
      source_->read(end, scan_.size(), scan_.data());
      scan_start_ = end;
    }
    const auto from = scan_.begin() + static_cast<std::ptrdiff_t>(end - scan_start_);
    const auto it = std::find(from, scan_.end(), bos_);
    end = scan_start_ + static_cast<uint64_t>(it - scan_.begin());
    if (it != scan_.end()) break;
  }
  if (end >= size) {
    end = size;
    cursor_ = first_bos_;  // the next epoch, whose lead before the first delimiter is no document's
    cropped_ += first_bos_;
  } else {
    cursor_ = end;
  }
  return {start, end - start};
}

void BestFitPacker::fill_buffer() {
  // The next document is not taken while the buffer holds it (the stream wrapped round to it): a copy
  // would only crop it the same way twice. A buffer holds at least one document, so the row fills.
  const auto holds_next = [this] {
    return std::any_of(buffer_.begin(), buffer_.end(), [this](const TokenSpan& d) { return d.offset == cursor_; });
  };
  while (buffer_.size() < buffer_documents_ && !holds_next()) buffer_.push_back(next_document());
}

BestFitPacker::Survey BestFitPacker::survey() {
  fill_buffer();
  Survey s;
  for (const TokenSpan& d : buffer_) {
    ++s.documents;
    s.tokens += d.length;
    s.beyond_a_row += d.length > row_tokens_ ? d.length - row_tokens_ : 0;
  }
  return s;
}

std::vector<TokenSpan> BestFitPacker::next_row() {
  std::vector<TokenSpan> row;
  uint64_t filled = 0;
  while (filled < row_tokens_) {
    fill_buffer();
    const uint64_t space = row_tokens_ - filled;
    // The largest document that fits whole, the first of equals (nanochat's strict >).
    std::size_t best = buffer_.size();
    uint64_t best_length = 0;
    for (std::size_t i = 0; i < buffer_.size(); ++i) {
      if (buffer_[i].length <= space && buffer_[i].length > best_length) {
        best = i;
        best_length = buffer_[i].length;
      }
    }
    TokenSpan piece;
    if (best < buffer_.size()) {
      piece = buffer_[best];
    } else {
      // None fits: the shortest (the first of equals) fills the row, the rest of it is dropped.
      best = static_cast<std::size_t>(
          std::min_element(buffer_.begin(), buffer_.end(),
                           [](const TokenSpan& a, const TokenSpan& b) { return a.length < b.length; }) -
          buffer_.begin());
      piece = {buffer_[best].offset, space};
      cropped_ += buffer_[best].length - space;
    }
    buffer_.erase(buffer_.begin() + static_cast<std::ptrdiff_t>(best));  // the others keep their order
    row.push_back(piece);
    filled += piece.length;
    placed_ += piece.length;
  }
  return row;
}

uint64_t BestFitPacker::buffered_tokens() const {
  uint64_t total = 0;
  for (const TokenSpan& d : buffer_) total += d.length;
  return total;
}

std::vector<int64_t> BestFitPacker::state() const {
  std::vector<int64_t> state = {kStateTag,
                                static_cast<int64_t>(row_tokens_),
                                static_cast<int64_t>(source_->size()),
                                static_cast<int64_t>(cursor_),
                                static_cast<int64_t>(placed_),
                                static_cast<int64_t>(cropped_),
                                static_cast<int64_t>(buffer_.size())};
  for (const TokenSpan& d : buffer_) {
    state.push_back(static_cast<int64_t>(d.offset));
    state.push_back(static_cast<int64_t>(d.length));
  }
  return state;
}

void BestFitPacker::load_state(std::span<const int64_t> state) {
  const auto bad = [](const std::string& why) {
    throw std::invalid_argument("data loader state is not this run's best-fit packing: " + why);
  };
  if (state.size() < 7 || state[0] != kStateTag) bad("no best-fit state");
  if (static_cast<uint64_t>(state[1]) != row_tokens_) bad("it packed rows of " + std::to_string(state[1]) + " tokens");
  if (static_cast<uint64_t>(state[2]) != source_->size()) {
    bad("it packed " + std::to_string(state[2]) + " tokens of data, this data holds " + std::to_string(source_->size()));
  }
  const auto n = static_cast<uint64_t>(state[6]);
  if (state[6] < 0 || state.size() != 7 + 2 * n) bad("its buffer is cut");
  const uint64_t size = source_->size();
  std::vector<TokenSpan> buffer;
  for (uint64_t i = 0; i < n; ++i) {
    const TokenSpan d{static_cast<uint64_t>(state[7 + 2 * i]), static_cast<uint64_t>(state[8 + 2 * i])};
    if (d.offset >= size || d.length == 0 || d.length > size - d.offset) bad("a buffered document lies outside the data");
    buffer.push_back(d);
  }
  if (static_cast<uint64_t>(state[3]) >= size) bad("its position lies outside the data");
  cursor_ = static_cast<uint64_t>(state[3]);
  placed_ = static_cast<uint64_t>(state[4]);
  cropped_ = static_cast<uint64_t>(state[5]);
  buffer_ = std::move(buffer);
}

}  // namespace mygpt
