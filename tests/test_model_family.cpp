// The model family (model/gpt_config.h, model/gpt.cpp): each member's config names, presets and bad
// configs; its parameters as parameter_shapes says; the fused chunked loss (with the soft-cap inside it)
// against the plain one, gradients included; KV-cache generation (rotary positions offset by the cache)
// against the uncached path; training with exact resume (AdamW and Muon); Muon's split; and interop
// judged by transformers (NanoChat, Llama, Qwen3) in both directions: its loss and greedy ids on our
// export, and ours on a model transformers made (skipped, with one line, where the test Python lacks
// transformers).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "distributed/communicator.h"
#include "model/gpt.h"
#include "model/hf/hf_family.h"
#include "model/new_token_rows.h"
#include "model/sampling.h"
#include "reference_python.h"
#include "scratch_dir.h"
#include "trainer/checkpoint.h"
#include "trainer/muon.h"
#include "training_fixture.h"

#ifndef MYGPT_FAMILY_REFERENCE_SCRIPT
#define MYGPT_FAMILY_REFERENCE_SCRIPT ""
#endif

namespace mygpt::model_family_test {
namespace {

constexpr int64_t kVocab = 101;

GptConfig sized(GptConfig c, int64_t width, int64_t heads, int64_t kv_heads, int64_t block = 32) {
  c.n_layer = 2;
  c.n_embd = width;
  c.n_head = heads;
  c.n_kv_head = kv_heads;
  c.block_size = block;
  c.vocab_size = kVocab;
  if (c.mlp_hidden > 0) c.mlp_hidden = 3 * width;
  return c;
}

// One of each kind: GPT-2; nanochat's block; Llama's (grouped-query attention, SwiGLU); Qwen3's (QK-norm
// with gains); and a mix no published model has (learned positions, RMSNorm, ReLU^2, a capped tied head).
std::vector<std::pair<std::string, GptConfig>> members() {
  GptConfig mixed = preset_config("tiny");
  mixed.norm = NormKind::rmsnorm;
  mixed.mlp = MlpKind::relu2;
  mixed.logit_softcap = 5.0;
  mixed.bias = false;
  GptConfig qwen3 = preset_config("llama-small");
  qwen3.qk_norm = true;
  return {{"gpt2", sized(preset_config("tiny"), 32, 2, 0)},
          {"nanochat", sized(preset_config("nanochat-d2"), 32, 2, 2)},
          {"llama", sized(preset_config("llama-small"), 32, 4, 2)},
          {"qwen3", sized(qwen3, 32, 4, 1)},
          {"mixed", sized(mixed, 32, 2, 0)}};
}

// Weights large enough that the logits have wide margins and a wrong position, head or mapping moves
// them; gains near 1.
Gpt scrambled(const GptConfig& config, int seed, const GptRuntime& runtime = {}) {
  torch::set_num_threads(1);
  torch::manual_seed(seed);
  Gpt model(config, runtime);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const bool gain = item.key().find("norm") != std::string::npos || item.key().find("ln_") != std::string::npos;
    auto& p = item.value();
    p.copy_(gain && item.key().ends_with(".weight") ? 1.0 + 0.3 * torch::randn_like(p) : 0.3 * torch::randn_like(p));
  }
  model->eval();
  return model;
}

torch::Tensor random_ids(int64_t rows, int64_t length, int64_t vocab, int seed) {
  torch::manual_seed(seed);
  return torch::randint(vocab, {rows, length}, torch::kLong);
}

template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelFamily, NanochatDepthDialAndLlamaPreset) {
  for (const auto& [depth, heads] : std::vector<std::pair<int64_t, int64_t>>{{12, 6}, {20, 10}, {26, 13}, {32, 16}}) {
    const GptConfig c = preset_config("nanochat-d" + std::to_string(depth));
    EXPECT_EQ(c.n_layer, depth);
    EXPECT_EQ(c.n_embd, 64 * depth);
    EXPECT_EQ(c.n_head, heads);
    EXPECT_EQ(c.head_size(), 128);
    EXPECT_EQ(c.kv_heads(), heads);
    EXPECT_EQ(c.mlp_width(), 4 * c.n_embd);
    EXPECT_EQ(c.positions, Positions::rotary);
    EXPECT_EQ(c.norm, NormKind::rmsnorm);
    EXPECT_FALSE(c.norm_weight);
    EXPECT_TRUE(c.embedding_norm && c.qk_norm);
    EXPECT_FALSE(c.tie_head || c.bias);
    EXPECT_EQ(c.logit_softcap, 15.0);
    EXPECT_EQ(c.init, InitKind::nanochat);
    EXPECT_FALSE(c.is_gpt2_architecture());
    // The architecture line: the shortest text of each number (it printed eps 9.9999999999999995e-07).
    EXPECT_NE(c.architecture_text().find("(eps 1e-06, no weight)"), std::string::npos) << c.architecture_text();
  }
  const GptConfig llama = preset_config("llama-small");
  EXPECT_EQ(llama.mlp, MlpKind::swiglu);
  EXPECT_EQ(llama.kv_heads(), 2);
  EXPECT_TRUE(preset_config("gpt2").is_gpt2_architecture());
  const auto names = preset_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "nanochat-d12"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "llama-small"), names.end());
}

