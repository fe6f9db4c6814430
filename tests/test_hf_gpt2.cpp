// GPT-2 in Hugging Face's layout: export/import round trips, refusals of what we do not implement,
// sampling that never draws padded ids, and agreement with transformers itself (skipped, with one
// line, where the test Python lacks transformers).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "expect_refused.h"
#include "launcher/inference_model.h"
#include "model/hf/hf_export_check.h"
#include "model/hf/hf_gpt2.h"
#include "model/hf/safetensors_file.h"
#include "model/sampling.h"
#include "reference_python.h"
#include "scratch_dir.h"

#ifndef MYGPT_TORCH_PYTHON
#define MYGPT_TORCH_PYTHON ""
#endif
#ifndef MYGPT_HF_REFERENCE_SCRIPT
#define MYGPT_HF_REFERENCE_SCRIPT ""
#endif

namespace mygpt::hf_gpt2_test {
namespace {
namespace fs = std::filesystem;
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// The "tiny" preset (2 layers, 2 heads, width 32) with 64 positions, as tests/hf_reference.py makes.
GptConfig tiny_config(int64_t vocab_size, bool bias = true) {
  GptConfig config = preset_config("tiny");
  config.vocab_size = vocab_size;
  config.block_size = 64;
  config.bias = bias;
  return config;
}

// Weights large enough that any mapping mistake (a missed transpose, a swapped tensor) moves the loss.
Gpt scrambled_model(const GptConfig& config, int seed) {
  torch::manual_seed(seed);
  Gpt model(config);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const bool gain = item.key().find("ln_") != std::string::npos && item.key().ends_with(".weight");
    item.value().copy_(gain ? 1.0 + 0.3 * torch::randn_like(item.value()) : 0.3 * torch::randn_like(item.value()));
  }
  return model;
}

// Two rows of fixed ids spread over the vocabulary, its last id included.
torch::Tensor fixed_tokens(int64_t vocab_size) {
  auto tokens = (torch::arange(24, torch::kLong) * 7919 + 3) % vocab_size;
  tokens[23] = vocab_size - 1;
  return tokens.view({2, 12});
}

// Next-token losses over the first vocab_limit ids, as transformers computes them over its vocabulary.
torch::Tensor token_losses(Gpt& model, const torch::Tensor& tokens, int64_t vocab_limit) {
  torch::NoGradGuard no_grad;
  model->eval();
  auto logits = limit_vocab(model->forward(tokens), vocab_limit);
  logits = logits.slice(1, 0, -1).reshape({-1, logits.size(-1)});
  return torch::nn::functional::cross_entropy(logits, tokens.slice(1, 1).reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
}

NamedTensors read_all(const fs::path& file) {
  const auto reader = SafetensorsReader::open(file);
  NamedTensors out;
  for (const auto& name : reader.names()) out.emplace_back(name, reader.tensor(name));
  return out;
}

torch::Tensor& tensor_named(NamedTensors& tensors, const std::string& name) {
  for (auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  throw std::logic_error("test: no tensor " + name);
}

void edit_weights(const fs::path& folder, const std::function<void(NamedTensors&)>& edit) {
  auto tensors = read_all(folder / "model.safetensors");
  edit(tensors);
  write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}});
}

nlohmann::json read_json(const fs::path& file) { return nlohmann::json::parse(read_whole_file(file, "test json")); }

void edit_config(const fs::path& folder, const std::function<void(nlohmann::json&)>& edit) {
  auto config = read_json(folder / "config.json");
  edit(config);
  write_file_atomically(folder / "config.json", config.dump());
}

fs::path copy_of(const fs::path& folder, const fs::path& to) {
  fs::remove_all(to);
  fs::copy(folder, to, fs::copy_options::recursive);
  return to;
}

// A scrambled tiny model exported to dir/good: the starting point that refusal tests damage.
fs::path export_good_folder(const ScratchDir& dir, int seed) {
  auto model = scrambled_model(tiny_config(100), seed);
  const fs::path good = dir.path() / "good";
  export_hf_gpt2(model, 100, good);
  return good;
}

void expect_same_parameters(Gpt& a, Gpt& b) {
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
}

