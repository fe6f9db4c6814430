#include "model/hf/hf_folder.h"

#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "common/file_io.h"
#include "model/hf/hf_config_fields.h"
#include "model/hf/safetensors_file.h"

namespace mygpt {
namespace fs = std::filesystem;

// ---- config.json's fields ----

void HfConfigFields::fail(const std::string& key, const std::string& problem) const {
  throw std::invalid_argument(source_ + ": " + key + " " + problem);
}

const nlohmann::json* HfConfigFields::find(const std::string& key) const {
  const auto it = json_.find(key);
  return it == json_.end() || it->is_null() ? nullptr : &*it;
}

int64_t HfConfigFields::integer(const std::string& key, std::optional<int64_t> fallback, int64_t max) const {
  const auto* value = find(key);
  if (value == nullptr) {
    if (!fallback) fail(key, "is missing");
    return *fallback;
  }
  if (!value->is_number_integer()) fail(key, "is not an integer");
  if (value->is_number_unsigned() ? value->get<uint64_t>() > static_cast<uint64_t>(max) : value->get<int64_t>() > max) {
    fail(key, "is larger than this importer accepts (at most " + std::to_string(max) + ")");
  }
  const auto result = value->get<int64_t>();
  if (result <= 0) fail(key, "must be positive, got " + std::to_string(result));
  return result;
}

bool HfConfigFields::flag(const std::string& key, bool fallback) const {
  const auto* value = find(key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) fail(key, "is not true or false");
  return value->get<bool>();
}

std::string HfConfigFields::text(const std::string& key, const std::string& fallback) const {
  const auto* value = find(key);
  if (value == nullptr) return fallback;
  if (!value->is_string()) fail(key, "is not a string");
  return value->get<std::string>();
}

double HfConfigFields::number(const std::string& key, double fallback) const {
  const auto* value = find(key);
  if (value == nullptr) return fallback;
  if (!value->is_number()) fail(key, "is not a number");
  return value->get<double>();
}

nlohmann::json read_hf_json_object(const fs::path& path, const std::string& role) {
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

// ---- the weights ----

namespace {

std::string shape_text(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

struct StoredTensor {
  const SafetensorsReader* reader;
  std::string stored_name;
  std::string label() const { return reader->source() + ": tensor '" + printable_name(stored_name) + "'"; }
};

}  // namespace

// The folder's tensors by the mapping's names (stored names without the mapping's prefix), from
// model.safetensors or from the shards of its index.
class HfWeights {
 public:
  HfWeights(const fs::path& folder, const HfMapping& mapping)
      : prefix_(mapping.name_prefix), skipped_suffixes_(mapping.skipped_suffixes) {
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
    const bool prefixed = !prefix_.empty() && stored_name.rfind(prefix_, 0) == 0;
    const std::string name = prefixed ? stored_name.substr(prefix_.size()) : stored_name;
    for (const auto& suffix : skipped_suffixes_) {
      if (name.ends_with(suffix)) return;
    }
    const auto [it, inserted] = tensors_.emplace(name, StoredTensor{&reader, stored_name});
    if (!inserted) {
      throw std::invalid_argument(StoredTensor{&reader, stored_name}.label() + " duplicates '" +
                                  printable_name(it->second.stored_name) + "'");
    }
  }

  void read_shards(const fs::path& folder, const fs::path& index_path) {
    const std::string source = "HF weight index '" + index_path.string() + "'";
    const nlohmann::json index = read_hf_json_object(index_path, "HF weight index");
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

  std::string prefix_;
  std::vector<std::string> skipped_suffixes_;
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::map<std::string, StoredTensor> tensors_;
};

namespace {

void check_stored(const StoredTensor& stored, const std::vector<int64_t>& expected_shape) {
  const SafetensorsTensorInfo& info = stored.reader->info(stored.stored_name);
  if (info.dtype != torch::kFloat && info.dtype != torch::kHalf && info.dtype != torch::kBFloat16) {
    throw std::invalid_argument(stored.label() + " has dtype " + info.dtype_name + " (F32, F16 or BF16 expected)");
  }
  if (info.shape != expected_shape) {
    throw std::invalid_argument(stored.label() + " has shape " + shape_text(info.shape) + ", expected " +
                                shape_text(expected_shape) + " from config.json");
  }
}

// Every name, dtype and shape against what config.json claims, before any weight is read.
void check_weights(const fs::path& folder, const HfMapping& mapping, const HfWeights& weights) {
  const std::string folder_label = "HF model folder '" + folder.string() + "'";
  std::map<std::string, std::vector<int64_t>> ours;
  for (const auto& [name, shape] : parameter_shapes(mapping.shape.config)) ours[name] = shape;
  std::set<std::string> expected;
  for (const auto& m : mapping.maps) {
    const StoredTensor* stored = weights.find(m.hf);
    if (stored == nullptr) {
      throw std::invalid_argument(folder_label + " lacks tensor '" + mapping.name_prefix + m.hf + "'");
    }
    const auto it = ours.find(m.ours);
    if (it == ours.end()) throw std::logic_error("HF import: the model has no parameter " + m.ours);
    check_stored(*stored, hf_tensor_shape(m, it->second, mapping.shape.vocab_size));
    expected.insert(m.hf);
  }
  if (!mapping.tied_head.empty()) {
    if (const StoredTensor* head = weights.find(mapping.tied_head)) {
      check_stored(*head, {mapping.shape.vocab_size, mapping.shape.config.n_embd});
      expected.insert(mapping.tied_head);
    } else if (mapping.tied_head_required) {
      throw std::invalid_argument(folder_label + " sets tie_word_embeddings false but has no " + mapping.tied_head);
    }
  }
  for (const auto& [name, stored] : weights.all()) {
    if (!expected.count(name)) {
      throw std::invalid_argument(stored.label() + " is not a " + mapping.architecture +
                                  " weight of this config (config.json disagrees with the weights)");
    }
  }
}

// A stored tensor as it lies in the mapped file (no copy); read-only.
torch::Tensor stored_view(const StoredTensor& stored) { return stored.reader->view(stored.stored_name); }

void require_finite(const torch::Tensor& values, const StoredTensor& stored) {
  if (values.numel() == 0) return;
  // One pass and two numbers (min and max propagate NaN; either is infinite for an infinity), rather than
  // a tensor of flags as large as the weight.
  const auto [low, high] = torch::aminmax(values);
  if (!std::isfinite(low.item<double>()) || !std::isfinite(high.item<double>())) {
    throw std::invalid_argument(stored.label() + " holds NaN or infinite values");
  }
}

}  // namespace

std::vector<int64_t> hf_tensor_shape(const HfTensorMap& map, std::vector<int64_t> shape, int64_t vocab_size) {
  if (map.vocabulary_rows) shape[0] = vocab_size;
  if (map.rows > 0) shape[0] = map.rows;
  if (map.transposed) std::swap(shape[0], shape[1]);
  return shape;
}

torch::Tensor hf_tensor_of(const HfTensorMap& map, const torch::Tensor& ours, int64_t vocab_size, int64_t head_size) {
  torch::Tensor value = ours.detach().to(torch::kCPU, torch::kFloat);
  if (map.vocabulary_rows) value = value.narrow(0, 0, vocab_size);
  if (map.rows > 0) value = value.narrow(0, map.row_begin, map.rows);
  if (map.negate_second_halves) {
    // Each head's second half negated: an involution, so export and import are the same operation.
    const auto sizes = value.sizes().vec();
    auto heads = value.reshape({-1, 2, head_size / 2, value.dim() == 2 ? value.size(1) : 1}).clone();
    heads.select(1, 1).neg_();
    value = heads.reshape(sizes);
  }
  if (map.transposed) value = value.t();
  return value.contiguous();
}

bool is_hf_model_folder(const fs::path& folder) {
  std::error_code ec;
  return fs::is_directory(folder, ec) && fs::exists(folder / "config.json", ec);
}

HfFolder open_hf_folder(const fs::path& folder, int64_t vocab_multiple) {
  if (vocab_multiple < 1) throw std::invalid_argument("vocabulary padding multiple must be positive");
  const fs::path path = folder / "config.json";
  const nlohmann::json json = read_hf_json_object(path, "HF config");
  const HfConfigFields fields(json, "HF config '" + path.string() + "'");
  HfFolder out;
  out.folder = folder;
  out.mapping = is_family_model_type(fields.text("model_type", "gpt2")) ? family_mapping(fields, vocab_multiple)
                                                                        : gpt2_mapping(fields, vocab_multiple);
  auto weights = std::make_shared<const HfWeights>(folder, out.mapping);
  try {
    check_weights(folder, out.mapping, *weights);
  } catch (const std::invalid_argument& e) {
    // transformers' GPT2Config is what an absent model_type means here; say so where the weights disagree.
    if (fields.find("model_type") != nullptr) throw;
    throw std::invalid_argument(std::string(e.what()) + " (" + path.string() +
                                " names no model_type, so it was read as GPT-2's)");
  }
  out.weights = std::move(weights);
  return out;
}

Gpt load_hf_folder(const HfFolder& folder) {
  Gpt model(folder.shape().config, WeightInit::for_loading);
  load_hf_weights(folder, model);
  return model;
}

HfGpt2Model load_hf_model(const HfFolder& opened) {
  HfGpt2Model out;
  static_cast<HfGpt2Config&>(out) = opened.shape();
  out.model = load_hf_folder(opened);
  return out;
}

HfGpt2Model load_hf_model(const fs::path& folder, int64_t vocab_multiple) {
  return load_hf_model(open_hf_folder(folder, vocab_multiple));
}

namespace {

// Our parameter's part that map `m` names, from the mapped file: one copy, converted to the parameter's
// dtype (and device), transposed on the way; the padded vocabulary rows beyond the folder's zeroed.
void fill_from_map(const HfFolder& folder, const HfTensorMap& m, torch::Tensor target) {
  const HfMapping& mapping = folder.mapping;
  const int64_t vocab_size = mapping.shape.vocab_size;
  const StoredTensor& stored = *folder.weights->find(m.hf);
  if (m.vocabulary_rows) {
    // Padded rows: never a target, and masked by samplers (vocab_limit).
    if (target.size(0) > vocab_size) target.narrow(0, vocab_size, target.size(0) - vocab_size).zero_();
    target = target.narrow(0, 0, vocab_size);
  }
  if (m.rows > 0) target = target.narrow(0, m.row_begin, m.rows);
  const torch::Tensor source = stored_view(stored);
  target.copy_(m.transposed ? source.t() : source);
  if (m.negate_second_halves) {
    const int64_t hs = mapping.shape.config.head_size();
    target.view({-1, 2, hs / 2, target.dim() == 2 ? target.size(1) : 1}).select(1, 1).neg_();
  }
  require_finite(target, stored);
}

// A stored tied head must equal the token embedding (`wte`, the model's whole one).
void check_tied_head(const HfFolder& folder, const torch::Tensor& wte) {
  const HfMapping& mapping = folder.mapping;
  const StoredTensor* head = mapping.tied_head.empty() ? nullptr : folder.weights->find(mapping.tied_head);
  if (head == nullptr) return;
  const torch::Tensor embedding = wte.narrow(0, 0, mapping.shape.vocab_size);
  if (!torch::equal(stored_view(*head).to(embedding.device(), embedding.scalar_type()), embedding)) {
    throw std::invalid_argument(
        head->label() + " differs from the token embedding" +
        (mapping.tied_head_required
             ? ": config.json unties them (tie_word_embeddings false), and this " + mapping.architecture +
                   " is read only with its head tied to the embedding"
             : ", but config.json ties them (tie_word_embeddings)"));
  }
}

}  // namespace

void load_hf_weights(const HfFolder& folder, Gpt& model) {
  torch::NoGradGuard no_grad;
  auto parameters = model->named_parameters();
  std::set<std::string> filled;
  for (const auto& m : folder.mapping.maps) {
    auto* parameter = parameters.find(m.ours);
    if (parameter == nullptr) throw std::logic_error("HF import: the model has no parameter " + m.ours);
    fill_from_map(folder, m, *parameter);
    filled.insert(m.ours);
  }
  // Norms without gains have no parameters; every parameter there is must have come from the file.
  for (const auto& item : parameters) {
    if (!filled.count(item.key())) throw std::logic_error("HF import: nothing filled " + item.key());
  }
  check_tied_head(folder, model->wte->weight);
}

void for_each_hf_weight(const HfFolder& folder, const Gpt& model,
                        const std::function<void(const std::string&, const torch::Tensor&)>& take) {
  torch::NoGradGuard no_grad;
  const auto parameters = model->named_parameters();
  for (const auto& m : folder.mapping.maps) {
    if (parameters.find(m.ours) == nullptr) throw std::logic_error("HF import: the model has no parameter " + m.ours);
  }
  for (const auto& item : parameters) {
    torch::Tensor value = torch::empty(item.value().sizes(), torch::TensorOptions().dtype(item.value().scalar_type()));
    bool filled = false;
    for (const auto& m : folder.mapping.maps) {
      if (m.ours != item.key()) continue;
      fill_from_map(folder, m, value);
      filled = true;
    }
    if (!filled) throw std::logic_error("HF import: nothing filled " + item.key());
    if (item.key() == "wte.weight") check_tied_head(folder, value);
    take(item.key(), value);
  }
}

}  // namespace mygpt
