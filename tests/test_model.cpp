// The GPT model: shapes, parameter groups, weight tying, initialization, config handling, causality
// and sampling.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "model/gpt.h"
#include "model/gpt_config.h"
#include "model/sampling.h"
#include "tests/test_support.h"

namespace mygpt::model_test {
namespace {

using testing::invalid_argument_message;

GptConfig tiny_config(int64_t vocab_size = 17, int64_t block_size = 16) {
  return testing::small_config(vocab_size, block_size);
}

Gpt tiny_model(uint64_t seed = 0, int64_t vocab_size = 17, int64_t block_size = 16) {
  torch::manual_seed(seed);
  return Gpt(tiny_config(vocab_size, block_size));
}

torch::Tensor random_tokens(int64_t b, int64_t t, int64_t vocab_size, uint64_t seed = 1) {
  torch::manual_seed(seed);
  return torch::randint(vocab_size, {b, t}, torch::kLong);
}

int64_t total_numel(const std::vector<torch::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

TEST(GptModel, ForwardAndLossShapes) {
  Gpt model = tiny_model();
  auto idx = random_tokens(3, 10, 17);
  auto logits = model->forward(idx);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 10, 17}));
  EXPECT_EQ(logits.scalar_type(), torch::kFloat);

  auto loss = model->loss(idx, random_tokens(3, 10, 17, 2));
  EXPECT_EQ(loss.dim(), 0);
  // Small initial weights give nearly uniform predictions: the loss starts near ln(vocab).
  EXPECT_NEAR(loss.item<double>(), std::log(17.0), 0.3);
}

TEST(GptModel, ForwardRejectsSequencesLongerThanTheBlock) {
  Gpt model = tiny_model();
  EXPECT_NO_THROW(model->forward(random_tokens(1, 16, 17)));
  EXPECT_THROW(model->forward(random_tokens(1, 17, 17)), c10::Error);
}

TEST(GptModel, Gpt2PresetParameterGroups) {
  const GptConfig config = preset_config("gpt2");
  ASSERT_EQ(config.vocab_size, 50304);
  Gpt model(config);
  const auto decay = model->decay_parameters();
  const auto no_decay = model->no_decay_parameters();
  EXPECT_EQ(decay.size(), 50u);
  EXPECT_EQ(total_numel(decay), 124354560);
  EXPECT_EQ(no_decay.size(), 98u);
  EXPECT_EQ(total_numel(no_decay), 121344);
  EXPECT_EQ(model->num_parameters(), 124354560 + 121344);
  EXPECT_EQ(decay.size() + no_decay.size(), model->parameters().size());
  for (const auto& p : decay) EXPECT_GE(p.dim(), 2);
  for (const auto& p : no_decay) EXPECT_EQ(p.dim(), 1);
}

TEST(GptModel, CountParametersMatchesTheBuiltModel) {
  // plan sizes models with count_parameters instead of building them: it must agree with the model.
  for (const bool bias : {true, false}) {
    for (const auto& [layers, heads, width, vocab, block] :
         std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>>{{2, 2, 32, 65, 16}, {3, 4, 64, 50304, 128}}) {
      GptConfig c = testing::small_config(vocab, block, layers, heads, width);
      c.n_layer = layers;
      c.n_head = heads;
      c.n_embd = width;
      c.vocab_size = vocab;
      c.block_size = block;
      c.bias = bias;
      Gpt model(c);
      int64_t decayed = 0, not_decayed = 0;
      for (const auto& p : model->decay_parameters()) decayed += p.numel();
      for (const auto& p : model->no_decay_parameters()) not_decayed += p.numel();
      const ParameterCounts n = count_parameters(c);
      EXPECT_EQ(n.decayed, decayed) << layers << " layers, bias " << bias;
      EXPECT_EQ(n.not_decayed, not_decayed) << layers << " layers, bias " << bias;
      EXPECT_EQ(n.decayed_tensors, static_cast<int64_t>(model->decay_parameters().size()));
      EXPECT_EQ(n.not_decayed_tensors, static_cast<int64_t>(model->no_decay_parameters().size()));
      EXPECT_EQ(n.total(), model->num_parameters());
      // Checkpoints are checked against parameter_shapes before a model of their claimed shape is built.
      const auto shapes = parameter_shapes(c);
      const auto named = model->named_parameters();
      ASSERT_EQ(shapes.size(), named.size());
      for (size_t i = 0; i < shapes.size(); ++i) {
        EXPECT_EQ(shapes[i].first, named[i].key());
        EXPECT_EQ(c10::IntArrayRef(shapes[i].second), named[i].value().sizes()) << shapes[i].first;
      }
    }
  }
}