TEST(HfGpt2, ExportThenImportReproducesTheModel) {
  ScratchDir dir;
  auto model = scrambled_model(tiny_config(128), 1);
  const fs::path folder = dir.path() / "new" / "hf";  // created with its parent
  export_hf_gpt2(model, 100, folder);
  EXPECT_TRUE(is_hf_model_folder(folder));
  EXPECT_FALSE(is_hf_model_folder(dir.path()));

  const auto config = read_json(folder / "config.json");
  EXPECT_EQ(config["model_type"], "gpt2");
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(config["vocab_size"], 100);
  EXPECT_EQ(config["n_positions"], 64);
  EXPECT_EQ(config["n_ctx"], 64);
  EXPECT_EQ(config["n_embd"], 32);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_TRUE(config["bos_token_id"].is_null());  // 50256 would lie outside a 100-token vocabulary

  const auto weights = SafetensorsReader::open(folder / "model.safetensors");
  EXPECT_EQ(weights.metadata().at("format"), "pt");
  EXPECT_EQ(weights.names().size(), 2u + 12 * 2 + 2);
  EXPECT_FALSE(weights.has("lm_head.weight"));
  EXPECT_TRUE(torch::equal(weights.tensor("transformer.wte.weight"), model->wte->weight.slice(0, 0, 100)));
  const auto conv1d = weights.tensor("transformer.h.1.attn.c_attn.weight");
  EXPECT_EQ(conv1d.sizes(), c10::IntArrayRef({32, 96}));  // HF's (in, out)
  EXPECT_TRUE(torch::equal(conv1d, model->named_parameters()["h.1.attn.c_attn.weight"].t()));
  for (const char* square : {"h.0.attn.c_proj.weight", "h.1.attn.c_proj.weight"}) {  // the shape cannot tell
    EXPECT_TRUE(
        torch::equal(weights.tensor(std::string("transformer.") + square), model->named_parameters()[square].t()))
        << square;
  }
  EXPECT_EQ(weights.info("transformer.h.0.mlp.c_fc.weight").dtype_name, "F32");

  auto imported = load_hf_gpt2(folder);
  EXPECT_EQ(imported.vocab_size, 100);
  EXPECT_EQ(imported.config.vocab_size, 128);
  EXPECT_EQ(imported.config, imported.model->config());
  auto expected = tiny_config(128);
  EXPECT_EQ(imported.config, expected);
  const auto ours = model->named_parameters(), theirs = imported.model->named_parameters();
  for (const auto& item : ours) {
    if (item.key() == "wte.weight") continue;
    EXPECT_TRUE(torch::equal(item.value(), theirs[item.key()])) << item.key();
  }
  const auto wte = imported.model->wte->weight;
  EXPECT_TRUE(torch::equal(wte.slice(0, 0, 100), model->wte->weight.slice(0, 0, 100)));
  EXPECT_EQ(wte.slice(0, 100).abs().max().item<float>(), 0.0f) << "padded rows must be zero";
  const auto tokens = fixed_tokens(100);
  EXPECT_TRUE(torch::allclose(token_losses(imported.model, tokens, 100), token_losses(model, tokens, 100), 1e-6, 1e-7));

  auto unpadded = load_hf_gpt2(folder, /*vocab_multiple=*/1);
  EXPECT_EQ(unpadded.config.vocab_size, 100);
  EXPECT_EQ(read_hf_gpt2_config(folder, 1).config.vocab_size, 100);
}

TEST(HfGpt2, Gpt2VocabularyGetsItsSpecialTokensAndPadding) {
  ScratchDir dir;
  auto model = scrambled_model(tiny_config(50304), 2);
  export_hf_gpt2(model, 50257, dir.path());
  const auto config = read_json(dir.path() / "config.json");
  EXPECT_EQ(config["bos_token_id"], 50256);
  EXPECT_EQ(config["eos_token_id"], 50256);
  const auto shape = read_hf_gpt2_config(dir.path());
  EXPECT_EQ(shape.vocab_size, 50257);
  EXPECT_EQ(shape.config.vocab_size, 50304);
  EXPECT_EQ(shape.config.dropout, 0.0);
}

