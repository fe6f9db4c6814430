#include "model/hf/hf_family.h"

#include <algorithm>
#include <map>
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

struct FamilyTraits {
  HfFamily family;
  const char* model_type;
  const char* architecture;
};

constexpr FamilyTraits kFamilies[] = {{HfFamily::nanochat, "nanochat", "NanoChatForCausalLM"},
                                      {HfFamily::llama, "llama", "LlamaForCausalLM"},
                                      {HfFamily::qwen3, "qwen3", "Qwen3ForCausalLM"}};

const FamilyTraits& traits(HfFamily family) {
  for (const auto& t : kFamilies) {
    if (t.family == family) return t;
  }
  throw std::logic_error("unknown HF family");
}

// Every tensor of `family`'s checkpoint for this config, in layer order.
std::vector<HfTensorMap> tensor_maps(HfFamily family, const GptConfig& c) {
  const int64_t hs = c.head_size(), q_rows = c.n_head * hs, kv_rows = c.kv_heads() * hs, W = c.mlp_width();
  const bool nanochat = family == HfFamily::nanochat;
  std::vector<HfTensorMap> maps = {{"model.embed_tokens.weight", "wte.weight", 0, 0, true}};
  // A linear layer's weight and, with biases, its bias (same rows).
  auto linear = [&](const std::string& hf, const std::string& ours, int64_t begin, int64_t rows, bool negate = false) {
    maps.push_back({hf + ".weight", ours + ".weight", begin, rows, false, false, negate});
    if (c.bias) maps.push_back({hf + ".bias", ours + ".bias", begin, rows, false, false, negate});
  };
  auto gain = [&](const std::string& hf, const std::string& ours) {
    if (c.norm_weight) maps.push_back({hf + ".weight", ours + ".weight"});
  };
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string hf = "model.layers." + std::to_string(i) + ".", ours = "h." + std::to_string(i) + ".";
    gain(hf + "input_layernorm", ours + "ln_1");
    linear(hf + "self_attn.q_proj", ours + "attn.c_attn", 0, q_rows, nanochat);
    linear(hf + "self_attn.k_proj", ours + "attn.c_attn", q_rows, kv_rows, nanochat);
    linear(hf + "self_attn.v_proj", ours + "attn.c_attn", q_rows + kv_rows, kv_rows);
    linear(hf + "self_attn.o_proj", ours + "attn.c_proj", 0, 0);
    if (c.qk_norm) {
      gain(hf + "self_attn.q_norm", ours + "attn.q_norm");
      gain(hf + "self_attn.k_norm", ours + "attn.k_norm");
    }
    gain(hf + "post_attention_layernorm", ours + "ln_2");
    if (nanochat) {
      linear(hf + "mlp.fc1", ours + "mlp.c_fc", 0, 0);
      linear(hf + "mlp.fc2", ours + "mlp.c_proj", 0, 0);
    } else {
      linear(hf + "mlp.gate_proj", ours + "mlp.c_fc", 0, W);
      linear(hf + "mlp.up_proj", ours + "mlp.c_fc", W, W);
      linear(hf + "mlp.down_proj", ours + "mlp.c_proj", 0, 0);
    }
  }
  gain("model.norm", "ln_f");
  if (!c.tie_head) maps.push_back({"lm_head.weight", "lm_head.weight", 0, 0, true});
  return maps;
}

// The fields `family`'s config.json holds, by a key or by its class (hf_family_of checks the choices the class
// implies), and two choices of training that the folder's function does not depend on (dropout, init). Every
// other field must be at its default (model/hf/hf_export_check.h).
std::vector<std::string> carried_fields(HfFamily family) {
  std::vector<std::string> fields = {"vocab_size", "n_layer",   "n_head",   "n_embd",    "block_size", "bias",
                                     "positions",  "rope_theta", "norm",    "norm_weight", "norm_eps", "mlp",
                                     "mlp_hidden", "n_kv_head", "tie_head", "dropout",   "init"};
  if (family == HfFamily::nanochat) fields.insert(fields.end(), {"embedding_norm", "qk_norm", "logit_softcap"});
  if (family == HfFamily::qwen3) fields.push_back("qk_norm");
  return fields;
}

