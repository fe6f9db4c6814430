#pragma once
// The one reader of Hugging Face model folders (config.json + model.safetensors, or the sharded
// model.safetensors.index.json + shards). A folder is opened once: config.json is read once and handed to
// its family's mapping (GPT-2: model/hf/hf_gpt2.cpp; NanoChat, Llama, Qwen3: model/hf/hf_family.cpp), which
// turns it into our config and a list of tensor maps; every map is checked against the safetensors
// headers (name, dtype, shape) before a model of the claimed size is built. Loading then reads each
// tensor once from the mapped file and converts it straight into the model's parameter, with no
// intermediate copy.
//
// Every problem is one std::invalid_argument line naming the file and the field or tensor.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/gpt_config.h"

namespace mygpt {

struct HfGpt2Config {
  GptConfig config;        // our model's shape; config.vocab_size is the padded vocabulary, dropout 0
  int64_t vocab_size = 0;  // the real vocabulary (config.json's vocab_size)
};

struct HfGpt2Model : HfGpt2Config {
  Gpt model{nullptr};  // fp32 on the CPU, padded embedding rows zero
};

// One tensor of theirs and where it goes in ours: rows [row_begin, row_begin + rows) of our parameter
// `ours` (rows 0: all of it). Export and import read the same list.
struct HfTensorMap {
  std::string hf, ours;
  int64_t row_begin = 0, rows = 0;
  bool vocabulary_rows = false;       // embedding and head: only the first vocab_size rows are theirs
  bool transposed = false;            // GPT-2's Conv1D weights, stored (in, out); ours are (out, in)
  bool negate_second_halves = false;  // NanoChat's q and k (model/hf/hf_family.h)
};

// The shape of one of their tensors as the map says it must be, from our parameter's shape.
std::vector<int64_t> hf_tensor_shape(const HfTensorMap& map, std::vector<int64_t> ours, int64_t vocab_size);
// Our parameter's rows that the map names, as they are stored in their file (CPU, fp32, contiguous).
torch::Tensor hf_tensor_of(const HfTensorMap& map, const torch::Tensor& ours, int64_t vocab_size, int64_t head_size);

class HfWeights;  // the folder's safetensors files, by tensor name

// What a family's mapping makes of config.json.
struct HfMapping {
  HfGpt2Config shape;
  std::vector<HfTensorMap> maps;    // every tensor the model needs, in the model's order
  std::string architecture;         // "GPT-2", "LlamaForCausalLM", ... for messages
  std::string tied_head;            // a tied head's name, accepted if saved anyway and checked equal on load
  bool tied_head_required = false;  // config.json unties the head, which our GPT-2 computes only if it is equal
  std::string name_prefix;          // a prefix stored names may carry ("transformer." for GPT-2)
  std::vector<std::string> skipped_suffixes;  // stored buffers that are not weights (GPT-2's attn.bias)
};

struct HfFolder {
  std::filesystem::path folder;
  HfMapping mapping;
  std::shared_ptr<const HfWeights> weights;
  const HfGpt2Config& shape() const { return mapping.shape; }
};

// True when `folder` is a folder holding a config.json (how a command tells a Hugging Face folder
// from one of our checkpoints); says nothing about whether the folder is valid.
bool is_hf_model_folder(const std::filesystem::path& folder);

// Reads config.json (once), maps it by its model_type (gpt2 or absent: GPT-2; nanochat, llama, qwen3) with
// the vocabulary padded to vocab_multiple, and checks every tensor's name, dtype and shape against it
// without reading a weight.
HfFolder open_hf_folder(const std::filesystem::path& folder, int64_t vocab_multiple = 64);

// The folder's weights in a new model on the CPU, built without a random initialization.
Gpt load_hf_folder(const HfFolder& folder);
// The folder's weights into `model` (any device, fp32 parameters, the folder's shape but for vocabulary
// rows, which may be more: those past the folder's are zeroed). Each tensor is read once from the mapped
// file into the parameter; non-finite values, and a tied head that differs from the embedding, are refused.
void load_hf_weights(const HfFolder& folder, Gpt& model);
// The same values one parameter at a time, for a model that keeps only a part of each (--zero 3):
// take(name, value) in the model's parameter order, value a CPU tensor of the parameter's shape that lives
// until take returns. `model` gives the names and shapes only (WeightInit::unallocated will do).
void for_each_hf_weight(const HfFolder& folder, const Gpt& model,
                        const std::function<void(const std::string&, const torch::Tensor&)>& take);
// An opened folder's shape and its weights in a new model (load_hf_folder).
HfGpt2Model load_hf_model(const HfFolder& opened);
// open_hf_folder then load_hf_folder, for callers that need nothing in between.
HfGpt2Model load_hf_model(const std::filesystem::path& folder, int64_t vocab_multiple = 64);

}  // namespace mygpt