TEST(HfGpt2, BiaslessModelExportsWithZeroBiases) {
  ScratchDir dir;
  auto model = scrambled_model(tiny_config(100, /*bias=*/false), 3);
  export_hf_gpt2(model, 100, dir.path());
  const auto weights = SafetensorsReader::open(dir.path() / "model.safetensors");
  EXPECT_EQ(weights.tensor("transformer.h.0.attn.c_attn.bias").abs().max().item<float>(), 0.0f);
  EXPECT_EQ(weights.tensor("transformer.ln_f.bias").abs().max().item<float>(), 0.0f);
  auto imported = load_hf_gpt2(dir.path(), 1);
  EXPECT_TRUE(imported.config.bias);
  const auto tokens = fixed_tokens(100);
  EXPECT_TRUE(torch::allclose(token_losses(imported.model, tokens, 0), token_losses(model, tokens, 0), 1e-6, 1e-7));
}

TEST(HfGpt2, ReadsUnprefixedNamesSkipsMaskBuffersAndChecksATiedHead) {
  ScratchDir dir;
  auto model = scrambled_model(tiny_config(100), 4);
  const fs::path folder = dir.path() / "hf";
  export_hf_gpt2(model, 100, folder);
  edit_weights(folder, [](NamedTensors& tensors) {
    for (auto& [name, t] : tensors) name = name.substr(std::string("transformer.").size());  // GPT2Model's names
    tensors.emplace_back("h.0.attn.bias", torch::ones({1, 1, 64, 64}).tril());
    tensors.emplace_back("h.1.attn.masked_bias", torch::tensor(-1e4));
    tensors.emplace_back("lm_head.weight", tensor_named(tensors, "wte.weight").clone());
  });
  auto imported = load_hf_gpt2(folder, 1);
  expect_same_parameters(imported.model, model);

  edit_weights(folder, [](NamedTensors& tensors) { tensor_named(tensors, "lm_head.weight")[3][4] += 1.0f; });
  expect_refused([&] { load_hf_gpt2(folder); }, {"lm_head.weight", "but config.json ties them"});
  // An untied folder is not told that its config ties them (issue 53): it says it unties them.
  edit_config(folder, [](nlohmann::json& c) { c["tie_word_embeddings"] = false; });
  expect_refused([&] { load_hf_gpt2(folder); },
                 {"lm_head.weight", "differs from the token embedding: config.json unties them (tie_word_embeddings false)",
                  "read only with its head tied"});
  edit_config(folder, [](nlohmann::json& c) { c["tie_word_embeddings"] = true; });
  edit_weights(folder, [](NamedTensors& tensors) {
    tensor_named(tensors, "lm_head.weight") = tensor_named(tensors, "wte.weight");
    tensors.emplace_back("transformer.wpe.weight", tensor_named(tensors, "wpe.weight"));
  });
  expect_refused([&] { load_hf_gpt2(folder); }, {"wpe.weight", "duplicates"});
}

TEST(HfGpt2, AcceptsHalfAndBfloat16Weights) {
  ScratchDir dir;
  auto model = scrambled_model(tiny_config(100), 5);
  for (const auto type : {torch::kHalf, torch::kBFloat16}) {
    export_hf_gpt2(model, 100, dir.path());
    edit_weights(dir.path(), [&](NamedTensors& tensors) {
      for (auto& [name, t] : tensors) t = t.to(type);
    });
    auto imported = load_hf_gpt2(dir.path(), 1);
    const auto mlp = imported.model->named_parameters()["h.0.mlp.c_fc.weight"];
    EXPECT_EQ(mlp.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::equal(mlp, model->named_parameters()["h.0.mlp.c_fc.weight"].to(type).to(torch::kFloat)));
  }
}

