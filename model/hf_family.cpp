#include "model/hf_family.h"

#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/file_io.h"
#include "model/safetensors_file.h"

namespace mygpt {
namespace fs = std::filesystem;
namespace {

// One tensor of theirs: rows [row_begin, row_begin + rows) of one of ours (rows 0: all of them).
struct TensorMap {
  std::string hf, ours;
  int64_t row_begin = 0, rows = 0;
  bool vocabulary_rows = false;     // embedding and head: the first vocab_size rows
  bool negate_second_halves = false;  // NanoChat's q and k (see the header)
};

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
std::vector<TensorMap> tensor_maps(HfFamily family, const GptConfig& c) {
  const int64_t hs = c.head_size(), q_rows = c.n_head * hs, kv_rows = c.kv_heads() * hs, W = c.mlp_width();
  const bool nanochat = family == HfFamily::nanochat;
  std::vector<TensorMap> maps = {{"model.embed_tokens.weight", "wte.weight", 0, 0, true}};
  // A linear layer's weight and, with biases, its bias (same rows).
  auto linear = [&](const std::string& hf, const std::string& ours, int64_t begin, int64_t rows, bool negate = false) {
    maps.push_back({hf + ".weight", ours + ".weight", begin, rows, false, negate});
    if (c.bias) maps.push_back({hf + ".bias", ours + ".bias", begin, rows, false, negate});
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

// Negates the second half of every head's rows (an involution: export and import alike).
torch::Tensor negate_second_halves(const torch::Tensor& rows, int64_t head_size) {
  auto heads = rows.reshape({-1, 2, head_size / 2, rows.dim() == 2 ? rows.size(1) : 1}).clone();
  heads.select(1, 1).neg_();
  return heads.reshape(rows.sizes());
}

// The rows of ours that `m` names, as theirs (vocab_size: the rows of the embedding and head kept).
torch::Tensor their_tensor(const TensorMap& m, const torch::Tensor& ours, int64_t vocab_size, int64_t head_size) {
  torch::Tensor value = ours.detach().to(torch::kCPU, torch::kFloat);
  if (m.vocabulary_rows) value = value.narrow(0, 0, vocab_size);
  if (m.rows > 0) value = value.narrow(0, m.row_begin, m.rows);
  if (m.negate_second_halves) value = negate_second_halves(value, head_size);
  return value.contiguous();
}

std::string shape_text(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// ---- config.json ----

nlohmann::json read_config_json(const fs::path& folder) {
  const fs::path path = folder / "config.json";
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_whole_file(path, "HF config", std::size_t{64} << 20));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("HF config '" + path.string() + "' is not valid JSON: " + printable_name(e.what()));
  }
  if (!json.is_object()) throw std::invalid_argument("HF config '" + path.string() + "' is not a JSON object");
  return json;
}

struct ParsedFamilyConfig {
  HfFamily family;
  HfGpt2Config shape;
};

// Typed fields; each problem one line naming the file and the field.
class Fields {
 public:
  Fields(const nlohmann::json& json, std::string source) : json_(json), source_(std::move(source)) {}
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw std::invalid_argument(source_ + ": " + key + " " + problem);
  }
  const nlohmann::json* find(const std::string& key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const std::string& key, std::optional<int64_t> fallback, int64_t max = int64_t{1} << 24) const {
    const auto* v = find(key);
    if (v == nullptr) {
      if (!fallback) fail(key, "is missing");
      return *fallback;
    }
    if (!v->is_number_integer()) fail(key, "is not an integer");
    const auto x = v->get<int64_t>();
    if (x <= 0 || x > max) fail(key, "must be in 1.." + std::to_string(max) + ", got " + std::to_string(x));
    return x;
  }
  double number(const std::string& key, double fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(key, "is not a number");
    return v->get<double>();
  }
  bool flag(const std::string& key, bool fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, "is not true or false");
    return v->get<bool>();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(key, "is not a string");
    return v->get<std::string>();
  }