TEST(ModelFamily, BadConfigsAreNamedInOneLine) {
  GptConfig c = preset_config("llama-small");  // 4 heads
  c.vocab_size = kVocab;
  c.n_kv_head = 3;
  EXPECT_EQ(message_of([&] { c.validate(); }), "n_kv_head (3) does not divide n_head (4)");
  c = preset_config("nanochat-d2");
  c.vocab_size = kVocab;
  c.n_embd = 30;
  c.n_head = 2;  // head size 15
  EXPECT_NE(message_of([&] { c.validate(); }).find("rotary positions need an even head size, got 15"), std::string::npos);
  c.positions = Positions::learned;
  EXPECT_NO_THROW(c.validate());  // an odd head size is fine without rotation
  c.logit_softcap = 0.0;
  EXPECT_EQ(message_of([&] { c.validate(); }),
            "logit soft-cap must be within float32's normal numbers (1.2e-38 to 3.4e38), got 0");
  c.logit_softcap = 1e39;  // finite in double, inf in the fp32 logits
  EXPECT_NE(message_of([&] { c.validate(); }).find("to 3.4e38"), std::string::npos);
  c.logit_softcap = 1e-39;  // positive in double, subnormal in fp32 (1e-50: 0 there)
  EXPECT_NE(message_of([&] { c.validate(); }).find("1.2e-38 to"), std::string::npos);
  for (const char* bad : {"0", "-1", "inf", "15x", "", "1e40", "1e-39", "1e-50"}) {
    EXPECT_THROW(parse_logit_softcap(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(parse_logit_softcap("none"), std::nullopt);
  EXPECT_EQ(parse_logit_softcap("30"), 30.0);
  EXPECT_NE(message_of([] { parse_enum<MlpKind>("geglu"); }).find("known: gelu, relu2, swiglu"), std::string::npos);
  for (const auto& [name, config] : members()) {
    EXPECT_EQ(message_of([&] { config.validate(); }), "(no error)") << name;
  }
}

TEST(ModelFamily, ConfigTextRoundTripsAndGpt2sIsUnchanged) {
  for (const auto& [name, config] : members()) {
    EXPECT_EQ(GptConfig::from_text(config.to_text()), config) << name;
  }
  // GPT-2's text has exactly the seven fields it had before the family existed (in the field table's order).
  EXPECT_EQ(preset_config("gpt2").to_text(),
            "vocab_size=50304\nn_layer=12\nn_head=12\nn_embd=768\nblock_size=1024\ndropout=0\nbias=1\n");
  EXPECT_THROW(GptConfig::from_text(preset_config("tiny").to_text() + "mlp=geglu\n"), std::invalid_argument);
}

TEST(ModelFamily, ConfigTextOfEarlierVersionsReadsAsTheSameConfig) {
  // What the binary before the field table wrote for nanochat-d4 (block 64, 12 tokens) and for GPT-2: read as
  // those configs, and written again they read back the same.
  GptConfig nanochat = preset_config("nanochat-d4");
  nanochat.vocab_size = 12;
  nanochat.block_size = 64;
  const std::string earlier =
      "vocab_size=12\nblock_size=64\nn_layer=4\nn_head=2\nn_embd=256\ndropout=0\nbias=0\npositions=rotary\n"
      "norm=rmsnorm\nnorm_weight=0\nnorm_eps=9.9999999999999995e-07\nembedding_norm=1\nqk_norm=1\nmlp=relu2\n"
      "n_kv_head=2\ntie_head=0\nlogit_softcap=15\ninit=nanochat\n";
  EXPECT_EQ(GptConfig::from_text(earlier), nanochat);
  EXPECT_EQ(GptConfig::from_text(nanochat.to_text()), nanochat);
  EXPECT_EQ(GptConfig::from_text("vocab_size=50304\nblock_size=1024\nn_layer=12\nn_head=12\nn_embd=768\ndropout=0\nbias=1\n"),
            preset_config("gpt2"));
}

TEST(ModelFamily, ConfigTextErrorsComeFromTheFieldsOwnParse) {
  const std::string tiny = preset_config("tiny").to_text();
  EXPECT_EQ(message_of([&] { GptConfig::from_text(tiny + "mlp=geglu\n"); }),
            "model config: unknown mlp 'geglu' (known: gelu, relu2, swiglu)");
  EXPECT_EQ(message_of([&] { GptConfig::from_text(tiny + "logit_softcap=-1\n"); }),
            "model config: logit soft-cap must be a positive number or none, got '-1'");
  EXPECT_EQ(message_of([&] { GptConfig::from_text(tiny + "qk_norm=yes\n"); }),
            "model config holds a field that is not a number");
  EXPECT_EQ(message_of([&] { GptConfig::from_text(tiny + "n_layer=99999999999999999999\n"); }),
            "model config holds a number out of range");
  EXPECT_EQ(message_of([] { GptConfig::from_text("vocab_size=65\n"); }), "model config: model config lacks n_layer");
  EXPECT_EQ(message_of([] { GptConfig::from_text("garbage"); }), "model config line without '=': garbage");
}

TEST(ModelFamily, ArchitectureLineNamesEveryChoiceInItsPlace) {
  GptConfig c = preset_config("llama-small");
  c.vocab_size = kVocab;
  EXPECT_EQ(c.architecture_text(),
            "rotary(10000), rmsnorm(eps 1e-05), swiglu 384, 4 heads / 2 kv, untied head, no biases, gpt2 init");
  c = preset_config("nanochat-d4");
  EXPECT_EQ(c.architecture_text(), "rotary(10000), rmsnorm(eps 1e-06, no weight), embedding norm, qk-norm, relu2 1024, "
                                   "2 heads, untied head, soft-cap 15, no biases, nanochat init");
  GptConfig gpt2 = preset_config("gpt2");
  EXPECT_TRUE(gpt2.is_gpt2_architecture());
  gpt2.mlp_hidden = 4 * gpt2.n_embd;  // named or not, GPT-2's width
  gpt2.n_kv_head = gpt2.n_head;
  EXPECT_TRUE(gpt2.is_gpt2_architecture());
  gpt2.qk_norm = true;
  EXPECT_FALSE(gpt2.is_gpt2_architecture());
}

TEST(ModelFamily, ParametersAreWhatParameterShapesSays) {
  for (const auto& [name, config] : members()) {
    torch::manual_seed(0);
    Gpt model(config);
    const auto shapes = parameter_shapes(config);
    const auto parameters = model->named_parameters();
    ASSERT_EQ(parameters.size(), shapes.size()) << name;
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(parameters[i].key(), shapes[i].first) << name;
      EXPECT_EQ(parameters[i].value().sizes(), c10::IntArrayRef(shapes[i].second)) << name << " " << shapes[i].first;
    }
    const ParameterCounts counts = count_parameters(config);
    EXPECT_EQ(counts.total(), model->num_parameters()) << name;
    EXPECT_EQ(counts.decayed, [&] {
      int64_t n = 0;
      for (const auto& p : model->decay_parameters()) n += p.numel();
      return n;
    }()) << name;
  }
  // GPT-2's FLOPs per token are what they were: 6 x (parameters - positions) + 12 L C T.
  const GptConfig gpt2 = preset_config("gpt2");
  EXPECT_EQ(training_flops_per_token(gpt2, 1024),
            6.0 * static_cast<double>(count_parameters(gpt2).total() - 1024 * 768) + 12.0 * 12 * 768 * 1024);
  // nanochat's estimate_flops: 6 x (parameters - embedding) + 12 L H hs T (its head is untied).
  const GptConfig d12 = [] {
    GptConfig c = preset_config("nanochat-d12");
    c.vocab_size = 65536;
    return c;
  }();
  EXPECT_EQ(training_flops_per_token(d12, 2048),
            6.0 * static_cast<double>(count_parameters(d12).total() - 65536 * 768) + 12.0 * 12 * 6 * 128 * 2048);
}

// Rows for tokens the loaded model never had (the chat tokens of an imported 50257-row GPT-2): the mean
// of the known rows, in the embedding and in an untied head; other rows untouched.
TEST(ModelFamily, NewTokenRowsStartAsTheMeanOfTheKnownOnes) {
  for (const auto& [name, config] : members()) {
    SCOPED_TRACE(name);
    Gpt model = scrambled(config, 5);
    const torch::Tensor before_embedding = model->wte->weight.detach().clone();
    const torch::Tensor before_head = model->head_weight().detach().clone();
    set_new_token_rows_to_mean(model, 40, 45);
    const torch::Tensor mean = before_embedding.slice(0, 0, 40).mean(0);
    for (int64_t row = 40; row < 45; ++row) EXPECT_TRUE(torch::allclose(model->wte->weight[row], mean));
    EXPECT_TRUE(torch::equal(model->wte->weight.slice(0, 0, 40), before_embedding.slice(0, 0, 40)));
    EXPECT_TRUE(torch::equal(model->wte->weight.slice(0, 45), before_embedding.slice(0, 45)));
    if (!config.tie_head) {
      const torch::Tensor head_mean = before_head.slice(0, 0, 40).mean(0);
      EXPECT_TRUE(torch::allclose(model->head_weight()[44], head_mean));
      EXPECT_FALSE(torch::allclose(head_mean, mean));  // each its own mean
    }
  }
  Gpt model(members().front().second);
  EXPECT_THROW(set_new_token_rows_to_mean(model, 0, 3), std::invalid_argument);
  EXPECT_THROW(set_new_token_rows_to_mean(model, 10, kVocab + 1), std::invalid_argument);
}

TEST(ModelFamily, NanochatInitZeroesTheResidualWriters) {
  GptConfig c = sized(preset_config("nanochat-d2"), 64, 2, 2);
  torch::manual_seed(3);
  Gpt model(c);
  for (const auto& item : model->named_parameters()) {
    const auto& p = item.value();
    if (item.key().ends_with("c_proj.weight")) {
      EXPECT_EQ(p.abs().max().item<float>(), 0.0f) << item.key();
    }
    if (item.key().ends_with("c_attn.weight") || item.key().ends_with("c_fc.weight")) {
      // Uniform with the std of 1/sqrt(n_embd): bound sqrt(3 / 64).
      EXPECT_LE(p.abs().max().item<double>(), std::sqrt(3.0 / 64.0)) << item.key();
      EXPECT_NEAR(p.std().item<double>(), 1.0 / 8.0, 0.01) << item.key();
    }
  }
  EXPECT_NEAR(model->wte->weight.std().item<double>(), 1.0, 0.02);
  EXPECT_NEAR(model->lm_head->weight.std().item<double>(), 0.001, 0.0001);
}

// The fused chunked loss (soft-cap inside it) against the full logits' cross-entropy: loss and every
// gradient. fp32 throughout; the two sum the same products in different orders, so they agree to a
// few ulps of the largest terms (relative 1e-5 leaves a margin of ~10x over fp32's 1.2e-7 per op).
TEST(ModelFamily, FusedLossEqualsThePlainLossWithGradients) {
  for (const auto& [name, config] : members()) {
    const auto idx = random_ids(3, 20, kVocab, 6), targets = random_ids(3, 20, kVocab, 7);
    auto run = [&](bool fused) {
      Gpt model = scrambled(config, 5, {.fused_loss = fused, .loss = {.chunk_rows = 7}});
      model->train();
      auto loss = model->loss(idx, targets);
      loss.backward();
      std::vector<torch::Tensor> grads;
      for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
      return std::make_pair(loss.item<double>(), grads);
    };
    const auto [fused_loss, fused_grads] = run(true);
    const auto [plain_loss, plain_grads] = run(false);
    EXPECT_NEAR(fused_loss, plain_loss, 1e-5 * plain_loss) << name;
    for (size_t i = 0; i < fused_grads.size(); ++i) {
      const double scale = plain_grads[i].abs().max().item<double>() + 1e-12;
      EXPECT_LE((fused_grads[i] - plain_grads[i]).abs().max().item<double>(), 1e-5 * scale) << name << " parameter " << i;
    }
    // The cap is in effect: every logit lies within it.
    if (config.logit_softcap) {
      torch::NoGradGuard no_grad;
      EXPECT_LE(scrambled(config, 5)->forward(idx).abs().max().item<double>(), *config.logit_softcap) << name;
    }
  }
}

// A prompt read through the KV cache in pieces gives the last position's logits of one uncached read
// (rotary positions continue at the cache's length), and greedy generation across the block size gives
// the same tokens with and without the cache.
TEST(ModelFamily, KvCacheEqualsTheUncachedPath) {
  for (const auto& [name, config] : members()) {
    Gpt model = scrambled(config, 9);
    torch::NoGradGuard no_grad;
    const auto ids = random_ids(2, 12, kVocab, 10);
    KvCache cache = model->make_kv_cache();
    const ForwardOptions decoding{.cache = &cache, .last_position_only = true};
    model->forward(ids.narrow(1, 0, 5), decoding);
    model->forward(ids.narrow(1, 5, 1), decoding);
    const auto cached = model->forward(ids.narrow(1, 6, 6), decoding);
    const auto uncached = model->forward(ids, {.last_position_only = true});
    const double scale = uncached.abs().max().item<double>();
    EXPECT_LE((cached - uncached).abs().max().item<double>(), 1e-5 * scale) << name;

    SamplingOptions greedy{/*max_new_tokens=*/70, /*temperature=*/0.0, /*top_k=*/0, /*vocab_limit=*/0};
    greedy.kv_cache = true;
    const auto prompts = random_ids(2, 5, kVocab, 11);
    const auto with_cache = generate(model, prompts, greedy);
    greedy.kv_cache = false;
    const auto without = generate(model, prompts, greedy);
    EXPECT_TRUE(torch::equal(with_cache, without)) << name;
    EXPECT_GT(std::get<0>(at::_unique(with_cache[0].slice(0, 5))).numel(), 3) << name << ": a stuck sequence";
  }
}

TEST(ModelFamily, MuonTakesEachProjectionApartAndLeavesEmbeddingAndHeadToAdamW) {
  const GptConfig c = members()[2].second;  // llama: 4 heads of 8 over 2 kv-heads, SwiGLU
  torch::manual_seed(1);
  Gpt model(c);
  const MuonSplit split = split_for_muon(model);
  ASSERT_EQ(split.muon.size(), 4u * 2);
  int64_t counted = 0;
  for (const MuonMatrix& m : split.muon) {
    counted += m.param.numel();
    if (m.param.size(0) == c.qkv_rows()) {
      EXPECT_EQ(m.row_sizes, (std::vector<int64_t>{32, 16, 16}));
    } else if (m.param.size(0) == c.mlp_in_rows()) {
      EXPECT_EQ(m.row_blocks, 2);
    }
  }
  ASSERT_EQ(split.adamw_decay.size(), 2u);  // the embedding and the untied head
  EXPECT_TRUE(split.adamw_decay[0].is_same(model->wte->weight));
  EXPECT_TRUE(split.adamw_decay[1].is_same(model->lm_head->weight));
  for (const auto& p : split.adamw_decay) counted += p.numel();
  for (const auto& p : split.adamw_no_decay) counted += p.numel();
  EXPECT_EQ(counted, model->num_parameters());
  // A step moves every matrix, the unequal blocks included, and stays finite.
  LocalCommunicator comm;
  Muon muon(split.muon, MuonOptions{0.05, 0.95, true, 5, 0.0}, comm);
  const auto before = split.muon[0].param.detach().clone();
  for (auto& p : muon.parameters()) p.mutable_grad() = torch::randn_like(p);
  muon.step();
  EXPECT_FALSE(torch::equal(before, split.muon[0].param));
  EXPECT_TRUE(torch::isfinite(split.muon[0].param).all().item<bool>());
}

// Training k steps, saving, restoring into a fresh run and training on gives the uninterrupted run's
// losses bit for bit, for the nanochat block with Muon and the Llama block with AdamW.
TEST(ModelFamily, TrainingResumesExactly) {
  const std::vector<std::vector<std::string>> shapes = {
      {"--preset", "nanochat-d2", "--n-embd", "32", "--n-head", "2", "--n-kv-head", "2", "--optimizer", "muon"},
      {"--preset", "llama-small", "--n-layer", "2", "--n-embd", "32", "--mlp-hidden", "96", "--logit-softcap", "20"}};
  for (const auto& shape : shapes) {
    ScratchDir dir;
    auto args = [&](const std::string& seed) {
      std::vector<std::string> a = {"--block-size", "16", "--steps", "6", "--batch-size", "4", "--seq-len", "16",
                                    "--warmup-steps", "2", "--lr", "1e-2", "--eval-every", "0", "--out",
                                    dir.path().string(), "--device", "cpu", "--seed", seed};
      a.insert(a.end(), shape.begin(), shape.end());
      return a;
    };
    const TrainingData data = testing::token_data(testing::pattern_tokens(1500, kVocab), kVocab);
    auto straight = testing::cpu_trainer(args("4"), data);
    std::vector<double> expected;
    for (int64_t step = 0; step < 6; ++step) expected.push_back(straight->train_step(step).loss);
    EXPECT_LT(expected.back(), expected.front()) << shape[1] << ": it learns";
    {
      auto first = testing::cpu_trainer(args("4"), data);
      for (int64_t step = 0; step < 3; ++step) EXPECT_EQ(first->train_step(step).loss, expected[step]);
      first->save_checkpoint_at(3);
    }
    const Checkpoint ckpt = load_checkpoint(checkpoint_path(dir.path(), 3));
    EXPECT_EQ(ckpt.meta.model_config, straight->model()->config());
    auto resumed = testing::cpu_trainer(args("99"), data);
    ASSERT_EQ(resumed->restore(ckpt), 3);
    for (int64_t step = 3; step < 6; ++step) EXPECT_EQ(resumed->train_step(step).loss, expected[step]) << shape[1];
  }
}

// ---- Hugging Face interop, judged by transformers ----

bool transformers_missing() {
  return !testing::python_imports("transformers, safetensors") ||
         !testing::python_imports("transformers.models.nanochat, transformers.models.qwen3");
}

double our_loss(Gpt& model, const torch::Tensor& tokens, int64_t vocab) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto inputs = tokens.narrow(1, 0, tokens.size(1) - 1), targets = tokens.narrow(1, 1, tokens.size(1) - 1);
  // The cross-entropy of the full logits (what the unfused loss computes), over the first `vocab` ids.
  const auto logits = model->forward(inputs, {.vocab_limit = vocab});
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}).to(torch::kFloat),
                                              targets.reshape({-1}))
      .item<double>();
}

