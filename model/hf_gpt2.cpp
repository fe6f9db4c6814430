#include "model/hf_gpt2.h"

#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "common/file_io.h"
#include "model/safetensors_file.h"

namespace mygpt {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "transformer.";  // GPT2LMHeadModel's name for its GPT2Model
constexpr int64_t kGpt2VocabSize = 50257;
constexpr int64_t kGpt2EndOfText = 50256;

// One weight of HF's GPT-2, named as our parameter is (HF's name without the prefix), in HF's shape.
struct HfTensorSpec {
  std::string name;
  std::vector<int64_t> hf_shape;
  bool conv1d_weight = false;  // stored (in, out); ours is (out, in)
};

std::vector<HfTensorSpec> hf_gpt2_tensors(const GptConfig& config, int64_t vocab_size) {
  const int64_t C = config.n_embd;
  std::vector<HfTensorSpec> specs = {{"wte.weight", {vocab_size, C}}, {"wpe.weight", {config.block_size, C}}};
  auto norm = [&](const std::string& name) {
    specs.push_back({name + ".weight", {C}});
    specs.push_back({name + ".bias", {C}});
  };
  auto conv1d = [&](const std::string& name, int64_t in, int64_t out) {
    specs.push_back({name + ".weight", {in, out}, true});
    specs.push_back({name + ".bias", {out}});
  };
  for (int64_t i = 0; i < config.n_layer; ++i) {
    const std::string block = "h." + std::to_string(i) + ".";
    norm(block + "ln_1");
    conv1d(block + "attn.c_attn", C, 3 * C);
    conv1d(block + "attn.c_proj", C, C);
    norm(block + "ln_2");
    conv1d(block + "mlp.c_fc", C, 4 * C);
    conv1d(block + "mlp.c_proj", 4 * C, C);
  }
  norm("ln_f");
  return specs;
}

std::string shape_text(c10::IntArrayRef shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A small JSON file (config, index) that must hold an object; `role` names it in messages.
nlohmann::json read_json_object(const fs::path& path, const std::string& role) {
  const std::string source = role + " '" + path.string() + "'";
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_whole_file(path, role, std::size_t{64} << 20));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(source + " is not valid JSON: " + printable_name(e.what()));
  }
  if (!json.is_object()) throw std::invalid_argument(source + " is not a JSON object");
  return json;
}

// ---- config.json ----

struct ParsedHfConfig {
  HfGpt2Config shape;
  bool tie_word_embeddings = true;
};

// Typed access to config.json's fields; every problem is one line naming the file and the field.
class ConfigFields {
 public:
  ConfigFields(const nlohmann::json& json, std::string source) : json_(json), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw std::invalid_argument(source_ + ": " + key + " " + problem);
  }
  const nlohmann::json* find(const std::string& key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(const std::string& key, int64_t fallback, int64_t max) const {
    const auto* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number_integer()) fail(key, "is not an integer");
    if (value->is_number_unsigned() ? value->get<uint64_t>() > static_cast<uint64_t>(max)
                                    : value->get<int64_t>() > max) {
      fail(key, "is larger than this importer accepts (at most " + std::to_string(max) + ")");
    }
    const auto result = value->get<int64_t>();
    if (result <= 0) fail(key, "must be positive, got " + std::to_string(result));
    return result;
  }
  bool flag(const std::string& key, bool fallback) const {
    const auto* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) fail(key, "is not true or false");
    return value->get<bool>();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    const auto* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) fail(key, "is not a string");
    return value->get<std::string>();
  }
  double number(const std::string& key, double fallback) const {
    const auto* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number()) fail(key, "is not a number");
    return value->get<double>();
  }

 private:
  const nlohmann::json& json_;
  std::string source_;
};

