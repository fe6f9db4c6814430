// The inference engine (inference/engine.h): sequences at different positions decoded together give, bit
// for bit, the logits each gets alone (Gpt::decode_rows); greedy replies batched equal generate()'s; a
// sequence joins and leaves between steps; the reply's text with stop strings (inference/reply_text.h);
// top-p sampling (model/sampling.h).
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <string>
#include <vector>

#include "inference/engine.h"
#include "inference/reply_text.h"
#include "model/gpt.h"
#include "model/sampling.h"

namespace mygpt::inference_engine_test {
namespace {

Gpt small_model(Positions positions = Positions::learned) {
  torch::set_num_threads(1);
  GptConfig config = preset_config("tiny");
  config.block_size = 32;
  config.vocab_size = 40;
  config.positions = positions;
  torch::manual_seed(11);
  Gpt model(config);
  torch::NoGradGuard no_grad;
  // Large weights: wide logit margins, so a greedy reply does not hinge on float rounding.
  for (auto& p : model->parameters()) p.copy_(0.5 * torch::randn_like(p));
  model->eval();
  return model;
}

std::vector<int64_t> ids(std::initializer_list<int64_t> list) { return list; }

TEST(InferenceEngine, RowsDecodedTogetherEqualEachAloneBitForBit) {
  for (Positions positions : {Positions::learned, Positions::rotary}) {
    Gpt model = small_model(positions);
    torch::NoGradGuard no_grad;
    // Six sequences of different lengths (more than a decode_linear group of four).
    const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4}, {5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14, 15}, {16}};
    std::vector<KvCache> together, alone;
    for (const auto& p : prompts) {
      for (auto* caches : {&together, &alone}) {
        caches->push_back(model->make_kv_cache());
        model->forward(torch::tensor(p).unsqueeze(0), {.cache = &caches->back(), .last_position_only = true});
      }
    }
    std::vector<KvCache*> rows;
    for (auto& c : together) rows.push_back(&c);
    const auto next = torch::tensor(ids({20, 21, 22, 23, 24, 25}));
    const auto batched = model->decode_rows(next, rows);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto single = model->forward(next.narrow(0, static_cast<int64_t>(i), 1).unsqueeze(0),
                                         {.cache = &alone[i], .last_position_only = true});
      EXPECT_TRUE(torch::equal(batched[static_cast<int64_t>(i)], single[0])) << "row " << i;
      EXPECT_EQ(together[i].length(), alone[i].length());
    }
  }
}

TEST(InferenceEngine, GreedyRepliesBatchedEqualGenerateAlone) {
  Gpt model = small_model();
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {7}, {9, 8, 7, 6, 5, 4}, {30, 31}, {2}};
  SamplingOptions greedy{/*max_new_tokens=*/12, /*temperature=*/0.0, /*top_k=*/0};
  Engine engine(model);
  std::vector<Sequence> sequences;
  sequences.reserve(prompts.size());
  std::vector<Sequence*> batch;
  for (const auto& p : prompts) {
    sequences.emplace_back(model, SequenceSettings{.sampling = greedy});
    sequences.back().start_reply(p);
    batch.push_back(&sequences.back());
  }
  // The third joins two steps late: continuous batching.
  batch.erase(batch.begin() + 2);
  engine.step(batch);
  engine.step(batch);
  batch.push_back(&sequences[2]);
  for (int step = 0; step < 20; ++step) engine.step(batch);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto reference = generate(model, torch::tensor(prompts[i]).unsqueeze(0), greedy);
    const auto tail = reference[0].slice(0, static_cast<int64_t>(prompts[i].size()));
    EXPECT_EQ(sequences[i].reply(), std::vector<int64_t>(tail.data_ptr<int64_t>(), tail.data_ptr<int64_t>() + tail.numel()))
        << "sequence " << i;
    EXPECT_EQ(sequences[i].finish_reason(), FinishReason::length);
  }
}

TEST(InferenceEngine, SlidingPastTheContextAndUncachedEqualGenerate) {
  Gpt model = small_model();
  SamplingOptions greedy{/*max_new_tokens=*/40, /*temperature=*/0.0, /*top_k=*/0};  // past the block of 32
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 5};
  const auto reference = generate(model, torch::tensor(prompt).unsqueeze(0), greedy);
  for (bool kv_cache : {true, false}) {
    Engine engine(model, kv_cache);
    Sequence s(model, SequenceSettings{.sampling = greedy, .slide_past_context = true});
    s.start_reply(prompt);
    Sequence* const one[] = {&s};
    while (!s.finished()) engine.step(one);
    const auto tail = reference[0].slice(0, 5);
    EXPECT_EQ(s.reply(), std::vector<int64_t>(tail.data_ptr<int64_t>(), tail.data_ptr<int64_t>() + tail.numel()))
        << "kv_cache " << kv_cache;
  }
}