TEST(HfGpt2, RefusesMissingExtraMisshapedAndMistypedTensors) {
  ScratchDir dir;
  const fs::path good = export_good_folder(dir, 6);
  struct Case {
    const char* what;
    std::function<void(NamedTensors&)> edit;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"missing", [](NamedTensors& t) { t.erase(t.begin() + 3); }, {"lacks tensor 'transformer."}},
      {"missing bias",
       [](NamedTensors& t) {
         std::erase_if(t, [](const auto& p) { return p.first == "transformer.h.1.mlp.c_fc.bias"; });
       },
       {"lacks tensor 'transformer.h.1.mlp.c_fc.bias'"}},
      {"extra",
       [](NamedTensors& t) {
         t.emplace_back("transformer.h.0.attn.q_attn.weight", torch::zeros({32, 32}));
       },
       {"tensor 'transformer.h.0.attn.q_attn.weight'", "not a GPT-2 weight"}},
      {"not transposed",
       [](NamedTensors& t) {
         auto& w = tensor_named(t, "transformer.h.0.attn.c_attn.weight");
         w = w.t().contiguous();
       },
       {"tensor 'transformer.h.0.attn.c_attn.weight'", "shape [96, 32], expected [32, 96]"}},
      {"integer weights",
       [](NamedTensors& t) {
         auto& w = tensor_named(t, "transformer.ln_f.weight");
         w = w.to(torch::kLong);
       },
       {"tensor 'transformer.ln_f.weight'", "dtype I64"}},
      {"NaN",
       [](NamedTensors& t) { tensor_named(t, "transformer.wpe.weight")[5][1] = NAN; },
       {"tensor 'transformer.wpe.weight'", "NaN"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const auto folder = copy_of(good, dir.path() / "case");
    edit_weights(folder, c.edit);
    auto needles = c.needles;
    needles.push_back(folder.string());
    expect_refused([&] { load_hf_gpt2(folder); }, needles);
  }

  auto folder = copy_of(good, dir.path() / "case");
  edit_config(folder, [](nlohmann::json& c) { c["vocab_size"] = 101; });
  expect_refused([&] { load_hf_gpt2(folder); }, {"transformer.wte.weight", "shape [100, 32], expected [101, 32]"});
  folder = copy_of(good, dir.path() / "case");
  edit_config(folder, [](nlohmann::json& c) { c["tie_word_embeddings"] = false; });
  expect_refused([&] { load_hf_gpt2(folder); }, {"tie_word_embeddings", "lm_head.weight"});
  fs::remove(folder / "model.safetensors");
  expect_refused([&] { load_hf_gpt2(folder); }, {folder.string(), "neither model.safetensors"});
  fs::remove(folder / "config.json");
  expect_refused([&] { load_hf_gpt2(folder); }, {"config.json", "does not exist"});
}

TEST(HfGpt2, AFolderIsCheckedAgainstItsConfigBeforeAModelOfThatShapeIsBuilt) {
  ScratchDir dir;
  const fs::path good = export_good_folder(dir, 5);
  EXPECT_EQ(check_hf_gpt2_folder(good, 1).config, read_hf_gpt2_config(good, 1).config);
  // config.json claiming a 50 G-parameter model over a tiny model's weights: refused from the headers,
  // by the command that opens it (train builds its model before copying the weights in).
  const fs::path lying = copy_of(good, dir.path() / "lying");
  edit_config(lying, [](nlohmann::json& c) {
    c["n_layer"] = 64;
    c["n_embd"] = 8192;
    c["n_head"] = 16;
  });
  expect_refused([&] { check_hf_gpt2_folder(lying, 1); }, {"model.safetensors", "expected [100, 8192]"});
  expect_refused([&] { open_stored_model(lying); }, {"model.safetensors", "expected [100, 8192]"});
}

TEST(HfGpt2, RefusesConfigSettingsWeDoNotImplement) {
  ScratchDir dir;
  const fs::path good = export_good_folder(dir, 7);
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* problem;
  };
  const std::vector<Case> refused = {
      {"activation_function", "relu", "'relu' is not supported"},
      {"activation_function", "gelu", "'gelu' is not supported"},
      {"layer_norm_epsilon", 1e-6, "not supported"},
      {"n_inner", 100, "not supported"},
      {"scale_attn_weights", false, "not supported"},
      {"scale_attn_by_inverse_layer_idx", true, "not supported"},
      {"add_cross_attention", true, "not supported"},
      {"model_type", "llama", "not gpt2"},
      {"n_layer", "2", "not an integer"},
      {"n_layer", 1.5, "not an integer"},
      {"n_embd", -32, "must be positive"},
      {"n_head", 3, "does not divide"},
      {"vocab_size", 0, "must be positive"},
      {"n_positions", int64_t{1} << 40, "larger than this importer accepts"},
      {"reorder_and_upcast_attn", "yes", "not true or false"},
  };
  const auto folder = copy_of(good, dir.path() / "case");
  for (const auto& c : refused) {
    SCOPED_TRACE(c.field);
    write_file_atomically(folder / "config.json", read_whole_file(good / "config.json", "config"));
    edit_config(folder, [&](nlohmann::json& config) { config[c.field] = c.value; });
    expect_refused([&] { read_hf_gpt2_config(folder); }, {(folder / "config.json").string(), c.field, c.problem});
  }
  // What changes nothing in the math is accepted.
  write_file_atomically(folder / "config.json", read_whole_file(good / "config.json", "config"));
  edit_config(folder, [](nlohmann::json& config) {
    config["activation_function"] = "gelu_pytorch_tanh";
    config["reorder_and_upcast_attn"] = true;
    config["n_inner"] = 128;
    config["layer_norm_epsilon"] = 1e-05;
    config["resid_pdrop"] = 0.3;
    config.erase("n_ctx");
  });
  EXPECT_EQ(load_hf_gpt2(folder).vocab_size, 100);

  write_file_atomically(folder / "config.json", "{\"n_layer\": ");
  expect_refused([&] { read_hf_gpt2_config(folder); }, {"config.json", "not valid JSON"});
  write_file_atomically(folder / "config.json", "[1]");
  expect_refused([&] { read_hf_gpt2_config(folder); }, {"config.json", "not a JSON object"});
  expect_refused([&] { read_hf_gpt2_config(folder, 0); }, {"multiple"});
}

