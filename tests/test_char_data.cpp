// Character data: the tokenizer, the train/validation split, the batch loaders (sequential sharded
// and random) and the built-in sort dataset.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "dataloader/batch_loader.h"
#include "dataloader/builtin_dataset.h"
#include "tokenizer/char_tokenizer.h"
#include "dataloader/token_source.h"
#include "tests/test_support.h"

namespace mygpt::char_data_test {
namespace {

using testing::invalid_argument_message;

const torch::Device kCpu(torch::kCPU);

// Distinct values that are not their own index, so a wrong offset cannot go unnoticed.
std::shared_ptr<InMemoryTokens> numbered_tokens(size_t n) {
  std::vector<int64_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<int64_t>(1000 + 7 * i);
  return std::make_shared<InMemoryTokens>(std::move(tokens));
}

// The tensor of tokens [offset, offset + count) of the cyclic numbered stream of size n.
torch::Tensor numbered_range(uint64_t offset, int64_t count, size_t n) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = static_cast<int64_t>(1000 + 7 * ((offset + i) % n));
  return torch::tensor(v, torch::kLong);
}

std::vector<int64_t> flat(const torch::Tensor& t) {
  auto c = t.contiguous().to(torch::kCPU);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// ---------------------------------------------------------------------------------------------
// CharTokenizer

TEST(CharTokenizer, RoundTripIncludingNonAscii) {
  const std::string text = "Hello, wörld! naïve café — ✓ 𝄞 日本\n\ttabs";
  const CharTokenizer tok = CharTokenizer::from_text(text);
  const auto ids = tok.encode(text);
  EXPECT_EQ(tok.decode(ids), text);
  const auto code_points = utf8_decode(text);
  EXPECT_EQ(ids.size(), code_points.size());  // one id per code point, not per byte
  EXPECT_LT(ids.size(), text.size());
  EXPECT_EQ(tok.vocab_size(), static_cast<int64_t>(std::set<char32_t>(code_points.begin(), code_points.end()).size()));
  for (int64_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, tok.vocab_size());
  }
}

TEST(CharTokenizer, VocabularyIsSortedByCodePoint) {
  const CharTokenizer tok = CharTokenizer::from_text("banana é\n");
  EXPECT_EQ(tok.vocabulary(), "\n abné");
  EXPECT_EQ(tok.vocab_size(), 6);
  EXPECT_EQ(tok.encode("\n abné"), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  const auto vocab = utf8_decode(CharTokenizer::from_text("zyx€aé𝄞 ").vocabulary());
  EXPECT_TRUE(std::is_sorted(vocab.begin(), vocab.end()));
  EXPECT_EQ(std::adjacent_find(vocab.begin(), vocab.end()), vocab.end());
}

TEST(CharTokenizer, UnknownCharacterIsNamed) {
  const CharTokenizer tok = CharTokenizer::from_text("banana");
  EXPECT_NE(invalid_argument_message([&] { tok.encode("bax"); }).find("'x'"), std::string::npos);
  EXPECT_NE(invalid_argument_message([&] { tok.encode("né"); }).find("'é'"), std::string::npos);
  EXPECT_THROW(tok.decode({0, 3}), std::invalid_argument);
  EXPECT_THROW(tok.decode({-1}), std::invalid_argument);
}

TEST(CharTokenizer, InvalidUtf8IsRejected) {
  EXPECT_THROW(CharTokenizer::from_text(""), std::invalid_argument);
  EXPECT_THROW(CharTokenizer::from_text("abc\xff"), std::invalid_argument);         // never a UTF-8 byte
  EXPECT_THROW(CharTokenizer::from_text("abc\xc3"), std::invalid_argument);         // truncated sequence
  EXPECT_THROW(CharTokenizer::from_text("a\xe2\x28\xa1z"), std::invalid_argument);  // bad continuation
  EXPECT_THROW(CharTokenizer::from_text("\x80"), std::invalid_argument);            // lone continuation
  const CharTokenizer tok = CharTokenizer::from_text("abc");
  EXPECT_THROW(tok.encode("a\xc3"), std::invalid_argument);
  EXPECT_NE(invalid_argument_message([] { utf8_decode("ab\xff"); }).find("UTF-8"), std::string::npos);
}

TEST(CharTokenizer, FromVocabularyRebuildsTheSameTokenizer) {
  const std::string text = "to be, or not to be — ß∂ƒ";
  const CharTokenizer original = CharTokenizer::from_text(text);
  const CharTokenizer rebuilt = CharTokenizer::from_vocabulary(original.vocabulary());
  EXPECT_EQ(rebuilt.vocab_size(), original.vocab_size());
  EXPECT_EQ(rebuilt.vocabulary(), original.vocabulary());
  EXPECT_EQ(rebuilt.encode(text), original.encode(text));
  EXPECT_EQ(rebuilt.decode(original.encode(text)), text);
  // The vocabulary's order defines the ids, even when it is not sorted.
  EXPECT_EQ(CharTokenizer::from_vocabulary("cab").encode("abc"), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_THROW(CharTokenizer::from_vocabulary(""), std::invalid_argument);
  EXPECT_THROW(CharTokenizer::from_vocabulary("abca"), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Split and token sources

TEST(SplitTrainVal, ValidationIsTheLastTenPercent) {
  std::vector<int64_t> tokens(1000);
  std::iota(tokens.begin(), tokens.end(), 0);
  auto [train, val] = split_train_val(tokens, 0.1);
  ASSERT_EQ(train.size(), 900u);
  ASSERT_EQ(val.size(), 100u);
  EXPECT_EQ(train.front(), 0);
  EXPECT_EQ(train.back(), 899);
  EXPECT_EQ(val.front(), 900);
  EXPECT_EQ(val.back(), 999);

  auto [all, none] = split_train_val(tokens, 0.0);
  EXPECT_EQ(all, tokens);
  EXPECT_TRUE(none.empty());
  EXPECT_THROW(split_train_val(tokens, 1.0), std::invalid_argument);
  EXPECT_THROW(split_train_val(tokens, -0.1), std::invalid_argument);
}

TEST(InMemoryTokens, ReadsCyclically) {
  InMemoryTokens tokens({10, 11, 12, 13, 14});
  EXPECT_EQ(tokens.size(), 5u);
  std::vector<int64_t> out(7);
  tokens.read(3, 7, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{13, 14, 10, 11, 12, 13, 14}));
  tokens.read(11, 2, out.data());  // offsets are taken modulo the size
  EXPECT_EQ(out[0], 11);
  EXPECT_EQ(out[1], 12);
  EXPECT_THROW(InMemoryTokens(std::vector<int64_t>{}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// ShardedBatchLoader

TEST(ShardedBatchLoader, ShapesAndTargetsShiftedByOne) {
  const size_t n = 1000;
  ShardedBatchLoader loader(numbered_tokens(n), 4, 8);
  Batch batch = loader.next(kCpu);
  EXPECT_EQ(batch.x.sizes(), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(batch.y.sizes(), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(batch.x.scalar_type(), torch::kLong);
  EXPECT_EQ(batch.y.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(batch.x.reshape({-1}), numbered_range(0, 32, n)));
  EXPECT_TRUE(torch::equal(batch.y.reshape({-1}), numbered_range(1, 32, n)));
  using torch::indexing::Slice;
  EXPECT_TRUE(torch::equal(batch.y.index({Slice(), Slice(0, 7)}), batch.x.index({Slice(), Slice(1, 8)})));
}

TEST(ShardedBatchLoader, ReadsConsecutiveChunks) {
  const size_t n = 1000;
  ShardedBatchLoader loader(numbered_tokens(n), 4, 8);
  EXPECT_EQ(loader.chunks_per_epoch(), 1000u / 32u);
  for (uint64_t k = 0; k < 5; ++k) {
    EXPECT_EQ(loader.position(), k);
    Batch batch = loader.next(kCpu);
    EXPECT_TRUE(torch::equal(batch.x.reshape({-1}), numbered_range(k * 32, 32, n))) << "batch " << k;
    EXPECT_TRUE(torch::equal(batch.y.reshape({-1}), numbered_range(k * 32 + 1, 32, n))) << "batch " << k;
  }
  loader.reset();
  EXPECT_EQ(loader.position(), 0u);
  EXPECT_TRUE(torch::equal(loader.next(kCpu).x.reshape({-1}), numbered_range(0, 32, n)));
}

TEST(ShardedBatchLoader, WrapsAroundTheEndOfTheStream) {
  const size_t n = 100;  // 6 chunks of 16 tokens, then the stream continues at token 0
  ShardedBatchLoader loader(numbered_tokens(n), 2, 8);
  EXPECT_EQ(loader.chunks_per_epoch(), 6u);
  for (uint64_t k = 0; k < 14; ++k) {
    Batch batch = loader.next(kCpu);
    EXPECT_TRUE(torch::equal(batch.x.reshape({-1}), numbered_range(k * 16, 16, n))) << "batch " << k;
    EXPECT_TRUE(torch::equal(batch.y.reshape({-1}), numbered_range(k * 16 + 1, 16, n))) << "batch " << k;
  }
}

TEST(ShardedBatchLoader, StateResumesExactly) {
  const size_t n = 517;
  ShardedBatchLoader first(numbered_tokens(n), 3, 5);
  for (int i = 0; i < 4; ++i) first.next(kCpu);
  const torch::Tensor state = first.state();
  std::vector<Batch> expected;
  for (int i = 0; i < 40; ++i) expected.push_back(first.next(kCpu));  // crosses the end of the stream

  ShardedBatchLoader resumed(numbered_tokens(n), 3, 5);
  resumed.next(kCpu);  // a different position before loading
  resumed.load_state(state);
  EXPECT_EQ(resumed.position(), 4u);
  for (size_t i = 0; i < expected.size(); ++i) {
    Batch b = resumed.next(kCpu);
    EXPECT_TRUE(torch::equal(b.x, expected[i].x)) << "batch " << i;
    EXPECT_TRUE(torch::equal(b.y, expected[i].y)) << "batch " << i;
  }
  EXPECT_THROW(resumed.load_state(torch::zeros({2}, torch::kLong)), std::invalid_argument);
  EXPECT_THROW(resumed.load_state(torch::zeros({1}, torch::kFloat)), std::invalid_argument);
}

TEST(ShardedBatchLoader, RanksInterleaveTheChunksOfOneLoader) {
  const size_t n = 2000;
  for (int world : {2, 3}) {
    auto tokens = numbered_tokens(n);
    ShardedBatchLoader single(tokens, 2, 8);
    std::vector<Batch> reference;
    for (int i = 0; i < 12 * world; ++i) reference.push_back(single.next(kCpu));
    for (int rank = 0; rank < world; ++rank) {
      ShardedBatchLoader sharded(tokens, 2, 8, rank, world);
      for (int j = 0; j < 12; ++j) {
        Batch b = sharded.next(kCpu);
        const Batch& want = reference[static_cast<size_t>(j * world + rank)];
        EXPECT_TRUE(torch::equal(b.x, want.x)) << "world " << world << " rank " << rank << " batch " << j;
        EXPECT_TRUE(torch::equal(b.y, want.y)) << "world " << world << " rank " << rank << " batch " << j;
      }
      EXPECT_EQ(sharded.position(), static_cast<uint64_t>(12 * world));  // counts all ranks' chunks
    }
  }
}

TEST(ShardedBatchLoader, TwoRanksAreDisjointAndCoverAnEpoch) {
  std::vector<int64_t> ids(16 * 10 + 5);  // 10 chunks of 16 tokens, plus a tail
  std::iota(ids.begin(), ids.end(), 0);
  auto tokens = std::make_shared<InMemoryTokens>(ids);
  ShardedBatchLoader rank0(tokens, 2, 8, 0, 2), rank1(tokens, 2, 8, 1, 2);
  ASSERT_EQ(rank0.chunks_per_epoch(), 10u);
  std::vector<int64_t> seen0, seen1;
  for (uint64_t i = 0; i < rank0.chunks_per_epoch() / 2; ++i) {
    for (int64_t v : flat(rank0.next(kCpu).x)) seen0.push_back(v);
    for (int64_t v : flat(rank1.next(kCpu).x)) seen1.push_back(v);
  }
  const std::set<int64_t> set0(seen0.begin(), seen0.end()), set1(seen1.begin(), seen1.end());
  EXPECT_EQ(set0.size(), seen0.size());  // no token read twice within a rank
  EXPECT_EQ(set1.size(), seen1.size());
  std::vector<int64_t> common;
  std::set_intersection(set0.begin(), set0.end(), set1.begin(), set1.end(), std::back_inserter(common));
  EXPECT_TRUE(common.empty());
  std::set<int64_t> together(set0);
  together.insert(set1.begin(), set1.end());
  std::set<int64_t> epoch;
  for (int64_t i = 0; i < 160; ++i) epoch.insert(i);
  EXPECT_EQ(together, epoch);
}

TEST(ShardedBatchLoader, RejectsTooShortSourcesAndBadRanks) {
  auto tokens = numbered_tokens(32);  // one batch of 4 x 8 needs 33 tokens
  const std::string message = invalid_argument_message([&] { ShardedBatchLoader(tokens, 4, 8); });
  EXPECT_NE(message.find("32"), std::string::npos) << message;
  EXPECT_NE(message.find("33"), std::string::npos) << message;
  EXPECT_THROW(RandomBatchSampler(tokens, 4, 8, 1), std::invalid_argument);
  EXPECT_NO_THROW(ShardedBatchLoader(numbered_tokens(33), 4, 8));
  EXPECT_NO_THROW(RandomBatchSampler(numbered_tokens(33), 4, 8, 1));
  EXPECT_THROW(ShardedBatchLoader(numbered_tokens(100), 0, 8), std::logic_error);
  EXPECT_THROW(ShardedBatchLoader(numbered_tokens(100), 2, 8, 2, 2), std::logic_error);
  EXPECT_THROW(ShardedBatchLoader(numbered_tokens(100), 2, 8, -1, 2), std::logic_error);
}

// ---------------------------------------------------------------------------------------------
// RandomBatchSampler

std::vector<Batch> draw(RandomBatchSampler& sampler, int count) {
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) out.push_back(sampler.next(kCpu));
  return out;
}

bool same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i].x, b[i].x) || !torch::equal(a[i].y, b[i].y)) return false;
  }
  return true;
}

TEST(RandomBatchSampler, BatchesAreWindowsOfTheStream) {
  std::vector<int64_t> ids(300);
  std::iota(ids.begin(), ids.end(), 0);
  RandomBatchSampler sampler(std::make_shared<InMemoryTokens>(ids), 6, 10, 5);
  for (const Batch& b : draw(sampler, 20)) {
    EXPECT_EQ(b.x.sizes(), (std::vector<int64_t>{6, 10}));
    EXPECT_EQ(b.y.sizes(), (std::vector<int64_t>{6, 10}));
    // Each row is a contiguous window (no wrap) and y is x shifted by one.
    EXPECT_TRUE(torch::equal(b.y, b.x + 1));
    EXPECT_TRUE(torch::equal(b.x - b.x.select(1, 0).unsqueeze(1), torch::arange(10, torch::kLong).expand({6, 10})));
    EXPECT_GE(b.x.min().item<int64_t>(), 0);
    EXPECT_LE(b.y.max().item<int64_t>(), 299);
  }
}

TEST(RandomBatchSampler, HostBatchesAreContiguousWindowsAtTheGeneratorsOffsets) {
  // Contiguous host tensors (in pinned memory on CUDA) are what makes the copy to a GPU asynchronous;
  // the windows are still those at the offsets the rank's generator draws, in order.
  std::vector<int64_t> ids(500);
  std::iota(ids.begin(), ids.end(), 0);
  RandomBatchSampler sampler(std::make_shared<InMemoryTokens>(ids), 4, 12, 99, 1);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(99 + 0x9E3779B97F4A7C15ULL * 2);
  for (const Batch& b : draw(sampler, 5)) {
    EXPECT_TRUE(b.x.is_contiguous());
    EXPECT_TRUE(b.y.is_contiguous());
    const auto offsets = torch::randint(500 - 12, {4}, generator, torch::kLong);
    EXPECT_TRUE(torch::equal(b.x, offsets.unsqueeze(1) + torch::arange(12, torch::kLong)));
    EXPECT_TRUE(torch::equal(b.y, b.x + 1));
  }
  ShardedBatchLoader sequential(std::make_shared<InMemoryTokens>(ids), 4, 12);
  const Batch s = sequential.next(kCpu);
  EXPECT_TRUE(s.x.is_contiguous() && s.y.is_contiguous());
}

TEST(RandomBatchSampler, ReproduciblePerSeedAndDifferentPerRank) {
  auto tokens = numbered_tokens(5000);
  RandomBatchSampler a(tokens, 4, 16, 1337, 0), b(tokens, 4, 16, 1337, 0);
  RandomBatchSampler other_rank(tokens, 4, 16, 1337, 1), other_seed(tokens, 4, 16, 1338, 0);
  const auto batches = draw(a, 5);
  EXPECT_TRUE(same_batches(batches, draw(b, 5)));
  EXPECT_FALSE(same_batches(batches, draw(other_rank, 5)));
  EXPECT_FALSE(same_batches(batches, draw(other_seed, 5)));
  // The global generator plays no part.
  torch::manual_seed(0);
  RandomBatchSampler c(tokens, 4, 16, 1337, 0);
  torch::manual_seed(99);
  EXPECT_TRUE(same_batches(batches, draw(c, 5)));
}

TEST(RandomBatchSampler, StateRoundTrip) {
  auto tokens = numbered_tokens(5000);
  RandomBatchSampler a(tokens, 4, 16, 7, 0);
  draw(a, 3);
  const torch::Tensor state = a.state().clone();
  const auto expected = draw(a, 6);
  RandomBatchSampler b(tokens, 4, 16, 12345, 1);
  b.load_state(state);
  EXPECT_TRUE(same_batches(draw(b, 6), expected));
  EXPECT_THROW(b.load_state(torch::zeros({1}, torch::kLong)), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// builtin:sort

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool is_sort_line(const std::string& line) {
  if (line.size() != 13 || line[6] != '=') return false;
  std::string digits = line.substr(0, 6), answer = line.substr(7);
  for (char ch : digits + answer) {
    if (ch < '0' || ch > '9') return false;
  }
  std::sort(digits.begin(), digits.end());
  return digits == answer;
}

TEST(BuiltinSort, LinesAreDigitsAndTheirSortedForm) {
  EXPECT_TRUE(is_builtin_dataset("builtin:sort"));
  EXPECT_FALSE(is_builtin_dataset("sort.txt"));
  const std::string text = builtin_dataset_text("builtin:sort", 500, 7);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 500u);
  for (const auto& line : lines) EXPECT_TRUE(is_sort_line(line)) << line;
  std::set<std::string> distinct(lines.begin(), lines.end());
  EXPECT_GT(distinct.size(), 490u);  // random, not one line repeated

  EXPECT_EQ(builtin_dataset_text("builtin:sort", 500, 7), text);
  EXPECT_NE(builtin_dataset_text("builtin:sort", 500, 8), text);
  EXPECT_NE(invalid_argument_message([] { builtin_dataset_text("builtin:nope", 10); }).find("builtin:nope"),
            std::string::npos);
  EXPECT_THROW(builtin_heldout_examples("builtin:nope", 10), std::invalid_argument);
}

TEST(BuiltinSort, HeldOutPromptsNeverOccurInTheTrainingText) {
  const std::string text = builtin_dataset_text("builtin:sort");  // what `train builtin:sort` uses
  std::unordered_set<std::string> training_prompts;
  for (const auto& line : lines_of(text)) {
    ASSERT_TRUE(is_sort_line(line)) << line;
    training_prompts.insert(line.substr(0, 7));
  }
  EXPECT_EQ(lines_of(text).size(), 40000u);
  const auto heldout = builtin_heldout_examples("builtin:sort", 500);
  ASSERT_EQ(heldout.size(), 500u);
  for (const TaskExample& e : heldout) {
    EXPECT_EQ(training_prompts.count(e.prompt), 0u) << e.prompt;
    ASSERT_EQ(e.answer.back(), '\n');
    EXPECT_TRUE(is_sort_line(e.prompt + e.answer.substr(0, e.answer.size() - 1))) << e.prompt << e.answer;
  }
  EXPECT_EQ(builtin_heldout_examples("builtin:sort", 500).front().prompt, heldout.front().prompt);
}

}  // namespace
}  // namespace mygpt::char_data_test
