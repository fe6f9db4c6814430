// CORE's pieces (issue 56): the bundle reader's refusals, nanochat's prompt rendering and spans, the scoring
// rule, the scoring loop's crop, and bits per byte's sums. The end-to-end comparison with a transformers
// reference, and N ranks == 1, are in tests/core_end_to_end.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "eval/core_bundle.h"
#include "eval/core_prompts.h"
#include "distributed/communicator.h"
#include "model/gpt.h"
#include "tests/scratch_dir.h"
#include "tokenizer/text_codec.h"
#include "eval/bits_per_byte.h"
#include "eval/choice_scoring.h"

namespace mygpt::core_eval_test {
namespace {

CoreTask task_of(CoreTaskType type, const std::string& delimiter = " ") {
  CoreTask t;
  t.label = "t";
  t.file = "eval_data/t.jsonl";
  t.type = type;
  t.continuation_delimiter = delimiter;
  return t;
}

TEST(CorePrompts, PythonStripIsUnicodeWhitespace) {
  EXPECT_EQ(python_strip(" \t\n\x1c caf\xc3\xa9 \xc2\xa0\xe3\x80\x80"), "caf\xc3\xa9");  // NBSP, ideographic space
  EXPECT_EQ(python_strip("\xe2\x80\x8b" "a"), "\xe2\x80\x8b" "a");  // U+200B is not whitespace to Python
  EXPECT_EQ(python_strip("   "), "");
}

TEST(CorePrompts, RendersAsNanochat) {
  CoreItem a, b, item;
  a.query = "Q1";
  a.choices = {"x", "y"};
  a.gold = 1;
  b.query = "Q2";
  b.choices = {"z"};
  item.query = "Q";
  item.choices = {"c1", "c2"};
  const auto mc = render_core_prompts(task_of(CoreTaskType::multiple_choice, ": "), item, {&a, &b});
  EXPECT_EQ(mc, (std::vector<std::string>{"Q1: y\n\nQ2: z\n\nQ: c1", "Q1: y\n\nQ2: z\n\nQ: c2"}));

  CoreItem s, si;
  s.context_options = {"o0", "o1"};
  s.gold = 0;
  s.continuation = "cont";
  si.context_options = {"A", "B"};
  si.continuation = "end";
  EXPECT_EQ(render_core_prompts(task_of(CoreTaskType::schema), si, {&s}),
            (std::vector<std::string>{"o0 cont\n\nA end", "o0 cont\n\nB end"}));

  CoreItem l, li;
  l.context = "  ctx one \t";
  l.continuation = "one";
  li.context = "ctx two  ";
  li.continuation = "two";
  EXPECT_EQ(render_core_prompts(task_of(CoreTaskType::language_modeling), li, {&l}),
            (std::vector<std::string>{"ctx one one\n\nctx two", "ctx one one\n\nctx two two"}));
}

TEST(CorePrompts, SpansOfEachType) {
  const auto codec = make_char_codec_for("abcdefgh =\n");
  CoreItem mc;
  mc.query = "ab";
  mc.choices = {"cd", "ce", "f"};
  mc.gold = 2;
  const ScoringItem m = core_scoring_item(task_of(CoreTaskType::multiple_choice, "="), mc, {}, *codec, -1);
  ASSERT_EQ(m.rows.size(), 3u);
  EXPECT_EQ(m.rows[0].begin, 3);  // "ab=" is common; "c" of two choices is not common to all three
  EXPECT_EQ(m.rows[0].end, 5);
  EXPECT_EQ(m.rows[2].end, 4);
  EXPECT_EQ(m.gold, 2);

  CoreItem schema;
  schema.context_options = {"a", "bb"};
  schema.continuation = "cd";
  const ScoringItem s = core_scoring_item(task_of(CoreTaskType::schema), schema, {}, *codec, /*bos=*/7);
  EXPECT_EQ(s.rows[0].tokens.front(), 7);
  EXPECT_EQ(s.rows[0].end - s.rows[0].begin, 3);  // " cd", the common suffix
  EXPECT_EQ(s.rows[1].begin, 3);                  // BOS, "b", "b"

  CoreItem lm;
  lm.context = "ab ";
  lm.continuation = "cd";
  const ScoringItem l = core_scoring_item(task_of(CoreTaskType::language_modeling), lm, {}, *codec, 7);
  ASSERT_EQ(l.rows.size(), 1u);
  EXPECT_EQ(l.rule, ScoringRule::greedy_match);
  EXPECT_EQ(l.rows[0].begin, 3);  // BOS a b: " " was stripped from the prompt without the continuation
  EXPECT_EQ(l.rows[0].end, 6);    // " cd"
}

TEST(CorePrompts, FewshotAndOrderAreCPythons) {
  // random.Random(1337).shuffle(list(range(10))) and random.Random(1234 + 3).sample([0,1,2,4,...,9], 3).
  EXPECT_EQ(core_item_order(10, 0), (std::vector<size_t>{0, 3, 7, 2, 1, 6, 4, 5, 8, 9}));
  EXPECT_EQ(core_item_order(10, 4), (std::vector<size_t>{0, 3, 7, 2}));
  EXPECT_EQ(core_fewshot(3, 0, 5).size(), 2u);  // fewer others than shots: all of them
  EXPECT_TRUE(core_fewshot(3, 0, 0).empty());
}

TEST(CoreScoring, LowestMeanLossWinsAndNanNeverDoes) {
  ScoringItem item;
  item.rows.resize(3);
  item.gold = 1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(judge_item(item, {{2.0, false}, {1.0, false}, {1.0, false}}));  // the first of equal minima
  EXPECT_FALSE(judge_item(item, {{nan, false}, {1.0, false}, {0.5, false}}));
  EXPECT_TRUE(judge_item(item, {{2.0, false}, {1.0, false}, {nan, false}}));
  item.rule = ScoringRule::greedy_match;
  item.rows.resize(1);
  EXPECT_TRUE(judge_item(item, {{5.0, true}}));
  EXPECT_FALSE(judge_item(item, {{0.1, false}}));
}

TEST(CoreScoring, CropsFromTheLeftAsIfScoredAlone) {
  torch::manual_seed(3);
  GptConfig config;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 16;
  config.block_size = 8;
  config.vocab_size = 11;
  Gpt model(config);
  LocalCommunicator single;
  // Two rows of 12 tokens: cropped to their last 8, spans shifted by 4. The same rows given already cropped
  // must judge the same way, whatever the loss values are.
  std::vector<int64_t> long_row, other;
  for (int64_t t = 0; t < 12; ++t) {
    long_row.push_back(t % 11);
    other.push_back((t * 7 + 3) % 11);
  }
  for (int64_t gold = 0; gold < 2; ++gold) {
    ScoringItem whole{{{long_row, 9, 12}, {other, 9, 12}}, ScoringRule::lowest_mean_loss, gold};
    ScoringItem cropped{{{{long_row.begin() + 4, long_row.end()}, 5, 8}, {{other.begin() + 4, other.end()}, 5, 8}},
                        ScoringRule::lowest_mean_loss, gold};
    const auto a = score_items(model, 1, [&](int64_t) { return whole; }, single, torch::kCPU, Precision::fp32, 0, 4);
    const auto b = score_items(model, 1, [&](int64_t) { return cropped; }, single, torch::kCPU, Precision::fp32, 0, 4);
    EXPECT_EQ(a.correct, b.correct) << gold;
    EXPECT_EQ(a.total, 1);
  }
}

TEST(BitsPerByte, SumsNatsAndBytesApart) {
  // Ids 0..3 of 1, 2, 0 (a special token) and 3 bytes; a negative target is masked.
  BitsPerByte bpb({1, 2, 0, 3}, 5, torch::kCPU);
  const auto losses = torch::tensor({{0.5f, 1.0f, 7.0f}, {2.0f, 0.25f, 9.0f}});
  const auto targets = torch::tensor({{0, 1, 2}, {3, 1, -1}}, torch::kLong);
  bpb.add(losses, targets);
  LocalCommunicator single;
  const double bits = bpb.combine(single);
  const double nats = 0.5 + 1.0 + 2.0 + 0.25, bytes = 1 + 2 + 3 + 2;
  EXPECT_DOUBLE_EQ(bpb.nats(), nats);
  EXPECT_DOUBLE_EQ(bpb.bytes(), bytes);
  EXPECT_NEAR(bits, nats / (std::log(2.0) * bytes), 1e-12);
  bpb.reset();
  EXPECT_TRUE(std::isinf(bpb.combine(single)));
}

TEST(BitsPerByte, TokenBytesOfTheCharacterTokenizer) {
  const auto codec = make_char_codec_for("a\xc3\xa9\xe6\x9d\xb1");  // a, é, 東
  EXPECT_EQ(codec->token_byte_counts(), (std::vector<int64_t>{1, 2, 3}));
}

TEST(CoreBundle, CsvAsPythonReadsIt) {
  const auto rows = parse_csv("a,b,c\r\nx,\"y, \"\"z\"\"\nw\",\n\n1,2,3", "f.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1], (std::vector<std::string>{"x", "y, \"z\"\nw", ""}));
  EXPECT_EQ(rows[2], (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_THROW(parse_csv("a,\"b", "f.csv"), std::invalid_argument);
}

TEST(CoreBundle, ReadsTasksAndNamesTheFaultyLine) {
  ScratchDir dir;
  dir.write("core.yaml",
            "icl_tasks:\n- label: lm\n  dataset_uri: x/lm.jsonl\n  num_fewshot: [0]\n  icl_task_type: language_modeling\n"
            "  continuation_delimiter: \"\\n\"\n- label: s\n  dataset_uri: s.jsonl\n  num_fewshot: [2, 5]\n"
            "  icl_task_type: schema\n");
  dir.write("eval_meta_data.csv", "Eval Task,Random baseline\nlm,0\ns,50.0\n");
  dir.write("eval_data/x/lm.jsonl", "{\"context\": \"c\", \"continuation\": \"d\"}\n\n{\"context\": \"e\", \"continuation\": 7}\n");
  dir.write("eval_data/s.jsonl", "{\"context_options\": [\"a\", \"b\"], \"continuation\": \"c\", \"gold\": 1}\n");
  const CoreBundle bundle = read_core_bundle(dir.path());
  ASSERT_EQ(bundle.tasks.size(), 2u);
  EXPECT_EQ(bundle.tasks[0].continuation_delimiter, "\n");
  EXPECT_EQ(bundle.tasks[0].items.size(), 2u);
  EXPECT_EQ(bundle.tasks[0].items[1].continuation, "7");
  EXPECT_EQ(bundle.tasks[0].items[1].line, 3);
  EXPECT_EQ(bundle.tasks[1].num_fewshot, 2);
  EXPECT_EQ(bundle.tasks[1].random_baseline, 50.0);
  EXPECT_EQ(bundle.tasks[1].continuation_delimiter, " ");

  dir.write("eval_data/s.jsonl", "{\"context_options\": [\"a\"], \"continuation\": \"c\", \"gold\": 0}\n{\"gold\": 0}\n");
  try {
    read_core_bundle(dir.path());
    FAIL() << "a schema item without context_options was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("s.jsonl:2: the schema item has no \"context_options\" list"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mygpt::core_eval_test