TEST(GptModel, GroupsPartitionTheParameters) {
  Gpt model = tiny_model();
  std::set<const void*> seen;
  for (const auto& p : model->decay_parameters()) EXPECT_TRUE(seen.insert(p.data_ptr()).second);
  for (const auto& p : model->no_decay_parameters()) EXPECT_TRUE(seen.insert(p.data_ptr()).second);
  EXPECT_EQ(seen.size(), model->parameters().size());
}

TEST(GptModel, OutputHeadIsTiedToTheTokenEmbedding) {
  const int64_t vocab = 17;
  Gpt model = tiny_model(0, vocab);
  // The token embedding is the only vocabulary-sized matrix: there is no separate head.
  int64_t vocab_sized = 0;
  for (const auto& p : model->parameters()) {
    if (p.dim() == 2 && (p.size(0) == vocab || p.size(1) == vocab)) {
      ++vocab_sized;
      EXPECT_EQ(p.data_ptr(), model->wte->weight.data_ptr());
    }
  }
  EXPECT_EQ(vocab_sized, 1);

  // logits == ln_f(blocks(wte(idx) + wpe(pos))) @ wte.weight^T
  model->eval();
  auto idx = random_tokens(2, 9, vocab);
  torch::NoGradGuard no_grad;
  auto x = model->wte(idx) + model->wpe(torch::arange(9, torch::kLong));
  for (const auto& block : *model->h) x = block->as<BlockImpl>()->forward({x}).whole();
  auto expected = torch::matmul(model->ln_f(x), model->wte->weight.t());
  EXPECT_TRUE(torch::allclose(model->forward(idx), expected, 1e-5, 1e-6));
}

TEST(GptModel, GradientReachesTheEmbeddingThroughTheHead) {
  const int64_t vocab = 17;
  Gpt model = tiny_model(0, vocab);
  // Inputs use tokens 0..7 only; targets use 8..15. Rows 8..16 of wte are never looked up, so any
  // gradient they get has come through the output head.
  torch::manual_seed(3);
  auto idx = torch::randint(0, 8, {2, 12}, torch::kLong);
  auto targets = torch::randint(8, 16, {2, 12}, torch::kLong);
  model->loss(idx, targets).backward();
  auto grad = model->wte->weight.grad();
  ASSERT_TRUE(grad.defined());
  for (int64_t row = 8; row < vocab; ++row) {
    EXPECT_GT(grad[row].abs().sum().item<double>(), 0.0) << "row " << row;
  }
}

