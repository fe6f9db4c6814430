#pragma once
// GPT model hyperparameters, the named presets, and their text form (stored inside checkpoints).
// One config describes a family of decoder-only transformers: GPT-2 (learned positions, LayerNorm with
// biases, tanh-GELU, tied head) and the newer block of nanochat, Llama and Qwen (rotary positions,
// RMSNorm, QK-norm, ReLU^2 or SwiGLU, grouped-query attention, untied head, logit soft-cap). Each choice
// is one field here; model/gpt.cpp reads them in one block, top to bottom.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mygpt {

// The family's choices (their names are those of the options and of the checkpoint text).
enum class Positions { learned, rotary };       // GPT-2's position embedding | RoPE (Su et al. 2021)
enum class NormKind { layernorm, rmsnorm };
enum class MlpKind { gelu_tanh, relu2, swiglu };  // GPT-2 | nanochat / modded-nanogpt | Llama
enum class InitKind { gpt2, nanochat };         // see GptImpl::reset_parameters

const char* positions_name(Positions v);
const char* norm_name(NormKind v);
const char* mlp_name(MlpKind v);
const char* init_name(InitKind v);
// Parse a name; std::invalid_argument listing the known ones otherwise.
Positions parse_positions(const std::string& name);
NormKind parse_norm(const std::string& name);
MlpKind parse_mlp(const std::string& name);
InitKind parse_init(const std::string& name);
// "none" or a positive finite number (the cap of cap * tanh(logits / cap)).
std::optional<double> parse_logit_softcap(const std::string& text);
std::string logit_softcap_text(const std::optional<double>& cap);

struct GptConfig {
  int64_t vocab_size = 50304;  // GPT-2's 50257 padded up to a multiple of 64 for faster matmuls
  int64_t block_size = 1024;   // longest context the position embedding covers
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;
  bool bias = true;  // in the linear layers and the norms

  // The family's choices; the defaults are GPT-2's, so a config that sets none of them is GPT-2.
  Positions positions = Positions::learned;
  double rope_theta = 10000.0;   // rotary base (rotary only)
  NormKind norm = NormKind::layernorm;
  bool norm_weight = true;       // a learned gain in every norm (nanochat's RMSNorm has none)
  double norm_eps = 1e-5;
  bool embedding_norm = false;   // a norm right after the token embedding (nanochat)
  bool qk_norm = false;          // queries and keys normalized per head before attention (and rotary)
  MlpKind mlp = MlpKind::gelu_tanh;
  int64_t mlp_hidden = 0;        // the MLP's inner width; 0: 4 * n_embd
  int64_t n_kv_head = 0;         // key/value heads (grouped-query attention when fewer); 0: n_head
  bool tie_head = true;          // the output head is the token embedding
  std::optional<double> logit_softcap;  // logits -> cap * tanh(logits / cap) (nanochat: 15)
  InitKind init = InitKind::gpt2;

  int64_t head_size() const { return n_embd / n_head; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int64_t mlp_width() const { return mlp_hidden > 0 ? mlp_hidden : 4 * n_embd; }
  // Rows of the fused q, k, v projection and of the MLP's input projection (SwiGLU's gate and up).
  int64_t qkv_rows() const { return (n_head + 2 * kv_heads()) * head_size(); }
  int64_t mlp_in_rows() const { return (mlp == MlpKind::swiglu ? 2 : 1) * mlp_width(); }
  // Whether this is GPT-2's architecture (any size).
  bool is_gpt2_architecture() const;

  // Throws std::invalid_argument naming the first bad field (non-positive sizes, heads that do not
  // divide the width, kv-heads that do not divide the heads, rotary with an odd head size, a soft-cap
  // <= 0, dropout outside [0, 1)).
  void validate() const;
  // One line naming the architecture's choices ("rotary(10000), rmsnorm(eps 1e-05, no weight), relu2 3072, ...,
  // nanochat init"): every field the family options set, so two configs that differ there read differently.
  std::string architecture_text() const;

  // One "key=value" per line; from_text accepts exactly what to_text writes.
  std::string to_text() const;
  static GptConfig from_text(const std::string& text);

  bool operator==(const GptConfig&) const = default;
};

// Presets by name: "gpt2" (124M), "gpt2-medium", "gpt2-large", "gpt2-xl" (all with the padded BPE
// vocabulary), and small ones for CPU work and tests: "shakespeare-char" (nanoGPT's character model),
// "small" and "tiny"; nanochat's depth dial "nanochat-d4" ... "nanochat-d32" (width 64 * depth, head size
// 128, its block and initialization, nanochat's 65536-token vocabulary until the data sets it), and
// "llama-small" (a Llama-style block at the size of "small"). Unknown names throw std::invalid_argument
// listing the known ones.
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
  // The family's choices, by the names parse_* reads (a string each, so that model/ owns the names).
  std::optional<std::string> positions, norm, mlp, init, logit_softcap;
  std::optional<double> rope_theta, norm_eps;
  std::optional<bool> norm_weight, embedding_norm, qk_norm, tie_head;
  std::optional<int64_t> n_kv_head, mlp_hidden;

  // config with the fields given here put over it.
  void apply_to(GptConfig& config) const;

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

// Training FLOPs per token (forward and backward) as nanoGPT and nanochat count them: 6 per weight
// that multiplies a token (the head included, the embeddings' lookups not) plus the attention's
// 12 * layers * (heads * head size) * sequence length.
double training_flops_per_token(const GptConfig& config, int64_t seq_len);

}  // namespace mygpt