// Qwen3's sliding-window attention, as its config resolves it: the window applies when use_sliding_window
// is true, to the layers layer_types names "sliding_attention" (absent: those from max_window_layers on).
// A window as long as the context masks nothing, so only a layer that really slides is refused.
void refuse_sliding_layers(const HfConfigFields& f, const GptConfig& c) {
  if (!f.flag("use_sliding_window", false)) return;
  const int64_t window = f.integer("sliding_window", 4096, int64_t{1} << 40);
  bool a_layer_slides = false;
  if (const auto* listed = f.find("layer_types")) {
    if (!listed->is_array() || static_cast<int64_t>(listed->size()) != c.n_layer) {
      f.fail("layer_types", "is not a list of num_hidden_layers names");
    }
    for (const auto& t : *listed) {
      if (!t.is_string() || (t != "full_attention" && t != "sliding_attention")) {
        f.fail("layer_types", "holds a name other than full_attention and sliding_attention");
      }
      a_layer_slides = a_layer_slides || t == "sliding_attention";
    }
  } else {
    a_layer_slides = f.integer("max_window_layers", 28, int64_t{1} << 40) < c.n_layer;
  }
  if (a_layer_slides && window < c.block_size) {
    f.fail("use_sliding_window", "is true and layers attend through a window of " + std::to_string(window) +
                                     " tokens, shorter than the context (no sliding-window attention here)");
  }
}

}  // namespace