ParsedHfConfig parse_hf_config(const fs::path& folder, int64_t vocab_multiple) {
  if (vocab_multiple < 1) throw std::invalid_argument("vocabulary padding multiple must be positive");
  const fs::path path = folder / "config.json";
  const std::string source = "HF config '" + path.string() + "'";
  const nlohmann::json json = read_json_object(path, "HF config");
  const ConfigFields fields(json, source);

  // transformers' GPT2Config defaults stand in for absent fields, as they do when it loads.
  const std::string model_type = fields.text("model_type", "gpt2");
  if (model_type != "gpt2") fields.fail("model_type", "'" + printable_name(model_type) + "' is not gpt2");
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

  ParsedHfConfig parsed;
  GptConfig& config = parsed.shape.config;
  config.n_layer = fields.integer("n_layer", 12, 1 << 16);
  config.n_head = fields.integer("n_head", 12, 1 << 16);
  config.n_embd = fields.integer("n_embd", 768, 1 << 20);
  config.block_size = fields.integer("n_positions", 1024, 1 << 24);
  parsed.shape.vocab_size = fields.integer("vocab_size", kGpt2VocabSize, int64_t{1} << 31);
  const int64_t inner = fields.integer("n_inner", 4 * config.n_embd, int64_t{1} << 22);
  if (inner != 4 * config.n_embd) fields.fail("n_inner", std::to_string(inner) + " is not supported (only 4 * n_embd)");
  parsed.tie_word_embeddings = fields.flag("tie_word_embeddings", true);
  config.vocab_size = padded_vocab_size(parsed.shape.vocab_size, vocab_multiple);
  config.dropout = 0.0;
  config.bias = true;
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
  return parsed;
}

// ---- weights ----

struct StoredTensor {
  const SafetensorsReader* reader;
  std::string stored_name;
  std::string label() const { return reader->source() + ": tensor '" + printable_name(stored_name) + "'"; }
};

// The folder's tensors by our name, from model.safetensors or from the shards of its index.
class HfWeights {
 public:
  explicit HfWeights(const fs::path& folder) {
    const fs::path single = folder / "model.safetensors";
    const fs::path index = folder / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(single, ec)) {
      readers_.push_back(std::make_unique<SafetensorsReader>(SafetensorsReader::open(single)));
      for (const auto& name : readers_.back()->names()) add(*readers_.back(), name);
    } else if (fs::exists(index, ec)) {
      read_shards(folder, index);
    } else {
      throw std::invalid_argument("HF model folder '" + folder.string() +
                                  "' has neither model.safetensors nor model.safetensors.index.json");
    }
  }

  const StoredTensor* find(const std::string& name) const {
    const auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const std::map<std::string, StoredTensor>& all() const { return tensors_; }

 private:
  void add(const SafetensorsReader& reader, const std::string& stored_name) {
    const bool prefixed = stored_name.rfind(kPrefix, 0) == 0;
    const std::string name = prefixed ? stored_name.substr(std::string(kPrefix).size()) : stored_name;
    // The causal-mask buffers of older transformers versions are not parameters.
    if (name.rfind("h.", 0) == 0 && (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"))) return;
    const auto [it, inserted] = tensors_.emplace(name, StoredTensor{&reader, stored_name});
    if (!inserted) {
      throw std::invalid_argument(StoredTensor{&reader, stored_name}.label() + " duplicates '" +
                                  printable_name(it->second.stored_name) + "'");
    }
  }

  void read_shards(const fs::path& folder, const fs::path& index_path) {
    const std::string source = "HF weight index '" + index_path.string() + "'";
    const nlohmann::json index = read_json_object(index_path, "HF weight index");
    if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
      throw std::invalid_argument(source + " has no weight_map object");
    }
    std::map<std::string, const SafetensorsReader*> shards;
    std::map<std::string, std::string> shard_of;  // tensor -> shard file
    for (const auto& [name, file] : index["weight_map"].items()) {
      const std::string shard = file.is_string() ? file.get<std::string>() : std::string();
      // Only plain file names beside the index: an index must not point anywhere else on disk.
      if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos) {
        throw std::invalid_argument(source + ": weight_map entry '" + printable_name(name) +
                                    "' does not name a file in the folder");
      }
      if (!shards.count(shard)) {
        readers_.push_back(std::make_unique<SafetensorsReader>(SafetensorsReader::open(folder / shard)));
        shards[shard] = readers_.back().get();
      }
      if (!shards[shard]->has(name)) {
        throw std::invalid_argument(shards[shard]->source() + " lacks tensor '" + printable_name(name) + "', which " +
                                    source + " places there");
      }
      shard_of[name] = shard;
      add(*shards[shard], name);
    }
    for (const auto& [shard, reader] : shards) {
      for (const auto& name : reader->names()) {
        const auto it = shard_of.find(name);
        if (it == shard_of.end() || it->second != shard) {
          throw std::invalid_argument(reader->source() + ": tensor '" + printable_name(name) +
                                      "' is not mapped to this shard by " + source);
        }
      }
    }
  }

  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::map<std::string, StoredTensor> tensors_;
};

