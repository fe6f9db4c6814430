#pragma once
// BOS-aligned best-fit packing (nanochat's dataloader, tokenizing_distributed_data_loader_with_state_bos_bestfit):
// the token stream's documents are the spans that start at each delimiter token (BOS / <|endoftext|>,
// which `prepare` writes before every document) and end before the next. Rows of row_tokens (--seq-len
// + 1) are filled one after another from a buffer of the next documents in the stream: the largest
// document that fits the space left goes in whole (the first of equals); when none fits, the shortest
// is cropped to the space left and the rest of it is dropped. So every row starts at a document's first
// token, no document continues into another row, and every token read is either in a row or counted as
// cropped (or waits in the buffer). Tokens before the stream's first delimiter are counted as cropped.
// The stream repeats (epochs): after its last document come its first ones again, but never into a
// buffer that still holds them: a stream of fewer documents than the buffer holds each once (nanochat's
// buffer, which refills from an endless stream, would hold one document a thousand times, and a row of
// its copies is the same crop again).
//
// The packer is a pure function of the stream and its state (a few numbers and the buffer's spans),
// which state() gives and load_state() restores exactly.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dataloader/token_source.h"

namespace mygpt {

// Tokens [offset, offset + length) of the stream (taken cyclically).
struct TokenSpan {
  uint64_t offset = 0;
  uint64_t length = 0;
};

class BestFitPacker {
 public:
  static constexpr std::size_t kBufferDocuments = 1000;  // nanochat's buffer_size

  // Throws std::invalid_argument when the stream holds no `bos` token (its documents are not delimited).
  BestFitPacker(std::shared_ptr<const TokenSource> source, int64_t bos, uint64_t row_tokens,
                std::size_t buffer_documents = kBufferDocuments);

  // The spans of the stream that make the next row, in order: their lengths add up to row_tokens and
  // each starts at a document's first token.
  std::vector<TokenSpan> next_row();

  uint64_t placed_tokens() const { return placed_; }    // in rows so far
  uint64_t cropped_tokens() const { return cropped_; }  // dropped so far
  uint64_t buffered_tokens() const;                     // read, waiting in the buffer

  // The documents the next row is chosen from (filled as next_row fills it), and what they say of the
  // stream before anything is packed: documents far longer than a row are mostly cropped.
  struct Survey {
    uint64_t documents = 0;
    uint64_t tokens = 0;
    uint64_t beyond_a_row = 0;  // their tokens past their first row_tokens: cropped whatever the packing
    double share_beyond_a_row() const { return tokens == 0 ? 0.0 : static_cast<double>(beyond_a_row) / tokens; }
  };
  Survey survey();

  std::vector<int64_t> state() const;
  // Throws std::invalid_argument when the state is not one of this stream's.
  void load_state(std::span<const int64_t> state);

 private:
  TokenSpan next_document();
  void fill_buffer();

  std::shared_ptr<const TokenSource> source_;
  int64_t bos_;
  uint64_t row_tokens_;
  std::size_t buffer_documents_;
  uint64_t first_bos_ = 0;  // tokens before it are no document's
  uint64_t cursor_ = 0;     // the next document starts here (a bos)
  uint64_t placed_ = 0, cropped_ = 0;
  std::vector<TokenSpan> buffer_;
  // The stream's tokens [scan_start_, scan_start_ + scan_.size()), read ahead to find the delimiters.
  std::vector<int64_t> scan_;
  uint64_t scan_start_ = 0;
};

}  // namespace mygpt