torch::Tensor ids_of(const nlohmann::json& reference) {
  std::vector<int64_t> flat;
  const auto rows = reference["ids"].get<std::vector<std::vector<int64_t>>>();
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return torch::tensor(flat, torch::kLong).view({static_cast<int64_t>(rows.size()), -1});
}

// Our export, read by transformers' own class: its fp32 loss is ours (relative 1e-5: the same fp32
// operations in other orders over a few hundred terms) and its greedy generate() gives our ids.
TEST(ModelFamilyTransformers, ExportIsReadByTransformersWithOurLossAndIds) {
  if (transformers_missing()) GTEST_SKIP() << "transformers (with NanoChat and Qwen3) is not importable by '"
                                           << testing::reference_python() << "'";
  const std::vector<std::pair<std::string, std::string>> expected_class = {
      {"nanochat", "NanoChatForCausalLM"}, {"llama", "LlamaForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"}};
  for (const auto& [name, cls] : expected_class) {
    GptConfig config;
    for (const auto& [n, c] : members()) {
      if (n == name) config = c;
    }
    config.block_size = 64;
    config.vocab_size = 128;  // padded; 100 of them tokens
    ScratchDir dir;
    Gpt model = scrambled(config, 21);
    std::string why;
    ASSERT_TRUE(hf_family_of(config, &why)) << name << ": " << why;
    export_hf_family(model, 100, dir.path() / "hf");
    const auto tokens = random_ids(2, 24, 100, 22);
    const auto theirs = testing::run_python_json(
        MYGPT_FAMILY_REFERENCE_SCRIPT, {"loss", (dir.path() / "hf").string(), "--tokens", testing::tokens_argument(tokens)},
        dir.path());
    ASSERT_FALSE(theirs.is_null()) << name;
    EXPECT_EQ(theirs["class"], cls);
    const double loss = our_loss(model, tokens, 100);
    EXPECT_NEAR(loss, theirs["loss"].get<double>(), 1e-5 * loss) << name;

    const auto prompts = random_ids(2, 8, 100, 23);
    const auto greedy_ids = testing::run_python_json(
        MYGPT_FAMILY_REFERENCE_SCRIPT,
        {"greedy", (dir.path() / "hf").string(), "--tokens", testing::tokens_argument(prompts), "--max-new-tokens", "40"},
        dir.path());
    ASSERT_FALSE(greedy_ids.is_null()) << name;
    SamplingOptions greedy{40, 0.0, 0, /*vocab_limit=*/100};
    greedy.kv_cache = true;
    EXPECT_TRUE(torch::equal(generate(model, prompts, greedy), ids_of(greedy_ids))) << name;
  }
}

