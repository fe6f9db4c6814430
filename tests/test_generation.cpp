// Generation with the KV cache (model/kv_cache.h, model/sampling.h): the cached path gives the tokens
// the uncached one does (greedy and sampled, across the block-size boundary, several rows at once),
// and transformers' greedy generate() on an exported model (skipped, with one line, where the test
// Python lacks transformers).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/hf/hf_gpt2.h"
#include "model/sampling.h"
#include "reference_python.h"
#include "scratch_dir.h"
#include "model/mixed_precision.h"

#ifndef MYGPT_HF_REFERENCE_SCRIPT
#define MYGPT_HF_REFERENCE_SCRIPT ""
#endif

namespace mygpt::generation_test {
namespace {

GptConfig small_config(int64_t block_size, int64_t vocab_size = 101) {
  GptConfig config = preset_config("tiny");  // 2 layers, 2 heads, width 32
  config.block_size = block_size;
  config.vocab_size = vocab_size;
  return config;
}

// Large weights give the logits wide margins, so that greedy choices do not hinge on the last bits of
// float arithmetic (which the two paths order differently) and a wrong position or key moves them.
Gpt scrambled_model(const GptConfig& config, int seed) {
  // One thread: these matmuls are too small to share, and on a busy machine extra threads only wait.
  torch::set_num_threads(1);
  torch::manual_seed(seed);
  Gpt model(config);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const bool gain = item.key().find("ln_") != std::string::npos && item.key().ends_with(".weight");
    item.value().copy_(gain ? 1.0 + 0.3 * torch::randn_like(item.value()) : 0.3 * torch::randn_like(item.value()));
  }
  model->eval();
  return model;
}

torch::Tensor random_prompts(int64_t rows, int64_t length, int64_t vocab, int seed) {
  torch::manual_seed(seed);
  return torch::randint(vocab, {rows, length}, torch::kLong);
}

SamplingOptions greedy(int64_t new_tokens, bool kv_cache) {
  SamplingOptions options{new_tokens, /*temperature=*/0.0, /*top_k=*/0, /*vocab_limit=*/0};
  options.kv_cache = kv_cache;
  return options;
}

void expect_same_tokens(const torch::Tensor& cached, const torch::Tensor& uncached) {
  ASSERT_EQ(cached.sizes(), uncached.sizes());
  const auto differ = (cached != uncached).nonzero();
  EXPECT_EQ(differ.size(0), 0) << "first difference at (row, column) " << (differ.size(0) ? differ[0] : differ);
}

TEST(KvCache, ReadingInPiecesGivesTheLogitsOfOneRead) {
  auto model = scrambled_model(small_config(32), 1);
  const auto tokens = random_prompts(2, 12, 101, 2);
  torch::NoGradGuard no_grad;
  const auto whole = model->forward(tokens);  // (B, T, V)
  auto cache = model->make_kv_cache();
  // Pieces of 5, 1 and 6 positions: a first read, a single position and several at once after a past.
  int64_t done = 0;
  for (const int64_t piece : {5, 1, 6}) {
    const auto logits = model->forward(tokens.slice(1, done, done + piece), {.cache = &cache, .last_position_only = true});
    done += piece;
    EXPECT_EQ(cache.length(), done);
    EXPECT_TRUE(torch::allclose(logits, whole.select(1, done - 1), 1e-4, 1e-4)) << "after " << done << " positions";
  }
}

TEST(KvCache, RefusesToPassTheBlockSize) {
  auto model = scrambled_model(small_config(8), 1);
  auto cache = model->make_kv_cache();
  torch::NoGradGuard no_grad;
  model->forward(random_prompts(1, 6, 101, 3), {.cache = &cache, .last_position_only = true});
  EXPECT_THROW(model->forward(random_prompts(1, 3, 101, 4), {.cache = &cache, .last_position_only = true}), std::logic_error);
  cache.clear();
  EXPECT_NO_THROW(model->forward(random_prompts(1, 8, 101, 5), {.cache = &cache, .last_position_only = true}));
  EXPECT_TRUE(cache.full());
}

TEST(KvCacheGeneration, GreedyTokensEqualTheUncachedPathAcrossTheBlockSize) {
  auto model = scrambled_model(small_config(16), 7);
  // 5 prompt tokens + 40 new ones pass the 16-position block twice over; 3 rows at once.
  const auto prompts = random_prompts(3, 5, 101, 8);
  const auto cached = generate(model, prompts, greedy(40, true));
  const auto uncached = generate(model, prompts, greedy(40, false));
  expect_same_tokens(cached, uncached);
  EXPECT_EQ(cached.size(1), 45);
  // Each row of the batch is what it would be alone.
  for (int64_t row = 0; row < 3; ++row) {
    expect_same_tokens(generate(model, prompts.slice(0, row, row + 1), greedy(40, true)), cached.slice(0, row, row + 1));
  }
  // No row is stuck on one token (which would make the comparison weak).
  for (int64_t row = 0; row < 3; ++row) {
    EXPECT_GT(std::get<0>(at::_unique(cached[row].slice(0, 5))).numel(), 1) << "row " << row;
  }
}

TEST(KvCacheGeneration, PromptLongerThanTheBlockIsCroppedAlike) {
  auto model = scrambled_model(small_config(16), 9);
  const auto prompts = random_prompts(2, 23, 101, 10);
  expect_same_tokens(generate(model, prompts, greedy(12, true)), generate(model, prompts, greedy(12, false)));
}

TEST(KvCacheGeneration, SampledTokensEqualTheUncachedPathWithTheSameGenerator) {
  auto model = scrambled_model(small_config(16), 11);
  const auto prompts = random_prompts(2, 4, 101, 12);
  SamplingOptions options{30, /*temperature=*/0.9, /*top_k=*/20, /*vocab_limit=*/90};
  auto draw = [&](bool kv_cache) {
    options.kv_cache = kv_cache;
    return generate(model, prompts, options, at::make_generator<at::CPUGeneratorImpl>(5));
  };
  const auto cached = draw(true);
  expect_same_tokens(cached, draw(false));
  EXPECT_TRUE((cached.slice(1, 4) < 90).all().item<bool>());
}

TEST(KvCacheGeneration, ReportsEachStepsTokensAsTheyComeAndRestoresTrainingMode) {
  auto model = scrambled_model(small_config(16), 13);
  model->train();
  const auto prompts = random_prompts(2, 3, 101, 14);
  std::vector<torch::Tensor> steps;
  const auto out = generate(model, prompts, greedy(20, true), std::nullopt,
                            [&](const torch::Tensor& next) { steps.push_back(next.clone()); });
  ASSERT_EQ(steps.size(), 20u);
  expect_same_tokens(torch::cat(steps, 1), out.slice(1, 3));
  EXPECT_TRUE(model->is_training());
  EXPECT_EQ(generate(model, prompts, greedy(0, true)).size(1), 3);
}

// Weights that diverged (1e30: finite, but the logits they give are not) are refused in one exception
// naming the cause, with and without the KV cache, instead of LibTorch's multinomial message.
TEST(KvCacheGeneration, NonFiniteLogitsAreNamed) {
  torch::manual_seed(0);
  Gpt model(
      GptConfig{.vocab_size = 11, .n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 8, .logit_softcap = std::nullopt});
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.fill_(1e30);
  }
  for (const bool kv_cache : {true, false}) {
    SamplingOptions options{.max_new_tokens = 3, .temperature = 1.0, .top_k = 0, .vocab_limit = 0, .kv_cache = kv_cache};
    EXPECT_THROW(generate(model, torch::zeros({1, 2}, torch::kLong), options), NonFiniteLogits) << kv_cache;
    options.temperature = 0;  // greedy would pick an id from NaN silently
    EXPECT_THROW(generate(model, torch::zeros({1, 2}, torch::kLong), options), NonFiniteLogits) << kv_cache;
  }
}

