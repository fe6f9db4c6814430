// BOS-aligned best-fit packing (dataloader/best_fit_packer.h, BestFitBatchLoader): rows start at a
// document's first token, no document continues into another row, every token read is in a row or
// counted as cropped, nanochat's choice of document, exact resume, and N ranks == one rank's batches.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <random>

#include "dataloader/batch_loader.h"
#include "dataloader/best_fit_packer.h"

namespace mygpt::best_fit_packing_test {
namespace {

constexpr int64_t kBos = 0;

// A stream of `lead` tokens before the first delimiter, then documents of the given lengths, each a
// delimiter followed by tokens naming the document (1 + its index), so a row shows where it read from.
std::shared_ptr<const TokenSource> stream_of(const std::vector<uint64_t>& lengths, uint64_t lead = 0) {
  std::vector<int64_t> tokens(lead, 999);
  for (std::size_t d = 0; d < lengths.size(); ++d) {
    tokens.push_back(kBos);
    for (uint64_t k = 1; k < lengths[d]; ++k) tokens.push_back(static_cast<int64_t>(d) + 1);
  }
  return std::make_shared<InMemoryTokens>(std::move(tokens));
}

std::vector<uint64_t> random_lengths(std::size_t n, uint64_t longest, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<uint64_t> lengths;
  for (std::size_t i = 0; i < n; ++i) lengths.push_back(1 + random() % longest);
  return lengths;
}

TEST(BestFitPacker, RowsStartAtDocumentsAndEveryTokenIsPlacedOrCropped) {
  const uint64_t lead = 5, row = 17;
  const auto lengths = random_lengths(40, 30, 3);
  const auto source = stream_of(lengths, lead);
  std::map<uint64_t, uint64_t> document_at;  // start -> length
  uint64_t at = lead;
  for (const uint64_t length : lengths) {
    document_at[at] = length;
    at += length;
  }
  const std::size_t buffer = 6;
  BestFitPacker packer(source, kBos, row, buffer);
  uint64_t removed = 0, cropped_seen = 0;
  const int rows = 200;  // several epochs of the 40 documents
  for (int r = 0; r < rows; ++r) {
    const auto spans = packer.next_row();
    uint64_t filled = 0;
    for (const TokenSpan& span : spans) {
      ASSERT_TRUE(document_at.count(span.offset)) << "row " << r << ": a span starts inside a document";
      const uint64_t length = document_at[span.offset];
      ASSERT_LE(span.length, length) << "a span runs past its document's end (into the next)";
      // A span shorter than its document is the cropped one, and it ends the row.
      if (span.length < length) {
        EXPECT_EQ(&span, &spans.back());
      }
      cropped_seen += length - span.length;
      filled += span.length;
      ++removed;
    }
    EXPECT_EQ(filled, row);
    std::vector<int64_t> tokens(row);
    source->read(spans.front().offset, 1, tokens.data());
    EXPECT_EQ(tokens[0], kBos) << "row " << r << " starts at a document's first token";
  }
  EXPECT_EQ(packer.placed_tokens(), rows * row);
  // Documents read = those placed (one span each) + those waiting (the state's count, after its 6
  // numbers: the buffer refills before each placement, so after a row it may hold fewer than `buffer`);
  // each epoch begun adds its lead.
  const auto waiting = static_cast<uint64_t>(packer.state()[6]);
  EXPECT_LE(waiting, buffer);
  const uint64_t read_documents = removed + waiting;
  const uint64_t epochs_begun = 1 + read_documents / lengths.size();
  EXPECT_EQ(packer.cropped_tokens(), cropped_seen + lead * epochs_begun);
  uint64_t read_tokens = lead * epochs_begun;
  for (uint64_t d = 0; d < read_documents; ++d) read_tokens += lengths[d % lengths.size()];
  EXPECT_EQ(packer.placed_tokens() + packer.cropped_tokens() + packer.buffered_tokens(), read_tokens)
      << "every token read is in a row, cropped, or waiting in the buffer";
  EXPECT_GT(packer.cropped_tokens(), lead * epochs_begun) << "documents longer than a row were cropped";
}

TEST(BestFitPacker, TakesTheLargestThatFitsElseCropsTheShortest) {
  // Row of 10 from a buffer of 4: lengths 6, 3, 4, 8 -> 8 fits best; the buffer refills (5): 2 left and
  // none fits, so the shortest (3, at 6) is cropped to 2. Next row from 6, 4, 5 and 7: 7 fits best; the
  // stream starts again (6): 3 left and none fits, so the shortest (4, at 9) is cropped to 3.
  const auto source = stream_of({6, 3, 4, 8, 5, 7});
  BestFitPacker packer(source, kBos, 10, 4);
  auto row = packer.next_row();
  ASSERT_EQ(row.size(), 2u);
  EXPECT_EQ(row[0].offset, 13u);  // the 8 starts after 6 + 3 + 4
  EXPECT_EQ(row[0].length, 8u);
  EXPECT_EQ(row[1].offset, 6u);
  EXPECT_EQ(row[1].length, 2u);
  EXPECT_EQ(packer.cropped_tokens(), 1u);
  row = packer.next_row();
  ASSERT_EQ(row.size(), 2u);
  EXPECT_EQ(row[0].offset, 26u);
  EXPECT_EQ(row[0].length, 7u);
  EXPECT_EQ(row[1].offset, 9u);
  EXPECT_EQ(row[1].length, 3u);
  EXPECT_EQ(packer.cropped_tokens(), 2u);
  EXPECT_EQ(packer.placed_tokens(), 20u);
}

TEST(BestFitPacker, ResumesFromItsStateExactly) {
  const auto source = stream_of(random_lengths(50, 40, 9), 3);
  BestFitPacker straight(source, kBos, 33, 7);
  BestFitPacker first(source, kBos, 33, 7);
  for (int r = 0; r < 23; ++r) {
    straight.next_row();
    first.next_row();
  }
  BestFitPacker resumed(source, kBos, 33, 7);
  resumed.load_state(first.state());
  for (int r = 0; r < 60; ++r) {
    const auto a = straight.next_row(), b = resumed.next_row();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].offset, b[i].offset);
      EXPECT_EQ(a[i].length, b[i].length);
    }
  }
  EXPECT_EQ(straight.state(), resumed.state());
  BestFitPacker other_rows(source, kBos, 34, 7);
  EXPECT_THROW(other_rows.load_state(first.state()), std::invalid_argument);
}