// A model transformers made and saved, imported: our loss is transformers' and our greedy ids its ids.
TEST(ModelFamilyTransformers, ImportOfTransformersModelsGivesTheirLossAndIds) {
  if (transformers_missing()) GTEST_SKIP() << "transformers (with NanoChat and Qwen3) is not importable by '"
                                           << testing::reference_python() << "'";
  for (const std::string kind : {"nanochat", "llama", "qwen3"}) {
    ScratchDir dir;
    const auto tokens = random_ids(2, 24, 100, 31);
    const auto theirs = testing::run_python_json(
        MYGPT_FAMILY_REFERENCE_SCRIPT,
        {"make", kind, (dir.path() / "hf").string(), "--vocab", "100", "--seed", "5", "--tokens",
         testing::tokens_argument(tokens)},
        dir.path());
    ASSERT_FALSE(theirs.is_null()) << kind;
    ASSERT_NE(open_hf_folder(dir.path() / "hf").mapping.architecture, "GPT-2");
    HfGpt2Model imported = load_hf_model(dir.path() / "hf", /*vocab_multiple=*/64);
    EXPECT_EQ(imported.vocab_size, 100);
    EXPECT_EQ(imported.config.vocab_size, 128);
    const double loss = our_loss(imported.model, tokens, 100);
    EXPECT_NEAR(loss, theirs["loss"].get<double>(), 1e-5 * loss) << kind;

    const auto prompts = random_ids(2, 8, 100, 32);
    const auto greedy_ids = testing::run_python_json(
        MYGPT_FAMILY_REFERENCE_SCRIPT,
        {"greedy", (dir.path() / "hf").string(), "--tokens", testing::tokens_argument(prompts), "--max-new-tokens", "40"},
        dir.path());
    ASSERT_FALSE(greedy_ids.is_null()) << kind;
    SamplingOptions greedy{40, 0.0, 0, /*vocab_limit=*/100};
    greedy.kv_cache = true;
    imported.model->eval();
    EXPECT_TRUE(torch::equal(generate(imported.model, prompts, greedy), ids_of(greedy_ids))) << kind;
  }
}