TEST(HfGpt2, ReadsShardedWeightsAndRefusesABadIndex) {
  ScratchDir dir;
  auto model = scrambled_model(tiny_config(100), 8);
  const fs::path source = dir.path() / "single";
  export_hf_gpt2(model, 100, source);
  const fs::path folder = dir.path() / "sharded";
  fs::create_directories(folder);
  fs::copy_file(source / "config.json", folder / "config.json");
  auto tensors = read_all(source / "model.safetensors");
  NamedTensors first(tensors.begin(), tensors.begin() + 10), second(tensors.begin() + 10, tensors.end());
  write_safetensors(folder / "model-00001-of-00002.safetensors", first);
  write_safetensors(folder / "model-00002-of-00002.safetensors", second);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& [name, t] : first) index["weight_map"][name] = "model-00001-of-00002.safetensors";
  for (const auto& [name, t] : second) index["weight_map"][name] = "model-00002-of-00002.safetensors";
  const auto write_index = [&](const nlohmann::json& j) {
    write_file_atomically(folder / "model.safetensors.index.json", j.dump());
  };
  write_index(index);
  auto imported = load_hf_gpt2(folder, 1);
  expect_same_parameters(imported.model, model);

  auto bad = index;
  bad["weight_map"][first.front().first] = "../single/model.safetensors";
  write_index(bad);
  expect_refused([&] { load_hf_gpt2(folder); }, {"index", "does not name a file in the folder"});
  bad = index;
  bad["weight_map"][first.front().first] = "model-00002-of-00002.safetensors";
  write_index(bad);
  expect_refused([&] { load_hf_gpt2(folder); },
                 {"model-00002-of-00002.safetensors", "lacks tensor '" + first.front().first});
  bad = index;
  bad["weight_map"].erase(second.back().first);
  write_index(bad);
  expect_refused([&] { load_hf_gpt2(folder); }, {"tensor '" + second.back().first + "'", "not mapped to this shard"});
  write_index(nlohmann::json::object());
  expect_refused([&] { load_hf_gpt2(folder); }, {"index", "weight_map"});
}

TEST(HfGpt2, ExportRefusesABadVocabularyOrDestination) {
  ScratchDir dir;
  auto model = scrambled_model(tiny_config(100), 9);
  expect_refused([&] { export_hf_gpt2(model, 0, dir.path() / "a"); }, {"vocabulary size 0"});
  expect_refused([&] { export_hf_gpt2(model, 101, dir.path() / "a"); }, {"vocabulary size 101", "1..100"});
  write_file_atomically(dir.path() / "file", "x");
  expect_refused([&] { export_hf_gpt2(model, 100, dir.path() / "file"); }, {"file", "not a directory"});
}