HfMapping family_mapping(const HfConfigFields& f, int64_t vocab_multiple) {
  if (vocab_multiple < 1) throw std::invalid_argument("vocabulary padding multiple must be positive");
  const std::string model_type = f.text("model_type", "");
  std::optional<HfFamily> family;
  for (const auto& t : kFamilies) {
    if (model_type == t.model_type) family = t.family;
  }
  if (!family) {
    f.fail("model_type", "'" + printable_name(model_type) + "' is not one read here (gpt2, nanochat, llama, qwen3)");
  }
  GptConfig c;
  constexpr int64_t kMax = int64_t{1} << 24;
  c.n_embd = f.integer("hidden_size", std::nullopt, kMax);
  c.n_layer = f.integer("num_hidden_layers", std::nullopt, 1024);
  c.n_head = f.integer("num_attention_heads", std::nullopt, 1 << 16);
  c.n_kv_head = f.integer("num_key_value_heads", c.n_head, 1 << 16);
  c.mlp_hidden = f.integer("intermediate_size", std::nullopt, kMax);
  c.block_size = f.integer("max_position_embeddings", 2048, int64_t{1} << 22);
  const int64_t vocab_size = f.integer("vocab_size", std::nullopt, kMax);
  c.vocab_size = (vocab_size + vocab_multiple - 1) / vocab_multiple * vocab_multiple;
  if (c.n_embd % c.n_head != 0) f.fail("num_attention_heads", "does not divide hidden_size");
  if (f.find("head_dim") && f.integer("head_dim", 0, kMax) != c.n_embd / c.n_head) {
    f.fail("head_dim", "is not hidden_size / num_attention_heads (the only head size this model has)");
  }
  c.positions = Positions::rotary;
  // transformers 5 keeps the base in rope_parameters; older configs at the top level.
  double theta = f.number("rope_theta", 10000.0);
  // A scaling is named by rope_type, or by type in configs written before transformers 4.45 (CodeLlama's
  // "linear", Llama 3.1's "llama3"): transformers reads either, so a model scaled by either is refused.
  auto unscaled = [](const HfConfigFields& r) {
    for (const char* key : {"rope_type", "type"}) {
      if (r.text(key, "default") != "default") r.fail(key, "is '" + printable_name(r.text(key, "")) + "', not default (no scaled RoPE here)");
    }
  };
  if (const auto* rope = f.find("rope_parameters")) {
    if (!rope->is_object()) f.fail("rope_parameters", "is not an object");
    const HfConfigFields r(*rope, f.source() + " rope_parameters");
    unscaled(r);
    theta = r.number("rope_theta", theta);
  }
  if (const auto* scaling = f.find("rope_scaling")) {
    if (!scaling->is_object()) f.fail("rope_scaling", "is not an object");
    unscaled(HfConfigFields(*scaling, f.source() + " rope_scaling"));
  }
  c.rope_theta = theta;
  c.norm = NormKind::rmsnorm;
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.tie_head = f.flag("tie_word_embeddings", false);
  c.dropout = 0.0;
  const std::string act = f.text("hidden_act", *family == HfFamily::nanochat ? "relu2" : "silu");
  switch (*family) {
    case HfFamily::nanochat:
      if (act != "relu2") f.fail("hidden_act", "'" + printable_name(act) + "' is not relu2");
      c.norm_weight = false;
      c.embedding_norm = true;
      c.qk_norm = true;
      c.mlp = MlpKind::relu2;
      c.bias = f.flag("attention_bias", false);
      if (c.bias) f.fail("attention_bias", "is true (NanoChat's MLP has none; not one model here)");
      if (const auto* cap = f.find("final_logit_softcapping")) {
        if (!cap->is_number()) f.fail("final_logit_softcapping", "is not a number");
        if (!(cap->get<double>() > 0)) f.fail("final_logit_softcapping", "is not positive");
        c.logit_softcap = cap->get<double>();
      }
      c.init = InitKind::nanochat;
      break;
    case HfFamily::llama:
    case HfFamily::qwen3:
      if (act != "silu") f.fail("hidden_act", "'" + printable_name(act) + "' is not silu");
      c.mlp = MlpKind::swiglu;
      c.qk_norm = *family == HfFamily::qwen3;
      c.bias = f.flag("attention_bias", false);
      if (*family == HfFamily::qwen3) {
        // Qwen3's MLP has no bias setting (none); its attention's biases alone are no model here.
        if (c.bias) f.fail("attention_bias", "is true (Qwen3's MLP has no biases; biases here are all or none)");
        refuse_sliding_layers(f, c);
      } else {
        if (f.flag("mlp_bias", false) != c.bias) f.fail("mlp_bias", "differs from attention_bias (one bias setting here)");
        if (f.integer("pretraining_tp", 1, kMax) != 1) f.fail("pretraining_tp", "is not 1");
      }
      break;
  }
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(f.source() + ": " + e.what());
  }
  HfMapping mapping;
  mapping.shape = {c, vocab_size};
  mapping.maps = tensor_maps(*family, c);
  mapping.architecture = traits(*family).architecture;
  // A tied head saved anyway is the embedding again: accepted, checked equal on load.
  if (c.tie_head) mapping.tied_head = "lm_head.weight";
  return mapping;
}

bool is_family_model_type(const std::string& model_type) {
  for (const auto& t : kFamilies) {
    if (model_type == t.model_type) return true;
  }
  return false;
}

const char* hf_family_class(HfFamily family) { return traits(family).architecture; }

std::optional<HfFamily> hf_family_of(const GptConfig& c, std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<HfFamily> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (c.positions != Positions::rotary) {
    return no("learned positions map onto GPT-2 only, which has none of this model's other choices");
  }
  if (c.norm != NormKind::rmsnorm) return no("LayerNorm with rotary positions is no transformers class here");
  if (c.mlp == MlpKind::relu2) {
    if (c.norm_weight || !c.embedding_norm || !c.qk_norm || c.bias) {
      return no("a ReLU^2 MLP maps onto NanoChat only, which has weightless RMSNorm, the embedding norm, QK-norm "
                "and no biases");
    }
    return HfFamily::nanochat;
  }
  if (c.mlp != MlpKind::swiglu) return no("a tanh-GELU MLP with rotary positions is no transformers class here");
  if (!c.norm_weight || c.embedding_norm) {
    return no("Llama and Qwen3 have RMSNorm gains and no embedding norm");
  }
  if (c.logit_softcap) return no("Llama and Qwen3 have no logit soft-cap");
  if (c.qk_norm) {
    if (c.bias) return no("Qwen3 has no MLP biases");
    return HfFamily::qwen3;
  }
  return HfFamily::llama;
}

