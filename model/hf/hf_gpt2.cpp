#include "model/hf/hf_gpt2.h"

#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "model/hf/hf_config_fields.h"
#include "model/hf/hf_export_check.h"
#include "model/hf/safetensors_file.h"

namespace mygpt {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "transformer.";  // GPT2LMHeadModel's name for its GPT2Model
constexpr int64_t kGpt2VocabSize = 50257;
constexpr int64_t kGpt2EndOfText = 50256;

// HF's GPT-2 tensors, named as our parameters are (HF's names without the prefix); its attention and MLP
// projections are Conv1D modules, whose weights are stored transposed.
std::vector<HfTensorMap> hf_gpt2_tensors(const GptConfig& config) {
  std::vector<HfTensorMap> maps = {{"wte.weight", "wte.weight", 0, 0, /*vocabulary_rows=*/true},
                                   {"wpe.weight", "wpe.weight"}};
  auto same = [&](const std::string& name) { maps.push_back({name, name}); };
  auto norm = [&](const std::string& name) {
    same(name + ".weight");
    same(name + ".bias");
  };
  auto conv1d = [&](const std::string& name) {
    maps.push_back({name + ".weight", name + ".weight", 0, 0, false, /*transposed=*/true});
    same(name + ".bias");
  };
  for (int64_t i = 0; i < config.n_layer; ++i) {
    const std::string block = "h." + std::to_string(i) + ".";
    norm(block + "ln_1");
    conv1d(block + "attn.c_attn");
    conv1d(block + "attn.c_proj");
    norm(block + "ln_2");
    conv1d(block + "mlp.c_fc");
    conv1d(block + "mlp.c_proj");
  }
  norm("ln_f");
  return maps;
}

// The fields GPT2LMHeadModel's config.json holds: the sizes, the biases (a model without them is written with
// zero ones), and two choices of training that the folder's function does not depend on (dropout, init).
// Every other field must be GPT-2's (model/hf/hf_export_check.h).
const std::vector<std::string> kGpt2CarriedFields = {"vocab_size", "n_layer", "n_head", "n_embd", "block_size",
                                                     "bias",       "dropout", "init"};

}  // namespace

HfMapping gpt2_mapping(const HfConfigFields& fields, int64_t vocab_multiple) {
  if (vocab_multiple < 1) throw std::invalid_argument("vocabulary padding multiple must be positive");
  // transformers' GPT2Config defaults stand in for absent fields, as they do when it loads.
  const std::string model_type = fields.text("model_type", "gpt2");
  if (model_type != "gpt2") {
    fields.fail("model_type", "'" + printable_name(model_type) + "' is not gpt2 (the types read here: gpt2, nanochat, llama, qwen3)");
  }
  const std::string activation = fields.text("activation_function", "gelu_new");
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh") {
    fields.fail("activation_function",
                "'" + printable_name(activation) + "' is not supported (gelu_new or gelu_pytorch_tanh, the tanh GELU)");
  }
  const double epsilon = fields.number("layer_norm_epsilon", 1e-5);
  if (std::abs(epsilon - 1e-5) > 1e-12)
    fields.fail("layer_norm_epsilon", std::to_string(epsilon) + " is not supported (only 1e-5)");
  if (!fields.flag("scale_attn_weights", true)) fields.fail("scale_attn_weights", "false is not supported");
  if (fields.flag("scale_attn_by_inverse_layer_idx", false))
    fields.fail("scale_attn_by_inverse_layer_idx", "true is not supported");
  if (fields.flag("add_cross_attention", false)) fields.fail("add_cross_attention", "true is not supported");
  (void)fields.flag("reorder_and_upcast_attn", false);  // checked for type only: same math in fp32

  HfMapping mapping;
  mapping.architecture = "GPT-2";
  GptConfig& config = mapping.shape.config;
  config.n_layer = fields.integer("n_layer", 12, 1 << 16);
  config.n_head = fields.integer("n_head", 12, 1 << 16);
  config.n_embd = fields.integer("n_embd", 768, 1 << 20);
  config.block_size = fields.integer("n_positions", 1024, 1 << 24);
  mapping.shape.vocab_size = fields.integer("vocab_size", kGpt2VocabSize, int64_t{1} << 31);
  const int64_t inner = fields.integer("n_inner", 4 * config.n_embd, int64_t{1} << 22);
  if (inner != 4 * config.n_embd) fields.fail("n_inner", std::to_string(inner) + " is not supported (only 4 * n_embd)");
  config.vocab_size = padded_vocab_size(mapping.shape.vocab_size, vocab_multiple);
  config.dropout = 0.0;
  config.bias = true;
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fields.source() + ": " + e.what());
  }
  mapping.maps = hf_gpt2_tensors(config);
  // GPT2LMHeadModel ties its head to the embedding; an untied one is read only if it is that embedding.
  mapping.tied_head = "lm_head.weight";
  mapping.tied_head_required = !fields.flag("tie_word_embeddings", true);
  mapping.name_prefix = kPrefix;
  // The causal-mask buffers of older transformers versions are not parameters.
  mapping.skipped_suffixes = {".attn.bias", ".attn.masked_bias"};
  return mapping;
}