// Both exports walk the model's own parameters: one that their mapping does not carry (as a parameter added
// to a module and not to model/hf/ would be) is refused by name, and nothing is written, where it was dropped
// from the folder with success before.
TEST(HfExport, RefusesAParameterItsMappingDoesNotCarry) {
  ScratchDir dir;
  auto plant = [](Gpt& model) {
    model->named_modules()["h.1.attn"]->register_parameter("window_gain", torch::ones({4}));
  };
  auto gpt2 = scrambled_model(tiny_config(100), 9);
  plant(gpt2);
  expect_refused([&] { export_hf_gpt2(gpt2, 100, dir.path() / "gpt2"); },
                 {"HF export", "parameter h.1.attn.window_gain", "no tensor in GPT2LMHeadModel"});
  EXPECT_FALSE(fs::exists(dir.path() / "gpt2"));
  GptConfig llama = preset_config("llama-small");
  llama.vocab_size = 100;
  auto family = scrambled_model(llama, 10);
  plant(family);
  expect_refused([&] { export_hf_family(family, 100, dir.path() / "llama"); },
                 {"HF export", "parameter h.1.attn.window_gain", "no tensor in LlamaForCausalLM"});
  EXPECT_FALSE(fs::exists(dir.path() / "llama"));
}

// A field whose value the target's config.json has no key for is refused by name: here a Llama-style model
// checked against GPT-2's fields, as a field added to the config table and not to an export's list would be.
TEST(HfExport, RefusesAFieldTheTargetHasNoPlaceFor) {
  GptConfig llama = preset_config("llama-small");
  llama.vocab_size = 100;
  llama.rope_theta = 500000;
  Gpt model(llama);
  std::vector<HfTensorMap> every_parameter;
  for (const auto& item : model->named_parameters()) every_parameter.push_back({item.key(), item.key()});
  const std::vector<std::string> sizes = {"vocab_size", "n_layer", "n_head", "n_embd", "block_size"};
  expect_refused([&] { refuse_what_export_drops(model, every_parameter, sizes, "GPT2LMHeadModel"); },
                 {"HF export", "positions=rotary", "no place in GPT2LMHeadModel's config.json"});
  std::vector<std::string> all_but_rope_theta = sizes;
  visit_shown_fields(llama, [&](const char* name, const auto&) {
    if (std::string(name) != "rope_theta" && std::find(sizes.begin(), sizes.end(), name) == sizes.end()) {
      all_but_rope_theta.push_back(name);
    }
  });
  expect_refused([&] { refuse_what_export_drops(model, every_parameter, all_but_rope_theta, "LlamaForCausalLM"); },
                 {"rope_theta=500000", "LlamaForCausalLM"});
  all_but_rope_theta.push_back("rope_theta");
  EXPECT_NO_THROW(refuse_what_export_drops(model, every_parameter, all_but_rope_theta, "LlamaForCausalLM"));
  // At its default a field is no loss: llama-small's rope_theta is 10000.
  EXPECT_EQ(config_fields_lost_without(preset_config("llama-small"), all_but_rope_theta), std::vector<std::string>{});
  // Rows of a parameter that no map carries are named.
  std::vector<HfTensorMap> half_of_wte = every_parameter;
  half_of_wte.front() = {"embed", "wte.weight", 0, 50};
  expect_refused([&] { refuse_what_export_drops(model, half_of_wte, all_but_rope_theta, "LlamaForCausalLM"); },
                 {"rows 50..99", "wte.weight", "LlamaForCausalLM"});
  EXPECT_THROW(static_cast<void>(config_fields_lost_without(llama, {"no_such_field"})), std::logic_error);
}

TEST(HfGpt2, ImportLeavesTheDefaultGeneratorAlone) {
  ScratchDir dir;
  auto model = scrambled_model(tiny_config(100), 10);
  export_hf_gpt2(model, 100, dir.path());
  torch::manual_seed(42);
  const auto expected = torch::rand({4});
  torch::manual_seed(42);
  (void)load_hf_gpt2(dir.path());
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
}

// ---- padded vocabulary ----