void check_stored(const StoredTensor& stored, c10::IntArrayRef expected_shape) {
  const SafetensorsTensorInfo& info = stored.reader->info(stored.stored_name);
  if (info.dtype != torch::kFloat && info.dtype != torch::kHalf && info.dtype != torch::kBFloat16) {
    throw std::invalid_argument(stored.label() + " has dtype " + info.dtype_name +
                                " (GPT-2 weights must be F32, F16 or BF16)");
  }
  if (c10::IntArrayRef(info.shape) != expected_shape) {
    throw std::invalid_argument(stored.label() + " has shape " + shape_text(info.shape) + ", expected " +
                                shape_text(expected_shape));
  }
}

torch::Tensor read_fp32(const StoredTensor& stored) {
  auto tensor = stored.reader->tensor(stored.stored_name).to(torch::kFloat);
  if (!torch::isfinite(tensor).all().item<bool>())
    throw std::invalid_argument(stored.label() + " holds NaN or infinite values");
  return tensor;
}

}  // namespace

bool is_hf_model_folder(const fs::path& folder) {
  std::error_code ec;
  return fs::is_directory(folder, ec) && fs::exists(folder / "config.json", ec);
}

HfGpt2Config read_hf_gpt2_config(const fs::path& folder, int64_t vocab_multiple) {
  return parse_hf_config(folder, vocab_multiple).shape;
}

namespace {

// Every name, dtype and shape against what config.json claims, before any weight is read or a model
// allocated. Returns the specs in the model's order.
std::vector<HfTensorSpec> check_hf_weights(const ParsedHfConfig& parsed, const HfWeights& weights, const fs::path& folder) {
  const int64_t vocab_size = parsed.shape.vocab_size;
  const std::string folder_label = "HF model folder '" + folder.string() + "'";
  const auto specs = hf_gpt2_tensors(parsed.shape.config, vocab_size);
  std::set<std::string> expected;
  for (const auto& spec : specs) {
    const StoredTensor* stored = weights.find(spec.name);
    if (stored == nullptr) throw std::invalid_argument(folder_label + " lacks tensor '" + kPrefix + spec.name + "'");
    check_stored(*stored, spec.hf_shape);
    expected.insert(spec.name);
  }
  const StoredTensor* head = weights.find("lm_head.weight");
  if (head != nullptr) check_stored(*head, {vocab_size, parsed.shape.config.n_embd});
  if (head == nullptr && !parsed.tie_word_embeddings) {
    throw std::invalid_argument(folder_label + " sets tie_word_embeddings false but has no lm_head.weight");
  }
  for (const auto& [name, stored] : weights.all()) {
    if (!expected.count(name) && name != "lm_head.weight") {
      throw std::invalid_argument(stored.label() + " is not a GPT-2 weight this model has");
    }
  }
  return specs;
}

}  // namespace