 private:
  const nlohmann::json& json_;
  std::string source_;
};

ParsedFamilyConfig parse_family_config(const fs::path& folder, int64_t vocab_multiple) {
  if (vocab_multiple < 1) throw std::invalid_argument("vocabulary padding multiple must be positive");
  const nlohmann::json json = read_config_json(folder);
  const Fields f(json, "HF config '" + (folder / "config.json").string() + "'");
  const std::string model_type = f.text("model_type", "");
  std::optional<HfFamily> family;
  for (const auto& t : kFamilies) {
    if (model_type == t.model_type) family = t.family;
  }
  if (!family) f.fail("model_type", "'" + printable_name(model_type) + "' is not nanochat, llama or qwen3");
  GptConfig c;
  c.n_embd = f.integer("hidden_size", std::nullopt);
  c.n_layer = f.integer("num_hidden_layers", std::nullopt, 1024);
  c.n_head = f.integer("num_attention_heads", std::nullopt, 1 << 16);
  c.n_kv_head = f.integer("num_key_value_heads", c.n_head, 1 << 16);
  c.mlp_hidden = f.integer("intermediate_size", std::nullopt);
  c.block_size = f.integer("max_position_embeddings", 2048, int64_t{1} << 22);
  const int64_t vocab_size = f.integer("vocab_size", std::nullopt);
  c.vocab_size = (vocab_size + vocab_multiple - 1) / vocab_multiple * vocab_multiple;
  if (c.n_embd % c.n_head != 0) f.fail("num_attention_heads", "does not divide hidden_size");
  if (f.find("head_dim") && f.integer("head_dim", 0) != c.n_embd / c.n_head) {
    f.fail("head_dim", "is not hidden_size / num_attention_heads (the only head size this model has)");
  }
  c.positions = Positions::rotary;
  // transformers 5 keeps the base in rope_parameters; older configs at the top level.
  double theta = f.number("rope_theta", 10000.0);
  if (const auto* rope = f.find("rope_parameters")) {
    if (!rope->is_object()) f.fail("rope_parameters", "is not an object");
    const Fields r(*rope, "HF config '" + (folder / "config.json").string() + "' rope_parameters");
    if (r.text("rope_type", "default") != "default") r.fail("rope_type", "is not default (no scaled RoPE here)");
    theta = r.number("rope_theta", theta);
  }
  if (const auto* scaling = f.find("rope_scaling")) {
    if (!scaling->is_object() || scaling->value("rope_type", "default") != "default") {
      f.fail("rope_scaling", "is set (no scaled RoPE here)");
    }
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
        if (!cap->is_number() || !(cap->get<double>() > 0)) f.fail("final_logit_softcapping", "is not positive");
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
      if (f.flag("mlp_bias", false) != c.bias) f.fail("mlp_bias", "differs from attention_bias (one bias setting here)");
      if (*family == HfFamily::llama && f.integer("pretraining_tp", 1) != 1) f.fail("pretraining_tp", "is not 1");
      if (*family == HfFamily::qwen3 && f.flag("use_sliding_window", false)) f.fail("use_sliding_window", "is true");
      break;
  }
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("HF config '" + (folder / "config.json").string() + "': " + e.what());
  }
  return {*family, {c, vocab_size}};
}

// The folder's model.safetensors against the maps: names, dtypes and shapes, nothing extra.
std::vector<TensorMap> check_weights(const ParsedFamilyConfig& parsed, const SafetensorsReader& file) {
  const GptConfig& c = parsed.shape.config;
  const auto maps = tensor_maps(parsed.family, c);
  std::map<std::string, std::vector<int64_t>> ours;
  for (const auto& [name, shape] : parameter_shapes(c)) ours[name] = shape;
  std::set<std::string> expected;
  for (const auto& m : maps) {
    if (!file.has(m.hf)) throw std::invalid_argument(file.source() + " lacks tensor '" + m.hf + "'");
    const auto& info = file.info(m.hf);
    if (info.dtype != torch::kFloat && info.dtype != torch::kHalf && info.dtype != torch::kBFloat16) {
      throw std::invalid_argument(file.source() + ": tensor '" + m.hf + "' has dtype " + info.dtype_name +
                                  " (F32, F16 or BF16 expected)");
    }
    std::vector<int64_t> want = ours.at(m.ours);
    if (m.vocabulary_rows) want[0] = parsed.shape.vocab_size;
    if (m.rows > 0) want[0] = m.rows;
    if (info.shape != want) {
      throw std::invalid_argument(file.source() + ": tensor '" + m.hf + "' has shape " + shape_text(info.shape) +
                                  ", config.json makes it " + shape_text(want));
    }
    expected.insert(m.hf);
  }
  for (const auto& name : file.names()) {
    // A tied head saved anyway is the embedding again: accepted, checked equal on load.
    if (!expected.count(name) && !(c.tie_head && name == "lm_head.weight")) {
      throw std::invalid_argument(file.source() + ": tensor '" + printable_name(name) + "' is not a weight of this " +
                                  traits(parsed.family).architecture + " (config.json disagrees with the weights)");
    }
  }
  return maps;
}