// A model whose padded ids (100..127) score far above every real id: ln_f maps every position to
// the same vector b, real embedding rows point against b, padded rows along it.
Gpt model_that_prefers_padded_ids() {
  auto model = scrambled_model(tiny_config(128), 11);
  torch::NoGradGuard no_grad;
  model->ln_f->weight.zero_();
  model->ln_f->bias.copy_(torch::randn({32}));
  const auto b = model->ln_f->bias;
  model->wte->weight.slice(0, 0, 100).copy_(-b + 0.1 * torch::randn({100, 32}));
  model->wte->weight.slice(0, 100).copy_(b.expand({28, 32}));
  return model;
}

TEST(PaddedVocabulary, LimitVocabMasksIdsAtAndAboveTheLimit) {
  const auto logits = torch::randn({2, 3, 10});
  const auto limited = limit_vocab(logits, 7);
  EXPECT_TRUE(torch::equal(limited.slice(-1, 0, 7), logits.slice(-1, 0, 7)));
  EXPECT_TRUE(torch::isneginf(limited.slice(-1, 7)).all().item<bool>());
  EXPECT_TRUE(torch::equal(limit_vocab(logits, 0), logits));
  EXPECT_TRUE(torch::equal(limit_vocab(logits, 10), logits));
  expect_refused([&] { limit_vocab(logits, 11); }, {"vocabulary limit 11"});
  expect_refused([&] { limit_vocab(logits, -1); }, {"vocabulary limit -1"});
}

TEST(PaddedVocabulary, SamplingNeverDrawsPaddedIds) {
  auto model = model_that_prefers_padded_ids();
  const auto prompt = torch::zeros({4, 1}, torch::kLong);
  SamplingOptions options;
  options.max_new_tokens = 20;
  options.temperature = 0.0;
  auto unlimited = generate(model, prompt, options).slice(1, 1);
  EXPECT_TRUE((unlimited >= 100).all().item<bool>()) << "the test model must prefer padded ids";

  options.vocab_limit = 100;
  for (const double temperature : {0.0, 1.0, 2.0}) {
    for (const int64_t top_k : {0, 5, 200}) {
      options.temperature = temperature;
      options.top_k = top_k;
      auto generator = at::detail::createCPUGenerator(7);
      const auto sampled = generate(model, prompt, options, generator).slice(1, 1);
      EXPECT_TRUE((sampled < 100).all().item<bool>()) << "temperature " << temperature << " top_k " << top_k;
    }
  }
  options.vocab_limit = 129;
  expect_refused([&] { generate(model, prompt, options); }, {"vocabulary limit 129"});
}

// ---- agreement with transformers ----

using testing::reference_python;

bool python_has_transformers() {
  static const bool available = testing::python_imports("transformers, safetensors");
  return available;
}

#define SKIP_WITHOUT_TRANSFORMERS()                                           \
  if (!python_has_transformers())                                             \
  GTEST_SKIP() << "transformers is not importable by '" << reference_python() \
               << "' (pip install transformers safetensors there to run this comparison)"

// Runs tests/hf_reference.py and returns the JSON of its last output line (null after a failure).
nlohmann::json run_reference(const std::vector<std::string>& args, const fs::path& scratch) {
  return testing::run_python_json(MYGPT_HF_REFERENCE_SCRIPT, args, scratch);
}

void expect_losses_match(const torch::Tensor& ours, const nlohmann::json& theirs) {
  const auto expected = theirs["token_losses"].get<std::vector<double>>();
  ASSERT_EQ(ours.numel(), static_cast<int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(ours[i].item<double>(), expected[i], 1e-5 * std::abs(expected[i])) << "token " << i;
  }
  EXPECT_NEAR(ours.mean().item<double>(), theirs["loss"].get<double>(), 1e-5 * theirs["loss"].get<double>());
}