// A subnormal temperature (4e-39, 1e-45: the largest logit over it overflows fp32) samples what greedy
// picks, as temperatures that small tend to, instead of failing on a distribution of inf and NaN.
TEST(KvCacheGeneration, SubnormalTemperatureSamplesTheGreedyTokens) {
  auto model = scrambled_model(small_config(16), 15);
  const auto prompts = random_prompts(2, 4, 101, 16);
  const auto want = generate(model, prompts, greedy(12, true));
  for (const double temperature : {4e-39, 1e-45}) {
    SamplingOptions options = greedy(12, true);
    options.temperature = temperature;
    EXPECT_TRUE(torch::equal(generate(model, prompts, options), want)) << "temperature " << temperature;
  }
}

TEST(KvCacheGeneration, RunsUnderBf16AutocastAsTrainingSamplesDo) {
  // The cache takes the dtype the attention produces (bf16 here), not the weights' fp32.
  auto model = scrambled_model(small_config(16), 15);
  const auto prompts = random_prompts(2, 4, 101, 16);
  AutocastScope autocast(torch::kCPU, Precision::bf16);
  const auto out = generate(model, prompts, greedy(20, true));
  EXPECT_EQ(out.size(1), 24);
  EXPECT_TRUE((out >= 0).all().item<bool>() && (out < 101).all().item<bool>());
}

// ---- agreement with transformers ----

TEST(KvCacheTransformers, GreedyTokensEqualTransformersGenerateOnAnExport) {
  if (!testing::python_imports("transformers, safetensors")) {
    GTEST_SKIP() << "transformers is not importable by '" << testing::reference_python()
                 << "' (pip install transformers safetensors there to run this comparison)";
  }
  ScratchDir dir;
  // Padded to 128 rows, 100 of them tokens: the export (and transformers) has 100, sampling limits to them.
  auto model = scrambled_model(small_config(64, 128), 21);
  export_hf_gpt2(model, 100, dir.path() / "hf");
  const auto prompts = random_prompts(2, 10, 100, 22);
  const int64_t new_tokens = 50;  // 60 positions: within transformers' 64 (it cannot slide past them)
  const auto reference = testing::run_python_json(
      MYGPT_HF_REFERENCE_SCRIPT,
      {"greedy", (dir.path() / "hf").string(), "--tokens", testing::tokens_argument(prompts), "--max-new-tokens",
       std::to_string(new_tokens)},
      dir.path());
  ASSERT_FALSE(reference.is_null());
  const auto rows = reference["ids"].get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(rows.size(), 2u);
  std::vector<int64_t> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  const auto theirs = torch::tensor(flat, torch::kLong).view({2, -1});
  SamplingOptions options = greedy(new_tokens, true);
  options.vocab_limit = 100;
  expect_same_tokens(generate(model, prompts, options), theirs);
}

}  // namespace
}  // namespace mygpt::generation_test