TEST(InferenceEngine, EndIdsContextAndCancelEndAReply) {
  Gpt model = small_model();
  SamplingOptions greedy{/*max_new_tokens=*/100, /*temperature=*/0.0, /*top_k=*/0};
  Engine engine(model);
  Sequence full(model, SequenceSettings{.sampling = greedy});
  full.start_reply(std::vector<int64_t>(30, 3));
  Sequence* const one[] = {&full};
  while (!full.finished()) engine.step(one);
  EXPECT_EQ(full.finish_reason(), FinishReason::context_full);
  EXPECT_EQ(full.reply().size(), 3u);  // positions 30, 31 read; the third id drawn has none left

  // The first id drawn greedily is made an end id: the reply is that one id.
  Sequence probe(model, SequenceSettings{.sampling = greedy});
  probe.start_reply(ids({1, 2}));
  Sequence* const p[] = {&probe};
  engine.step(p);
  const int64_t first = probe.reply().front();
  Sequence ended(model, SequenceSettings{.sampling = greedy, .end_ids = {first}});
  ended.start_reply(ids({1, 2}));
  Sequence* const e[] = {&ended};
  engine.step(e);
  EXPECT_EQ(ended.finish_reason(), FinishReason::end_id);
  EXPECT_EQ(ended.reply(), ids({first}));

  // Banned ids are never drawn: ban the greedy choice and another comes.
  auto banned = torch::zeros({model->config().vocab_size}, torch::kBool);
  banned[first] = true;
  Sequence other(model, SequenceSettings{.sampling = greedy, .banned = banned});
  other.start_reply(ids({1, 2}));
  Sequence* const o[] = {&other};
  engine.step(o);
  EXPECT_NE(other.reply().front(), first);
  other.cancel();
  engine.step(o);
  EXPECT_EQ(other.finish_reason(), FinishReason::cancelled);
  EXPECT_EQ(other.reply().size(), 1u);
}

TEST(InferenceEngine, ASeedOfItsOwnSamplesTheSameWhateverIsBesideIt) {
  Gpt model = small_model();
  SamplingOptions sampling{/*max_new_tokens=*/10, /*temperature=*/1.0, /*top_k=*/0};
  Engine engine(model);
  auto sample = [&](int others) {
    std::vector<Sequence> sequences;
    sequences.reserve(static_cast<size_t>(others) + 1);
    std::vector<Sequence*> batch;
    sequences.emplace_back(model, SequenceSettings{.sampling = sampling, .seed = 42});
    for (int i = 0; i < others; ++i) sequences.emplace_back(model, SequenceSettings{.sampling = sampling});
    for (auto& s : sequences) {
      s.start_reply(ids({5, 6}));
      batch.push_back(&s);
    }
    for (int i = 0; i < 10; ++i) engine.step(batch);
    return sequences.front().reply();
  };
  EXPECT_EQ(sample(0), sample(3));
}

TEST(TopPSampling, KeepsTheSmallestSetThatReachesP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p 0.7 keeps the first two (0.5 < 0.7 <= 0.8).
  const auto logits = torch::log(torch::tensor({0.05, 0.5, 0.15, 0.3}, torch::kFloat)).unsqueeze(0).repeat({4000, 1});
  SamplingOptions options{0, /*temperature=*/1.0, /*top_k=*/0};
  options.top_p = 0.7;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto drawn = sample_next(logits, options, generator).flatten();
  const auto counts = torch::bincount(drawn, {}, 4);
  EXPECT_EQ(counts[0].item<int64_t>(), 0);
  EXPECT_EQ(counts[2].item<int64_t>(), 0);
  // The two kept renormalized: 0.625 and 0.375.
  EXPECT_NEAR(counts[1].item<double>() / 4000, 0.625, 0.03);
  options.top_p = 0.01;  // the most likely only
  EXPECT_TRUE(torch::all(sample_next(logits, options, generator) == 1).item<bool>());
}

std::string decode_letter(int64_t id) { return std::string(1, static_cast<char>('a' + id)); }

std::string run(ReplyText& text, const std::string& letters, std::vector<std::string>* pieces = nullptr) {
  std::string shown;
  for (char c : letters) {
    const std::string piece = text.push(c - 'a');
    if (pieces) pieces->push_back(piece);
    shown += piece;
    if (text.stopped()) return shown;
  }
  return shown + text.finish();
}

TEST(ReplyText, EndsBeforeTheFirstStopStringAndNeverShowsPartOfOne) {
  ReplyText text(decode_letter, {"cde", "xy"});
  std::vector<std::string> pieces;
  EXPECT_EQ(run(text, "abcdcdef", &pieces), "abcd");
  EXPECT_TRUE(text.stopped());
  // "c" and "cd" were held back until they turned out not to be "cde"; "cd" of the second is never shown.
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "b", "", "", "cd", "", ""}));
  ReplyText none(decode_letter, {"zz"});
  EXPECT_EQ(run(none, "abz"), "abz");  // a held-back start of a stop string is shown at the end
  EXPECT_FALSE(none.stopped());
  EXPECT_THROW(ReplyText(decode_letter, {""}), std::invalid_argument);
}

TEST(ReplyText, HoldsBackHalfACharacter) {
  // "é" is two bytes, one per id: nothing shows until it is whole.
  ReplyText text([](int64_t id) { return std::string(1, static_cast<char>(id == 0 ? 0xC3 : 0xA9)); }, {});
  EXPECT_EQ(text.push(0), "");
  EXPECT_EQ(text.push(1), "\xC3\xA9");
}

}  // namespace
}  // namespace mygpt::inference_engine_test