TEST(HfGpt2Transformers, ImportReproducesTheLossOfTransformers) {
  SKIP_WITHOUT_TRANSFORMERS();
  ScratchDir dir;
  const auto tokens = fixed_tokens(50257);
  const auto single = dir.path() / "single", sharded = dir.path() / "sharded";
  const auto reference = run_reference({"make", single.string(), "--sharded-copy", sharded.string(), "--vocab", "50257",
                                        "--seed", "3", "--tokens", testing::tokens_argument(tokens)},
                                       dir.path());
  ASSERT_FALSE(reference.is_null());
  ASSERT_TRUE(fs::exists(sharded / "model.safetensors.index.json"));
  for (const auto& folder : {single, sharded}) {
    SCOPED_TRACE(folder.string());
    auto imported = load_hf_gpt2(folder);
    EXPECT_EQ(imported.config.vocab_size, 50304);
    expect_losses_match(token_losses(imported.model, tokens, imported.vocab_size), reference[0]);
  }
  // Unpadded, the model's own loss is transformers' loss as it stands.
  auto unpadded = load_hf_gpt2(single, 1);
  unpadded.model->eval();
  torch::NoGradGuard no_grad;
  const double loss = unpadded.model->loss(tokens.slice(1, 0, -1), tokens.slice(1, 1)).item<double>();
  EXPECT_NEAR(loss, reference[0]["loss"].get<double>(), 1e-5 * loss);
}

TEST(HfGpt2Transformers, TransformersReproducesTheLossOfAnExport) {
  SKIP_WITHOUT_TRANSFORMERS();
  ScratchDir dir;
  auto padded = scrambled_model(tiny_config(128), 12);
  auto biasless = scrambled_model(tiny_config(100, /*bias=*/false), 13);
  export_hf_gpt2(padded, 100, dir.path() / "padded");
  export_hf_gpt2(biasless, 100, dir.path() / "biasless");
  const auto tokens = fixed_tokens(100);
  const auto reference = run_reference({"loss", (dir.path() / "padded").string(), (dir.path() / "biasless").string(),
                                        "--tokens", testing::tokens_argument(tokens)},
                                       dir.path());
  ASSERT_FALSE(reference.is_null());
  expect_losses_match(token_losses(padded, tokens, 100), reference[0]);
  expect_losses_match(token_losses(biasless, tokens, 100), reference[1]);
}

TEST(HfGpt2Transformers, SafetensorsFilesInteroperateWithTheReference) {
  SKIP_WITHOUT_TRANSFORMERS();
  ScratchDir dir;
  const std::vector<std::pair<std::string, torch::ScalarType>> types = {
      {"F64", torch::kDouble}, {"F32", torch::kFloat}, {"F16", torch::kHalf},  {"BF16", torch::kBFloat16},
      {"I64", torch::kLong},   {"I32", torch::kInt},   {"I16", torch::kShort}, {"I8", torch::kChar}};
  NamedTensors ours;
  for (const auto& [name, type] : types) ours.emplace_back("t_" + name, (torch::arange(6) - 2).to(type).view({2, 3}));
  ours.emplace_back("t_U8", torch::arange(6, torch::kByte).view({2, 3}));
  ours.emplace_back("t_BOOL", torch::tensor({true, false, true}));
  write_safetensors(dir.path() / "ours.safetensors", ours, {{"origin", "mygpt"}});
  const auto theirs_path = dir.path() / "theirs.safetensors";
  const auto read_back = run_reference(
      {"dtypes", theirs_path.string(), "--check", (dir.path() / "ours.safetensors").string()}, dir.path());
  ASSERT_FALSE(read_back.is_null());

  const auto theirs = SafetensorsReader::open(theirs_path);
  EXPECT_EQ(theirs.metadata().at("origin"), "safetensors");
  ASSERT_EQ(theirs.names().size(), ours.size());
  for (const auto& [name, tensor] : ours) {
    SCOPED_TRACE(name);
    EXPECT_EQ(theirs.info(name).dtype, tensor.scalar_type());
    EXPECT_TRUE(torch::equal(theirs.tensor(name), tensor));
    ASSERT_TRUE(read_back.contains(name));
    const auto values = read_back[name]["values"].get<std::vector<double>>();
    const auto expected = tensor.to(torch::kDouble).flatten();
    ASSERT_EQ(static_cast<int64_t>(values.size()), expected.numel());
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], expected[i].item<double>());
    EXPECT_EQ(read_back[name]["shape"].get<std::vector<int64_t>>(), tensor.sizes().vec());
  }
}

}  // namespace
}  // namespace mygpt::hf_gpt2_test