TEST(GptModel, InitializationStatistics) {
  torch::manual_seed(123);
  GptConfig config;
  config.vocab_size = 512;
  config.block_size = 256;
  config.n_layer = 4;
  config.n_head = 4;
  config.n_embd = 256;
  Gpt model(config);
  const double residual_std = 0.02 / std::sqrt(2.0 * 4);
  auto block = model->h[1]->as<BlockImpl>();
  auto std_of = [](const torch::Tensor& t) { return t.std().item<double>(); };
  EXPECT_NEAR(std_of(model->wte->weight), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(std_of(model->wpe->weight), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(std_of(block->attn->c_attn->weight), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(std_of(block->mlp->c_fc->weight), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(std_of(block->attn->c_proj->weight), residual_std, residual_std * 0.03);
  EXPECT_NEAR(std_of(block->mlp->c_proj->weight), residual_std, residual_std * 0.03);
  EXPECT_NEAR(block->attn->c_attn->weight.mean().item<double>(), 0.0, 1e-3);

  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const auto& p = item.value();
    const bool is_norm = name.find("ln_") != std::string::npos;
    if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      EXPECT_EQ(p.abs().max().item<double>(), 0.0) << name;
    } else if (is_norm) {
      EXPECT_TRUE(torch::equal(p, torch::ones_like(p))) << name;
    }
  }
}

TEST(GptConfigTest, ValidateRejectsBadShapes) {
  GptConfig c = tiny_config();
  EXPECT_NO_THROW(c.validate());

  c.n_head = 3;  // 32 is not a multiple of 3
  EXPECT_NE(invalid_argument_message([&] { c.validate(); }).find("n_head"), std::string::npos);
  c = tiny_config();
  c.n_layer = 0;
  EXPECT_NE(invalid_argument_message([&] { c.validate(); }).find("n_layer"), std::string::npos);
  c = tiny_config();
  c.n_embd = -32;
  EXPECT_NE(invalid_argument_message([&] { c.validate(); }).find("n_embd"), std::string::npos);
  c = tiny_config();
  c.vocab_size = 0;
  EXPECT_NE(invalid_argument_message([&] { c.validate(); }).find("vocab"), std::string::npos);
  c = tiny_config();
  c.block_size = -1;
  EXPECT_NE(invalid_argument_message([&] { c.validate(); }).find("block"), std::string::npos);
  c = tiny_config();
  c.dropout = 1.0;
  EXPECT_NE(invalid_argument_message([&] { c.validate(); }).find("dropout"), std::string::npos);
  c.dropout = -0.1;
  EXPECT_THROW(c.validate(), std::invalid_argument);

  // The model validates its config too.
  c = tiny_config();
  c.n_head = 5;
  EXPECT_THROW(Gpt{c}, std::invalid_argument);
}

TEST(GptConfigTest, Presets) {
  const std::string message = invalid_argument_message([] { preset_config("nope"); });
  EXPECT_NE(message.find("nope"), std::string::npos) << message;
  EXPECT_NE(message.find("gpt2"), std::string::npos) << message;  // lists the known names

  const GptConfig gpt2 = preset_config("gpt2");
  EXPECT_EQ(gpt2.n_layer, 12);
  EXPECT_EQ(gpt2.n_head, 12);
  EXPECT_EQ(gpt2.n_embd, 768);
  EXPECT_EQ(gpt2.block_size, 1024);
  EXPECT_EQ(preset_config("gpt2-xl").n_embd, 1600);
  const auto names = preset_names();
  for (const char* name : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "shakespeare-char", "small", "tiny"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    GptConfig c = preset_config(name);
    if (c.vocab_size == 0) c.vocab_size = 65;  // character presets leave the vocabulary to the tokenizer
    EXPECT_NO_THROW(c.validate()) << name;
  }
}

TEST(GptConfigTest, TextRoundTrip) {
  GptConfig c = tiny_config(65, 48);
  c.n_layer = 3;
  c.dropout = 0.1;
  c.bias = false;
  const GptConfig back = GptConfig::from_text(c.to_text());
  EXPECT_EQ(back, c);
  EXPECT_EQ(GptConfig::from_text(preset_config("gpt2").to_text()), preset_config("gpt2"));

  EXPECT_THROW(GptConfig::from_text("vocab_size=65\n"), std::invalid_argument);  // fields missing
  EXPECT_THROW(GptConfig::from_text("garbage"), std::invalid_argument);
  std::string bad = c.to_text();
  bad.replace(bad.find("n_layer=3"), 9, "n_layer=x");
  EXPECT_THROW(GptConfig::from_text(bad), std::invalid_argument);
}

TEST(GptConfigTest, PaddedVocabSize) {
  EXPECT_EQ(padded_vocab_size(50257), 50304);
  EXPECT_EQ(padded_vocab_size(50304), 50304);
  EXPECT_EQ(padded_vocab_size(65), 128);
  EXPECT_EQ(padded_vocab_size(64), 64);
  EXPECT_EQ(padded_vocab_size(10, 8), 16);
}

TEST(GptModel, IsCausal) {
  Gpt model = tiny_model();
  model->eval();
  torch::NoGradGuard no_grad;
  auto idx = random_tokens(2, 12, 17);
  auto changed = idx.clone();
  changed.index_put_({torch::indexing::Slice(), 7}, (idx.index({torch::indexing::Slice(), 7}) + 5) % 17);
  auto a = model->forward(idx);
  auto b = model->forward(changed);
  using torch::indexing::Slice;
  EXPECT_TRUE(torch::allclose(a.index({Slice(), Slice(0, 7)}), b.index({Slice(), Slice(0, 7)}), 1e-5, 1e-6));
  // The changed position and those after it do see the change.
  EXPECT_FALSE(torch::allclose(a.index({Slice(), Slice(7)}), b.index({Slice(), Slice(7)}), 1e-5, 1e-6));
}

TEST(Sampling, SameSeedSameSampleAndLength) {
  Gpt model = tiny_model();
  model->train();
  auto prompt = random_tokens(2, 4, 17);
  SamplingOptions options;
  options.max_new_tokens = 20;
  options.temperature = 1.0;
  torch::manual_seed(42);
  auto a = generate(model, prompt, options);
  torch::manual_seed(42);
  auto b = generate(model, prompt, options);
  torch::manual_seed(43);
  auto c = generate(model, prompt, options);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{2, 24}));
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, c));
  EXPECT_TRUE(torch::equal(a.slice(1, 0, 4), prompt));  // the prompt is kept
  EXPECT_GE(a.min().item<int64_t>(), 0);
  EXPECT_LT(a.max().item<int64_t>(), 17);
  EXPECT_TRUE(model->is_training());  // the training flag is restored
  EXPECT_FALSE(a.requires_grad());
}