HfGpt2Config check_hf_gpt2_folder(const fs::path& folder, int64_t vocab_multiple) {
  const ParsedHfConfig parsed = parse_hf_config(folder, vocab_multiple);
  check_hf_weights(parsed, HfWeights(folder), folder);
  return parsed.shape;
}

HfGpt2Model load_hf_gpt2(const fs::path& folder, int64_t vocab_multiple) {
  const ParsedHfConfig parsed = parse_hf_config(folder, vocab_multiple);
  const int64_t vocab_size = parsed.shape.vocab_size;
  const HfWeights weights(folder);
  const auto specs = check_hf_weights(parsed, weights, folder);

  HfGpt2Model out;
  static_cast<HfGpt2Config&>(out) = parsed.shape;
  // Building the model draws a random initialization that is overwritten at once; keep the default
  // generator where it was so an import does not shift the caller's random streams.
  auto generator = at::detail::getDefaultCPUGenerator();
  const auto generator_state = generator.get_state();
  out.model = Gpt(out.config);
  generator.set_state(generator_state);

  torch::NoGradGuard no_grad;
  auto parameters = out.model->named_parameters();
  if (parameters.size() != specs.size())
    throw std::logic_error("GPT-2 import: the model's parameters and HF's tensors differ");
  for (const auto& spec : specs) {
    auto* parameter = parameters.find(spec.name);
    if (parameter == nullptr) throw std::logic_error("GPT-2 import: the model has no parameter " + spec.name);
    auto value = read_fp32(*weights.find(spec.name));
    if (spec.conv1d_weight) value = value.t();
    if (spec.name == "wte.weight") {
      parameter->zero_();  // padded rows: never a target, and masked by samplers (vocab_limit)
      parameter->slice(0, 0, vocab_size).copy_(value);
    } else {
      parameter->copy_(value);
    }
  }
  const StoredTensor* head = weights.find("lm_head.weight");
  if (head != nullptr && !torch::equal(read_fp32(*head), out.model->wte->weight.slice(0, 0, vocab_size))) {
    throw std::invalid_argument(head->label() +
                                " differs from the token embedding (an untied output head is not supported)");
  }
  return out;
}

void export_hf_gpt2(const Gpt& model, int64_t vocab_size, const fs::path& folder) {
  const GptConfig& config = model->config();
  if (!config.is_gpt2_architecture()) {
    throw std::invalid_argument("HF export: only GPT-2's architecture is exported as yet; this model is " +
                                config.architecture_text());
  }
  if (vocab_size < 1 || vocab_size > config.vocab_size) {
    throw std::invalid_argument("HF export: vocabulary size " + std::to_string(vocab_size) +
                                " is not within the model's 1.." + std::to_string(config.vocab_size));
  }
  create_output_directory(folder, "HF export folder");

  torch::NoGradGuard no_grad;
  const auto parameters = model->named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& spec : hf_gpt2_tensors(config, vocab_size)) {
    torch::Tensor value;
    if (const auto* parameter = parameters.find(spec.name)) {
      value = parameter->detach().to(torch::kCPU, torch::kFloat);
    } else if (!config.bias && ends_with(spec.name, ".bias")) {
      value = torch::zeros(spec.hf_shape);  // HF GPT-2 always has biases; zero ones change nothing
    } else {
      throw std::logic_error("GPT-2 export: the model has no parameter " + spec.name);
    }
    if (spec.name == "wte.weight") value = value.slice(0, 0, vocab_size);
    if (spec.conv1d_weight) value = value.t();
    tensors.emplace_back(kPrefix + spec.name, value);
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
      {"bos_token_id", special_token},
      {"eos_token_id", special_token},
      {"dtype", "float32"},
  };
  // Last, so that a folder with a config.json always has its weights beside it.
  write_file_atomically(folder / "config.json", hf_config.dump(2) + "\n");
}

}  // namespace mygpt
