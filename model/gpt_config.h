#pragma once
// GPT model hyperparameters, the named presets, and their text form (stored inside checkpoints).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mygpt {

struct GptConfig {
  int64_t vocab_size = 50304;  // GPT-2's 50257 padded up to a multiple of 64 for faster matmuls
  int64_t block_size = 1024;   // longest context the position embedding covers
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;
  bool bias = true;

  // Throws std::invalid_argument naming the first bad field (non-positive sizes, heads that do not
  // divide the width, dropout outside [0, 1)).
  void validate() const;

  // One "key=value" per line; from_text accepts exactly what to_text writes.
  std::string to_text() const;
  static GptConfig from_text(const std::string& text);

  bool operator==(const GptConfig&) const = default;
};

// Presets by name: "gpt2" (124M), "gpt2-medium", "gpt2-large", "gpt2-xl" (all with the padded BPE
// vocabulary), and small ones for CPU work and tests: "shakespeare-char" (nanoGPT's character model),
// "small" and "tiny". Unknown names throw std::invalid_argument listing the known ones.
GptConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

// True for the GPT-2 family of presets, which also bring the GPT-2 training recipe.
bool is_gpt2_preset(const std::string& name);

// A model shape as a command line gives it: a preset, and the fields that override it.
struct ModelShapeOptions {
  std::string preset;
  std::optional<int64_t> n_layer, n_head, n_embd, block_size;
  std::optional<double> dropout;
  std::optional<bool> bias;

  // The preset with the overrides and the data's vocabulary; validated (std::invalid_argument).
  GptConfig resolve(int64_t vocab_size) const;
};

// Rounds a vocabulary size up to a multiple (GPU kernels favour sizes with many powers of two).
int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple = 64);

// The parameters of a Gpt of this config without building it (so sizing a model costs nothing): the
// 2-D weights AdamW decays (tied embedding and head counted once) and the 1-D rest. A test checks it
// against the built model.
struct ParameterCounts {
  int64_t decayed = 0, decayed_tensors = 0;
  int64_t not_decayed = 0, not_decayed_tensors = 0;
  int64_t total() const { return decayed + not_decayed; }
};
ParameterCounts count_parameters(const GptConfig& config);

// The name and shape of every parameter of a Gpt of this config, in the model's order, without building
// it: what a stored model's tensors must be before anything of its claimed size is allocated. A test
// checks it against the built model.
std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes(const GptConfig& config);

}  // namespace mygpt