fs::path weights_file(const fs::path& folder) {
  const fs::path single = folder / "model.safetensors";
  std::error_code ec;
  if (!fs::exists(single, ec)) {
    throw std::invalid_argument("HF model folder '" + folder.string() +
                                "' has no model.safetensors (sharded NanoChat/Llama folders are not read yet)");
  }
  return single;
}

}  // namespace

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

bool is_hf_family_folder(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_regular_file(folder / "config.json", ec)) return false;
  try {
    const nlohmann::json json = read_config_json(folder);
    const auto it = json.find("model_type");
    if (it == json.end() || !it->is_string()) return false;
    for (const auto& t : kFamilies) {
      if (it->get<std::string>() == t.model_type) return true;
    }
  } catch (const std::exception&) {
    return false;
  }
  return false;
}

void export_hf_family(const Gpt& model, int64_t vocab_size, const fs::path& folder) {
  const GptConfig& c = model->config();
  std::string why;
  const auto family = hf_family_of(c, &why);
  if (!family) throw std::invalid_argument("HF export: no transformers class computes this model (" + why + ")");
  if (vocab_size < 1 || vocab_size > c.vocab_size) {
    throw std::invalid_argument("HF export: vocabulary size " + std::to_string(vocab_size) +
                                " is not within the model's 1.." + std::to_string(c.vocab_size));
  }
  create_output_directory(folder, "HF export folder");
  torch::NoGradGuard no_grad;
  const auto parameters = model->named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& m : tensor_maps(*family, c)) {
    const auto* parameter = parameters.find(m.ours);
    if (parameter == nullptr) throw std::logic_error("HF export: the model has no parameter " + m.ours);
    tensors.emplace_back(m.hf, their_tensor(m, *parameter, vocab_size, c.head_size()));
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
      {"bos_token_id", nullptr},
      {"eos_token_id", nullptr},
      {"pad_token_id", nullptr},
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

HfGpt2Config check_hf_family_folder(const fs::path& folder, int64_t vocab_multiple) {
  const ParsedFamilyConfig parsed = parse_family_config(folder, vocab_multiple);
  check_weights(parsed, SafetensorsReader::open(weights_file(folder)));
  return parsed.shape;
}

HfGpt2Model load_hf_family(const fs::path& folder, int64_t vocab_multiple) {
  const ParsedFamilyConfig parsed = parse_family_config(folder, vocab_multiple);
  const SafetensorsReader file = SafetensorsReader::open(weights_file(folder));
  const auto maps = check_weights(parsed, file);
  HfGpt2Model out;
  static_cast<HfGpt2Config&>(out) = parsed.shape;
  // Building the model draws an initialization that is overwritten at once; the caller's random streams
  // stay where they were.
  auto generator = at::detail::getDefaultCPUGenerator();
  const auto generator_state = generator.get_state();
  out.model = Gpt(out.config);
  generator.set_state(generator_state);

  torch::NoGradGuard no_grad;
  auto parameters = out.model->named_parameters();
  const int64_t hs = out.config.head_size();
  std::set<std::string> filled;
  for (const auto& m : maps) {
    auto* parameter = parameters.find(m.ours);
    if (parameter == nullptr) throw std::logic_error("HF import: the model has no parameter " + m.ours);
    torch::Tensor value = file.tensor(m.hf).to(torch::kFloat);
    if (!torch::isfinite(value).all().item<bool>()) {
      throw std::invalid_argument(file.source() + ": tensor '" + m.hf + "' holds NaN or infinite values");
    }
    if (m.negate_second_halves) value = negate_second_halves(value, hs);
    torch::Tensor target = *parameter;
    if (m.vocabulary_rows) {
      target.zero_();  // padded rows: never a target, and masked by samplers (vocab_limit)
      target = target.narrow(0, 0, parsed.shape.vocab_size);
    }
    if (m.rows > 0) target = target.narrow(0, m.row_begin, m.rows);
    target.copy_(value);
    filled.insert(m.ours);
  }
  // Norms without gains have no parameters; every parameter there is must have come from the file.
  for (const auto& item : parameters) {
    if (!filled.count(item.key())) throw std::logic_error("HF import: nothing filled " + item.key());
  }
  if (out.config.tie_head && file.has("lm_head.weight")) {
    const auto head = file.tensor("lm_head.weight").to(torch::kFloat);
    if (!torch::equal(head, out.model->wte->weight.narrow(0, 0, parsed.shape.vocab_size))) {
      throw std::invalid_argument(file.source() + ": lm_head.weight differs from the embedding, but config.json "
                                  "ties them (tie_word_embeddings true)");
    }
  }
  return out;
}

}  // namespace mygpt