// Counts the tokens read from a stream, so that a test can say how often the packer went over it.
class CountingTokens final : public TokenSource {
 public:
  explicit CountingTokens(std::shared_ptr<const TokenSource> inner) : inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  void read(uint64_t offset, size_t count, int64_t* out) const override {
    read_ += count;
    inner_->read(offset, count, out);
  }
  uint64_t tokens_read() const { return read_; }

 private:
  std::shared_ptr<const TokenSource> inner_;
  mutable uint64_t read_ = 0;
};

// Issue 64: one long document (a text prepared whole) filled nanochat's 1,000-document buffer with a
// thousand copies of itself, each found by scanning the whole stream again (4.5 s for the first step of
// 9.1M tokens), and every row was the same crop. A buffer holds a document once: a stream of fewer
// documents than the buffer holds each of them once, and the stream is scanned once per document taken.
TEST(BestFitPacker, NeverBuffersADocumentTwice) {
  const uint64_t length = 200000;  // longer than the packer's look-ahead, so each scan reads the stream again
  const auto counting = std::make_shared<CountingTokens>(stream_of({length}));
  BestFitPacker one_document(counting, kBos, 17);
  const BestFitPacker::Survey survey = one_document.survey();
  EXPECT_EQ(survey.documents, 1u);
  EXPECT_EQ(survey.tokens, length);
  EXPECT_EQ(survey.beyond_a_row, length - 17);
  EXPECT_NEAR(survey.share_beyond_a_row(), (length - 17.0) / length, 1e-12);
  EXPECT_EQ(one_document.state()[6], 1) << "the buffer holds the one document once, not 1000 times";
  EXPECT_LE(counting->tokens_read(), 2 * length) << "found by one scan of the stream";
  const auto row = one_document.next_row();
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0].length, 17u);
  EXPECT_EQ(one_document.cropped_tokens(), length - 17);

  // Three documents and a buffer of 1000: each is buffered once, and the rows still fill.
  const auto lengths = std::vector<uint64_t>{4, 9, 30};
  BestFitPacker three(stream_of(lengths), kBos, 10);
  EXPECT_EQ(three.survey().documents, 3u);
  for (int r = 0; r < 30; ++r) {
    uint64_t filled = 0;
    for (const TokenSpan& span : three.next_row()) filled += span.length;
    EXPECT_EQ(filled, 10u);
    const std::vector<int64_t> state = three.state();
    std::set<int64_t> offsets;
    for (std::size_t i = 7; i < state.size(); i += 2) offsets.insert(state[i]);
    EXPECT_EQ(offsets.size(), static_cast<std::size_t>(state[6])) << "row " << r << ": a document buffered twice";
    EXPECT_LE(state[6], 3);
  }
}