HfGpt2Config read_hf_gpt2_config(const fs::path& folder, int64_t vocab_multiple) {
  if (vocab_multiple < 1) throw std::invalid_argument("vocabulary padding multiple must be positive");
  const fs::path path = folder / "config.json";
  const nlohmann::json json = read_hf_json_object(path, "HF config");
  return gpt2_mapping(HfConfigFields(json, "HF config '" + path.string() + "'"), vocab_multiple).shape;
}

namespace {

HfFolder open_gpt2_folder(const fs::path& folder, int64_t vocab_multiple) {
  HfFolder opened = open_hf_folder(folder, vocab_multiple);
  if (opened.mapping.architecture != "GPT-2") {
    throw std::invalid_argument("HF config '" + (folder / "config.json").string() + "': model_type is not gpt2");
  }
  return opened;
}

}  // namespace

HfGpt2Config check_hf_gpt2_folder(const fs::path& folder, int64_t vocab_multiple) {
  return open_gpt2_folder(folder, vocab_multiple).shape();
}

HfGpt2Model load_hf_gpt2(const fs::path& folder, int64_t vocab_multiple) {
  return load_hf_model(open_gpt2_folder(folder, vocab_multiple));
}

void export_hf_gpt2(const Gpt& model, int64_t vocab_size, const fs::path& folder, const HfSpecialTokenIds& special) {
  const GptConfig& config = model->config();
  if (!config.is_gpt2_architecture()) {
    throw std::invalid_argument("HF export: only GPT-2's architecture is exported as yet; this model is " +
                                config.architecture_text());
  }
  if (vocab_size < 1 || vocab_size > config.vocab_size) {
    throw std::invalid_argument("HF export: vocabulary size " + std::to_string(vocab_size) +
                                " is not within the model's 1.." + std::to_string(config.vocab_size));
  }
  refuse_what_export_drops(model, hf_gpt2_tensors(config), kGpt2CarriedFields, "GPT2LMHeadModel");
  create_output_directory(folder, "HF export folder");

  torch::NoGradGuard no_grad;
  const auto parameters = model->named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, shape] : parameter_shapes(config)) shapes[name] = shape;
  for (const auto& m : hf_gpt2_tensors(config)) {
    torch::Tensor value;
    if (const auto* parameter = parameters.find(m.ours)) {
      value = hf_tensor_of(m, *parameter, vocab_size, config.head_size());
    } else if (!config.bias && m.ours.ends_with(".bias")) {
      // HF GPT-2 always has biases; zero ones change nothing. Their shape is the weight's rows.
      const auto& weight_shape = shapes.at(m.ours.substr(0, m.ours.size() - 5) + ".weight");
      value = torch::zeros({weight_shape[0]});
    } else {
      throw std::logic_error("GPT-2 export: the model has no parameter " + m.ours);
    }
    tensors.emplace_back(kPrefix + m.hf, value);
  }
  write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}});

  const bool gpt2_vocab = vocab_size == kGpt2VocabSize;
  const nlohmann::json special_token = gpt2_vocab ? nlohmann::json(kGpt2EndOfText) : nlohmann::json(nullptr);
  const nlohmann::ordered_json hf_config = {
      {"model_type", "gpt2"},
      {"architectures", {"GPT2LMHeadModel"}},
      {"vocab_size", vocab_size},
      {"n_positions", config.block_size},
      {"n_ctx", config.block_size},
      {"n_embd", config.n_embd},
      {"n_layer", config.n_layer},
      {"n_head", config.n_head},
      {"n_inner", nullptr},
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"initializer_range", 0.02},
      {"resid_pdrop", config.dropout},
      {"embd_pdrop", config.dropout},
      {"attn_pdrop", config.dropout},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"add_cross_attention", false},
      {"tie_word_embeddings", true},
      {"use_cache", true},
      {"bos_token_id", special.bos.is_null() ? special_token : special.bos},
      {"eos_token_id", special.eos.is_null() ? special_token : special.eos},
      {"dtype", "float32"},
  };
  // Last, so that a folder with a config.json always has its weights beside it.
  write_file_atomically(folder / "config.json", hf_config.dump(2) + "\n");
}

}  // namespace mygpt