TEST(Sampling, CropsTheContextToTheBlockSize) {
  const int64_t block = 8;
  Gpt model = tiny_model(5, 17, block);
  auto prompt = random_tokens(1, 6, 17);
  SamplingOptions greedy;
  greedy.max_new_tokens = 20;
  greedy.temperature = 0.0;
  auto out = generate(model, prompt, greedy);
  ASSERT_EQ(out.size(1), 26);
  // Each greedy token is the argmax after the last `block` tokens before it.
  model->eval();
  torch::NoGradGuard no_grad;
  for (int64_t i = 6; i < 26; ++i) {
    auto context = out.slice(1, std::max<int64_t>(0, i - block), i);
    const int64_t expected = model->forward(context).select(1, -1).argmax(-1).item<int64_t>();
    EXPECT_EQ(out[0][i].item<int64_t>(), expected) << "position " << i;
  }
}

TEST(Sampling, TopKOneIsGreedy) {
  Gpt model = tiny_model(7);
  auto prompt = random_tokens(3, 5, 17, 9);
  SamplingOptions greedy;
  greedy.max_new_tokens = 15;
  greedy.temperature = 0.0;
  SamplingOptions top1 = greedy;
  top1.temperature = 1.3;
  top1.top_k = 1;
  torch::manual_seed(1);
  auto a = generate(model, prompt, greedy);
  torch::manual_seed(2);
  auto b = generate(model, prompt, top1);
  EXPECT_TRUE(torch::equal(a, b));
}

TEST(Sampling, RejectsBadOptions) {
  Gpt model = tiny_model();
  auto prompt = random_tokens(1, 3, 17);
  SamplingOptions o;
  o.max_new_tokens = -1;
  EXPECT_THROW(generate(model, prompt, o), std::invalid_argument);
  o = SamplingOptions{};
  o.temperature = -1;
  EXPECT_THROW(generate(model, prompt, o), std::invalid_argument);
  o = SamplingOptions{};
  EXPECT_THROW(generate(model, torch::zeros({1, 0}, torch::kLong), o), std::invalid_argument);
  o.max_new_tokens = 0;
  EXPECT_TRUE(torch::equal(generate(model, prompt, o), prompt));
}

}  // namespace
}  // namespace mygpt::model_test