// The survey is what the buffer says before a row is packed: the tokens of its documents past their first
// row are cropped whatever best-fit does.
TEST(BestFitPacker, SurveysTheDocumentsBeforeTheFirstRow) {
  BestFitPacker packer(stream_of({10, 40, 3, 25}, 2), kBos, 20, 3);
  const BestFitPacker::Survey s = packer.survey();
  EXPECT_EQ(s.documents, 3u);  // the buffer's three
  EXPECT_EQ(s.tokens, 53u);
  EXPECT_EQ(s.beyond_a_row, 20u);
  BestFitPacker fresh(stream_of({10, 40, 3, 25}, 2), kBos, 20, 3);
  for (int r = 0; r < 8; ++r) {
    const auto a = packer.next_row(), b = fresh.next_row();
    ASSERT_EQ(a.size(), b.size()) << "a survey changes no row";
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].offset, b[i].offset);
  }
}

TEST(BestFitPacker, RefusesDataWithoutDelimiters) {
  const auto source = std::make_shared<InMemoryTokens>(std::vector<int64_t>(100, 7));
  EXPECT_THROW(BestFitPacker(source, kBos, 16), std::invalid_argument);
}

TEST(BestFitBatchLoader, RanksTakeTheBatchesOneProcessTakesAndResume) {
  const auto source = stream_of(random_lengths(300, 50, 5), 2);
  const int64_t batch = 3, seq = 24;
  BestFitBatchLoader one(source, batch, seq, kBos);
  BestFitBatchLoader rank0(source, batch, seq, kBos, 0, 2), rank1(source, batch, seq, kBos, 1, 2);
  for (int step = 0; step < 10; ++step) {
    const Batch a = one.next(torch::kCPU), b = one.next(torch::kCPU);
    const Batch r0 = rank0.next(torch::kCPU), r1 = rank1.next(torch::kCPU);
    EXPECT_TRUE(torch::equal(a.x, r0.x) && torch::equal(a.y, r0.y)) << "step " << step;
    EXPECT_TRUE(torch::equal(b.x, r1.x) && torch::equal(b.y, r1.y)) << "step " << step;
    EXPECT_TRUE(torch::all(a.x.select(1, 0) == kBos).item<bool>()) << "every row starts with the delimiter";
    EXPECT_TRUE(torch::equal(a.x.slice(1, 1), a.y.slice(1, 0, seq - 1))) << "targets are the inputs shifted";
  }
  EXPECT_TRUE(torch::equal(one.state(), rank0.state()));
  EXPECT_TRUE(torch::equal(rank0.state(), rank1.state())) << "the state is the same on every rank";
  BestFitBatchLoader resumed(source, batch, seq, kBos);
  resumed.load_state(one.state());
  for (int step = 0; step < 5; ++step) {
    const Batch a = one.next(torch::kCPU), b = resumed.next(torch::kCPU);
    EXPECT_TRUE(torch::equal(a.x, b.x) && torch::equal(a.y, b.y));
  }
  EXPECT_NE(one.report().find("cropped"), std::string::npos);
  const BestFitPacker& p = one.packer();
  ASSERT_TRUE(one.dropped_share().has_value()) << "the share cropped so far, for the step lines";
  EXPECT_DOUBLE_EQ(*one.dropped_share(), static_cast<double>(p.cropped_tokens()) /
                                             static_cast<double>(p.placed_tokens() + p.cropped_tokens()));
  EXPECT_FALSE(ShardedBatchLoader(source, batch, seq).dropped_share().has_value()) << "rows drop nothing";
  ShardedBatchLoader rows(source, batch, seq);
  EXPECT_THROW(resumed.load_state(rows.state()), std::invalid_argument) << "a rows position is not a packer state";
}

}  // namespace
}  // namespace mygpt::best_fit_packing_test
