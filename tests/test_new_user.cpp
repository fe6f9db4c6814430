// What a new user meets first: the shuffled data order (a fresh order of rows each epoch, sharded
// across ranks like the sequential one), how `--data-order auto` picks an order, the derived
// learning-rate defaults, the line that says what a resumed run changes, and GPT-2's tokenizer read
// from a Hugging Face tokenizer.json.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "dataloader/batch_loader.h"
#include "tokenizer/gpt2_bpe_tokenizer.h"
#include "dataloader/token_source.h"
#include "launcher/run_course.h"
#include "launcher/run_plan.h"
#include "tests/scratch_dir.h"
#include "tests/test_support.h"

namespace mygpt::new_user_test {
namespace {

using testing::invalid_argument_message;

const torch::Device kCpu(torch::kCPU);

// Token i is i itself, so a row's first token is where it starts.
std::shared_ptr<InMemoryTokens> counting_tokens(size_t n) {
  std::vector<int64_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<int64_t>(i);
  return std::make_shared<InMemoryTokens>(std::move(tokens));
}

std::vector<int64_t> row_starts(const Batch& batch) {
  auto first = batch.x.select(1, 0).contiguous();
  return std::vector<int64_t>(first.data_ptr<int64_t>(), first.data_ptr<int64_t>() + first.numel());
}

TEST(ShuffledBatchLoader, EachEpochReadsEveryRowOnceInAFreshOrder) {
  const int64_t B = 4, T = 8;
  ShuffledBatchLoader loader(counting_tokens(1001), B, T, /*seed=*/7);
  const uint64_t rows = loader.rows_per_epoch();
  ASSERT_EQ(rows, (1000u - (T - 1)) / T);  // room for an offset below T in every block
  std::vector<std::vector<uint64_t>> epochs(3);
  for (uint64_t row = 0; row < 3 * rows; ++row) epochs[row / rows].push_back(loader.row_start(row));
  for (size_t e = 0; e < epochs.size(); ++e) {
    std::vector<uint64_t> sorted = epochs[e];
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < rows; ++i) {
      ASSERT_EQ(sorted[i] / T, i) << "epoch " << e << ": every block of T tokens starts one row";
    }
    EXPECT_LE(sorted.back() + T + 1, 1001u);
    // The data once: rows overlap only where the offset wraps (fewer than T tokens), and the gaps
    // between rows add up to fewer than T tokens.
    uint64_t overlap = 0, gaps = 0;
    for (uint64_t i = 1; i < rows; ++i) {
      const uint64_t end = sorted[i - 1] + T;
      if (sorted[i] < end) {
        overlap += end - sorted[i];
      } else {
        gaps += sorted[i] - end;
      }
    }
    EXPECT_LT(overlap, static_cast<uint64_t>(T)) << "epoch " << e;
    EXPECT_LT(gaps, static_cast<uint64_t>(T)) << "epoch " << e;
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  // Not the sequential walk: most neighbours in the order are not neighbours in the text.
  int adjacent = 0;
  for (uint64_t i = 1; i < rows; ++i) adjacent += epochs[0][i] / T == epochs[0][i - 1] / T + 1;
  EXPECT_LT(adjacent, 5);

  // Batches are consecutive rows of that order, targets shifted by one.
  ShuffledBatchLoader again(counting_tokens(1001), B, T, 7);
  for (uint64_t k = 0; k < 2 * rows / B; ++k) {
    const Batch batch = again.next(kCpu);
    const auto starts = row_starts(batch);
    for (int64_t b = 0; b < B; ++b) ASSERT_EQ(static_cast<uint64_t>(starts[b]), epochs[(k * B + b) / rows][(k * B + b) % rows]);
    ASSERT_TRUE(torch::equal(batch.y, batch.x + 1));
  }
}

// Data of fixed-length records (builtin:sort's 14-token lines) read in rows of 32 tokens: one offset
// for the whole epoch put every row at the same place modulo 32, so an epoch showed only 7 of the 14
// places a row can start in a line, and the demo's validation loss rose while its training loss fell.
TEST(ShuffledBatchLoader, AnEpochStartsRowsAtEveryPhaseOfTheText) {
  const int64_t T = 32, line = 14;
  ShuffledBatchLoader loader(counting_tokens(line * 2000 + 1), 16, T, /*seed=*/1337);
  std::vector<std::set<uint64_t>> starts(3);
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::map<uint64_t, int> rows_at_line_phase, rows_at_row_phase;
    for (uint64_t i = 0; i < loader.rows_per_epoch(); ++i) {
      const uint64_t start = loader.row_start(epoch * loader.rows_per_epoch() + i);
      starts[epoch].insert(start);
      ++rows_at_line_phase[start % line];
      ++rows_at_row_phase[start % T];
    }
    EXPECT_EQ(rows_at_line_phase.size(), static_cast<size_t>(line)) << "epoch " << epoch;
    EXPECT_EQ(rows_at_row_phase.size(), static_cast<size_t>(T)) << "epoch " << epoch;
    // Evenly: 874 rows over 14 phases is 62 a phase; a phase with under half of that is not even.
    for (const auto& [phase, count] : rows_at_line_phase) EXPECT_GT(count, 31) << "line phase " << phase;
  }
  // Each epoch cuts the text at other places.
  EXPECT_NE(starts[0], starts[1]);
  EXPECT_NE(starts[1], starts[2]);
}

TEST(ShuffledBatchLoader, TheOrderComesFromTheSeedAlone) {
  ShuffledBatchLoader a(counting_tokens(5000), 2, 16, 1), b(counting_tokens(5000), 2, 16, 1), c(counting_tokens(5000), 2, 16, 2);
  std::vector<uint64_t> ra, rb, rc;
  for (uint64_t row = 0; row < 400; ++row) {
    ra.push_back(a.row_start(row));
    rb.push_back(b.row_start(row));
    rc.push_back(c.row_start(row));
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(ShuffledBatchLoader, RanksTogetherReadWhatOneProcessReads) {
  const int64_t B = 3, T = 5;
  const auto tokens = counting_tokens(700);  // 138 rows: the 12 micro-steps below cross two epochs
  for (int world : {2, 3}) {
    ShuffledBatchLoader single(tokens, B, T, 11);
    std::vector<std::unique_ptr<ShuffledBatchLoader>> ranks;
    for (int r = 0; r < world; ++r) ranks.push_back(std::make_unique<ShuffledBatchLoader>(tokens, B, T, 11, r, world));
    for (int step = 0; step < 12 * 3 / world; ++step) {
      for (int r = 0; r < world; ++r) {
        const Batch mine = ranks[r]->next(kCpu);
        const Batch expected = single.next(kCpu);
        ASSERT_TRUE(torch::equal(mine.x, expected.x)) << world << " ranks, step " << step << ", rank " << r;
      }
    }
    EXPECT_EQ(ranks[0]->position(), single.position());
  }
}

TEST(ShuffledBatchLoader, StateResumesExactlyAcrossEpochs) {
  ShuffledBatchLoader first(counting_tokens(300), 4, 8, 3);
  for (int i = 0; i < 5; ++i) first.next(kCpu);
  const torch::Tensor state = first.state();
  std::vector<Batch> expected;
  for (int i = 0; i < 30; ++i) expected.push_back(first.next(kCpu));  // 36 rows an epoch: several epochs

  ShuffledBatchLoader resumed(counting_tokens(300), 4, 8, 3);
  resumed.next(kCpu);
  resumed.load_state(state);
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_TRUE(torch::equal(resumed.next(kCpu).x, expected[i].x)) << i;
  EXPECT_EQ(invalid_argument_message([&] { resumed.load_state(torch::zeros({3}, torch::kByte)); }),
            "data loader state is not a shuffled-loader position");
}

TEST(ShuffledBatchLoader, AShortStreamStillServesBatches) {
  ShuffledBatchLoader loader(counting_tokens(2 * 8 + 1), 2, 8, 5);  // exactly one batch, no room for an offset
  EXPECT_EQ(loader.rows_per_epoch(), 2u);
  for (int i = 0; i < 3; ++i) {
    auto starts = row_starts(loader.next(kCpu));
    std::sort(starts.begin(), starts.end());
    EXPECT_EQ(starts, (std::vector<int64_t>{0, 8}));
  }
  EXPECT_THROW(ShuffledBatchLoader(counting_tokens(16), 2, 8, 5), std::invalid_argument);
}

TEST(DataOrder, AutoShufflesDataReadMoreThanOnceAndStreamsTheRest) {
  EXPECT_EQ(resolve_data_order(DataOrder::automatic, 1000, 1001), DataOrder::shuffled);
  EXPECT_EQ(resolve_data_order(DataOrder::automatic, 1000, 1000), DataOrder::sequential);
  EXPECT_EQ(resolve_data_order(DataOrder::automatic, 10'000'000'000ULL, 524288ULL * 19073), DataOrder::sequential);
  EXPECT_EQ(resolve_data_order(DataOrder::random, 1000, 5000), DataOrder::random);
  EXPECT_EQ(resolve_data_order(DataOrder::sequential, 1000, 5000), DataOrder::sequential);
  // The Tiny Shakespeare CPU run of the README: 2000 x 12 x 64 tokens of ~903k reads the data 1.7 times.
  const ChosenDataOrder readme = choose_data_order(DataOrder::automatic, std::nullopt, 903'467, 2000 * 12 * 64);
  EXPECT_EQ(readme.order, DataOrder::shuffled);
  EXPECT_NE(readme.note.find("1.70 times"), std::string::npos) << readme.note;
  // Resuming keeps the order the checkpoint's run used, whatever the new --steps make of it.
  const ChosenDataOrder resumed =
      choose_data_order(DataOrder::automatic, std::string("steps=10\ndata-order=sequential\n"), 100, 5000);
  EXPECT_EQ(resumed.order, DataOrder::sequential);
  EXPECT_EQ(resumed.note, "data order: sequential (the resumed run's)");
  // Another order on resume is refused in words (issue 40: it was "data loader state is not a generator
  // state"): the checkpoint's data position is a place in its own order.
  try {
    choose_data_order(DataOrder::random, std::string("data-order=sequential\n"), 100, 50);
    ADD_FAILURE() << "another --data-order on resume was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--data-order random: a resumed run keeps its data order (this one reads its "
                                         "data sequential)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("start a new run"), std::string::npos) << e.what();
  }
  EXPECT_EQ(choose_data_order(DataOrder::sequential, std::string("data-order=sequential\n"), 100, 50).note,
            "data order: sequential (the resumed run's)");
  EXPECT_TRUE(choose_data_order(DataOrder::random, std::nullopt, 100, 50).note.empty());
}

TrainOptions options_of(const std::vector<std::string>& args) {
  const Parsed<TrainFlags> parsed = train_flag_table().parse(args);
  return resolve_train_options(parsed, parsed.config.model.resolve(65), torch::kCPU, 1);
}

TEST(LearningRateDefaults, MinLrIsATenthOfTheLrGiven) {
  EXPECT_DOUBLE_EQ(*options_of({}).min_lr, 1e-4);
  EXPECT_DOUBLE_EQ(*options_of({"--lr", "5e-5"}).min_lr, 5e-6);  // was the fixed 1e-4, above the peak
  EXPECT_DOUBLE_EQ(*options_of({"--preset", "gpt2", "--lr", "3e-4"}).min_lr, 3e-5);
  EXPECT_DOUBLE_EQ(*options_of({"--lr", "5e-5", "--min-lr", "0"}).min_lr, 0.0);
  EXPECT_EQ(invalid_argument_message([] { options_of({"--lr", "5e-5", "--min-lr", "1e-4"}); }),
            "--lr 5e-05 is below --min-lr 1e-04 (the cosine decay ends at --min-lr)");
}

TEST(LearningRateDefaults, WarmupLongerThanTheRun) {
  EXPECT_EQ(invalid_argument_message([] { options_of({"--steps", "50", "--warmup-steps", "80"}); }),
            "--warmup-steps 80 is longer than the run (--steps 50)");
  EXPECT_EQ(options_of({"--steps", "50"}).warmup_steps, 5);  // the default 100 shrinks to a tenth
  EXPECT_EQ(options_of({"--steps", "50", "--warmup-steps", "50"}).warmup_steps, 50);
  EXPECT_EQ(options_of({"--steps", "500"}).warmup_steps, 100);
}

TEST(ResumeChanges, NamesWhatChangesInOneLine) {
  const std::string before = "steps=100\nbatch-size=8\nlr=0.001\nmin-lr=0.0001\ndata-order=shuffled\nseed=1\n";
  EXPECT_EQ(resume_changes(before, before), "");
  EXPECT_EQ(resume_changes(before, "steps=200\nbatch-size=4\nlr=0.001\nmin-lr=0.0001\ndata-order=shuffled\nseed=2\n"),
            "resuming with changes: --steps 100 -> 200, --batch-size 8 -> 4, --seed 1 -> 2 (the learning-rate schedule "
            "and the data continue on the new values)");
  // Every option of the run is compared, none of the process's (--threads, --resume).
  EXPECT_EQ(resume_changes("beta2=0.99\nthreads=2\nresume=\n", "beta2=0.95\nthreads=4\nresume=auto\n"),
            "resuming with changes: --beta2 0.99 -> 0.95 (the learning-rate schedule and the data continue on the new "
            "values)");
  const std::map<std::string, std::string> lines = option_lines("a=1\nb=x=y\nbroken\n");
  EXPECT_EQ(lines, (std::map<std::string, std::string>{{"a", "1"}, {"b", "x=y"}}));
}

TEST(Gpt2Tokenizer, ReadsAHuggingFaceTokenizerJsonAlone) {
  const std::filesystem::path gpt2 = testing::test_data_dir() / "gpt2";
  if (!std::filesystem::exists(gpt2 / "encoder.json") || !std::filesystem::exists(gpt2 / "vocab.bpe")) {
    GTEST_SKIP() << gpt2.string() << "/{encoder.json,vocab.bpe} absent; see README";
  }
  // tokenizer.json as transformers saves GPT-2: the BPE model's vocab and merges, in either merge format.
  const auto vocab = nlohmann::json::parse(read_whole_file(gpt2 / "encoder.json", "test"));
  const std::string merges_text = read_whole_file(gpt2 / "vocab.bpe", "test");
  ScratchDir dir;
  for (const bool pairs : {false, true}) {
    nlohmann::json merges = nlohmann::json::array();
    size_t start = merges_text.find('\n') + 1;  // after the #version line
    while (start < merges_text.size()) {
      const size_t end = merges_text.find('\n', start);
      const std::string line = merges_text.substr(start, end - start);
      const size_t space = line.find(' ');
      if (pairs) merges.push_back({line.substr(0, space), line.substr(space + 1)});
      else merges.push_back(line);
      start = end + 1;
    }
    const nlohmann::json tokenizer = {{"version", "1.0"}, {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    const std::string folder = pairs ? "pairs" : "strings";
    dir.write(folder + "/tokenizer.json", tokenizer.dump());
    const auto files = Gpt2BpeTokenizer::find_files(dir.path() / folder);
    ASSERT_TRUE(files && files->tokenizer_json);
    const Gpt2BpeTokenizer from_json = Gpt2BpeTokenizer::load(dir.path() / folder);
    const Gpt2BpeTokenizer reference = Gpt2BpeTokenizer::load(gpt2);
    const std::string text = "Hello world! It's 2026, and naïve café tokenizers   still split\n\tlike this.";
    EXPECT_EQ(from_json.encode(text), reference.encode(text)) << folder;
    EXPECT_EQ(from_json.encode(text).size(), reference.encode(text).size());
  }
  dir.write("wordlevel/tokenizer.json", R"({"model": {"type": "WordLevel", "vocab": {}}})");
  EXPECT_NE(invalid_argument_message([&] { Gpt2BpeTokenizer::load(dir.path() / "wordlevel"); }).find("not a BPE tokenizer"),
            std::string::npos);
}

}  // namespace
}  // namespace mygpt::new_user_test