TEST(ModelFamilyTransformers, ConfigThatDisagreesWithItsWeightsIsOneLine) {
  ScratchDir dir;
  GptConfig config = members()[1].second;  // nanochat
  config.vocab_size = 128;
  Gpt model = scrambled(config, 3);
  export_hf_family(model, 100, dir.path());
  std::string text = read_whole_file(dir.path() / "config.json", "config");
  const auto at = text.find("\"intermediate_size\": 128");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 24, "\"intermediate_size\": 120");
  write_file_atomically(dir.path() / "config.json", text);
  const std::string message = message_of([&] { open_hf_folder(dir.path()); });
  EXPECT_NE(message.find("tensor 'model.layers.0.mlp.fc1.weight' has shape [128, 32], expected [120, 32] from config.json"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  // A member no transformers class computes is refused by export in one line.
  const std::string refusal = message_of([&] { export_hf_family(scrambled(members()[4].second, 1), 50, dir.path() / "x"); });
  EXPECT_NE(refusal.find("HF export: no transformers class computes this model"), std::string::npos) << refusal;
}

GptConfig member(const std::string& name) {
  for (const auto& [n, c] : members()) {
    if (n == name) return c;
  }
  throw std::logic_error("no member " + name);
}

// config.json of an exported folder with `edit` applied; returns open_hf_folder's refusal ("" if it opens).
template <typename Edit>
std::string open_edited(const std::filesystem::path& folder, Edit&& edit) {
  nlohmann::json config = nlohmann::json::parse(read_whole_file(folder / "config.json", "config"));
  edit(config);
  write_file_atomically(folder / "config.json", config.dump(2));
  try {
    open_hf_folder(folder);
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

// A scaled RoPE is refused whichever key names it: rope_type, or type as configs before transformers 4.45
// wrote it (CodeLlama's linear, Llama 3.1's llama3), in rope_scaling or rope_parameters.
TEST(ModelFamily, ScaledRopeIsRefusedWhicheverKeyNamesIt) {
  ScratchDir dir;
  GptConfig config = member("llama");
  config.vocab_size = 128;
  export_hf_family(scrambled(config, 4), 100, dir.path());
  const nlohmann::json exported = nlohmann::json::parse(read_whole_file(dir.path() / "config.json", "config"));
  const auto restore = [&](nlohmann::json& c) { c = exported; };
  EXPECT_EQ(open_edited(dir.path(), restore), "");
  EXPECT_EQ(open_edited(dir.path(), [&](nlohmann::json& c) { restore(c); c["rope_scaling"] = nullptr; }), "");
  for (const std::string key : {"type", "rope_type"}) {
    for (const std::string where : {"rope_scaling", "rope_parameters"}) {
      SCOPED_TRACE(where + "." + key);
      const std::string message = open_edited(dir.path(), [&](nlohmann::json& c) {
        restore(c);
        if (where == "rope_scaling") {
          c.erase("rope_parameters");
          c["rope_theta"] = 10000.0;
          c["rope_scaling"] = {{key, "linear"}, {"factor", 4.0}};
        } else {
          c["rope_parameters"] = {{key, "llama3"}, {"rope_theta", 10000.0}, {"factor", 32.0}};
        }
      });
      EXPECT_NE(message.find(where + ": " + key + " is '"), std::string::npos) << message;
      EXPECT_NE(message.find("no scaled RoPE"), std::string::npos) << message;
    }
  }
}

// Qwen3's sliding window, as its config resolves it: refused only where a layer attends through a window
// shorter than the context.
TEST(ModelFamily, Qwen3SlidingWindowIsRefusedOnlyWhereALayerSlides) {
  ScratchDir dir;
  GptConfig config = member("qwen3");
  config.vocab_size = 128;
  config.block_size = 64;
  ASSERT_GE(config.n_layer, 2);
  export_hf_family(scrambled(config, 5), 100, dir.path());
  const nlohmann::json exported = nlohmann::json::parse(read_whole_file(dir.path() / "config.json", "config"));
  const auto sliding = [&](nlohmann::json extra) {
    return open_edited(dir.path(), [&](nlohmann::json& c) {
      c = exported;
      c["use_sliding_window"] = true;
      c.erase("layer_types");
      c.update(extra);
    });
  };
  const int64_t layers = config.n_layer;
  EXPECT_EQ(sliding({{"sliding_window", 16}, {"max_window_layers", layers}}), "") << "no layer from max_window_layers on";
  EXPECT_EQ(sliding({{"sliding_window", 64}, {"max_window_layers", 1}}), "") << "a window as long as the context";
  EXPECT_EQ(sliding({{"sliding_window", 16}, {"layer_types", std::vector<std::string>(layers, "full_attention")}}), "");
  for (const nlohmann::json& extra :
       {nlohmann::json{{"sliding_window", 16}, {"max_window_layers", 1}},
        nlohmann::json{{"sliding_window", 16}, {"max_window_layers", layers}, {"layer_types", [&] {
                         std::vector<std::string> t(layers, "full_attention");
                         t.back() = "sliding_attention";
                         return t;
                       }()}}}) {
    const std::string message = sliding(extra);
    EXPECT_NE(message.find("use_sliding_window is true and layers attend through a window of 16 tokens"),
              std::string::npos)
        << extra.dump() << ": " << message;
  }
  EXPECT_NE(sliding({{"layer_types", {"full_attention"}}}).find("layer_types is not a list of num_hidden_layers"),
            std::string::npos);
}

// The special-token ids of the folder a model's tokenizer came from go into an export's config.json:
// ids of the exported rows only (an id of another vocabulary would name a row that is not there).
TEST(ModelFamily, ExportCarriesTheSourceFoldersSpecialTokenIds) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.path() / "source");
  write_file_atomically(dir.path() / "source" / "config.json",
                        R"({"bos_token_id": 1, "eos_token_id": [2, 3], "pad_token_id": 100})");
  const HfSpecialTokenIds ids = hf_special_token_ids(dir.path() / "source", 100);
  EXPECT_EQ(ids.bos, nlohmann::json(1));
  EXPECT_EQ(ids.eos, nlohmann::json({2, 3}));
  EXPECT_TRUE(ids.pad.is_null()) << "100 is no row of a 100-row export";
  EXPECT_TRUE(hf_special_token_ids(dir.path() / "no-such-folder", 100).eos.is_null());
  GptConfig config = member("llama");
  config.vocab_size = 128;
  export_hf_family(scrambled(config, 6), 100, dir.path() / "hf", ids);
  const auto written = nlohmann::json::parse(read_whole_file(dir.path() / "hf" / "config.json", "config"));
  EXPECT_EQ(written["bos_token_id"], 1);
  EXPECT_EQ(written["eos_token_id"], nlohmann::json({2, 3}));
  EXPECT_TRUE(written["pad_token_id"].is_null());
}

}  // namespace
}  // namespace mygpt::model_family_test