HfSpecialTokenIds hf_special_token_ids(const fs::path& folder, int64_t vocab_size) {
  HfSpecialTokenIds ids;
  std::error_code ec;
  if (!fs::is_regular_file(folder / "config.json", ec)) return ids;
  const nlohmann::json config = read_hf_json_object(folder / "config.json", "HF config");
  const auto is_id = [&](const nlohmann::json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab_size;
  };
  const auto valid = [&](const char* key) {
    const auto it = config.find(key);
    if (it == config.end()) return nlohmann::json(nullptr);
    if (is_id(*it)) return *it;
    if (it->is_array() && !it->empty() && std::all_of(it->begin(), it->end(), is_id)) return *it;
    return nlohmann::json(nullptr);
  };
  ids.bos = valid("bos_token_id");
  ids.eos = valid("eos_token_id");
  ids.pad = valid("pad_token_id");
  return ids;
}

void export_hf_family(const Gpt& model, int64_t vocab_size, const fs::path& folder, const HfSpecialTokenIds& special) {
  const GptConfig& c = model->config();
  std::string why;
  const auto family = hf_family_of(c, &why);
  if (!family) throw std::invalid_argument("HF export: no transformers class computes this model (" + why + ")");
  if (vocab_size < 1 || vocab_size > c.vocab_size) {
    throw std::invalid_argument("HF export: vocabulary size " + std::to_string(vocab_size) +
                                " is not within the model's 1.." + std::to_string(c.vocab_size));
  }
  const std::vector<HfTensorMap> maps = tensor_maps(*family, c);
  refuse_what_export_drops(model, maps, carried_fields(*family), traits(*family).architecture);
  create_output_directory(folder, "HF export folder");
  torch::NoGradGuard no_grad;
  const auto parameters = model->named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& m : maps) {
    const auto* parameter = parameters.find(m.ours);
    if (parameter == nullptr) throw std::logic_error("HF export: the model has no parameter " + m.ours);
    tensors.emplace_back(m.hf, hf_tensor_of(m, *parameter, vocab_size, c.head_size()));
  }
  write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}});

  nlohmann::ordered_json config = {
      {"model_type", traits(*family).model_type},
      {"architectures", {traits(*family).architecture}},
      {"vocab_size", vocab_size},
      {"hidden_size", c.n_embd},
      {"intermediate_size", c.mlp_width()},
      {"num_hidden_layers", c.n_layer},
      {"num_attention_heads", c.n_head},
      {"num_key_value_heads", c.kv_heads()},
      {"head_dim", c.head_size()},
      {"max_position_embeddings", c.block_size},
      {"hidden_act", *family == HfFamily::nanochat ? "relu2" : "silu"},
      {"rms_norm_eps", c.norm_eps},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rope_theta}}},
      {"attention_bias", c.bias},
      {"attention_dropout", 0.0},
      {"tie_word_embeddings", c.tie_head},
      {"use_cache", true},
      {"bos_token_id", special.bos},
      {"eos_token_id", special.eos},
      {"pad_token_id", special.pad},
      {"dtype", "float32"},
  };
  if (*family == HfFamily::nanochat) {
    config.erase("head_dim");  // NanoChatConfig has no such field: hidden_size / heads
    config["final_logit_softcapping"] = c.logit_softcap ? nlohmann::json(*c.logit_softcap) : nlohmann::json(nullptr);
  } else {
    config["mlp_bias"] = c.bias;
  }
  if (*family == HfFamily::qwen3) config["use_sliding_window"] = false;
  // Last, so that a folder with a config.json always has its weights beside it.
  write_file_atomically(folder / "config.json", config.dump(2) + "\n");
}

}  // namespace mygpt
