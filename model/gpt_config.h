#pragma once
// GPT model hyperparameters, the named presets, and their text form (stored inside checkpoints).
// One config describes a family of decoder-only transformers: GPT-2 (learned positions, LayerNorm with
// biases, tanh-GELU, tied head) and the newer block of nanochat, Llama and Qwen (rotary positions,
// RMSNorm, QK-norm, ReLU^2 or SwiGLU, grouped-query attention, untied head, logit soft-cap). Each choice
// is one field here (one row of model/gpt_config_fields.h); model/gpt.cpp reads them in one block, top to bottom.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/number_text.h"
#include "model/gpt_config_fields.h"

namespace mygpt {

// The family's choices (their names are those of the options and of the checkpoint text).
enum class Positions { learned, rotary };       // GPT-2's position embedding | RoPE (Su et al. 2021)
enum class NormKind { layernorm, rmsnorm };
enum class MlpKind { gelu_tanh, relu2, swiglu };  // GPT-2 | nanochat / modded-nanogpt | Llama
enum class InitKind { gpt2, nanochat };         // see GptImpl::reset_parameters

// Each choice's one table of names: what a flag, the checkpoint text, run.json and the architecture line say.
template <typename Enum>
struct EnumNames;
template <>
struct EnumNames<Positions> {
  static constexpr const char* what = "positions";
  static constexpr std::pair<const char*, Positions> names[] = {{"learned", Positions::learned},
                                                                {"rotary", Positions::rotary}};
};
template <>
struct EnumNames<NormKind> {
  static constexpr const char* what = "norm";
  static constexpr std::pair<const char*, NormKind> names[] = {{"layernorm", NormKind::layernorm},
                                                               {"rmsnorm", NormKind::rmsnorm}};
};
template <>
struct EnumNames<MlpKind> {
  static constexpr const char* what = "mlp";
  static constexpr std::pair<const char*, MlpKind> names[] = {
      {"gelu", MlpKind::gelu_tanh}, {"relu2", MlpKind::relu2}, {"swiglu", MlpKind::swiglu}};
};
template <>
struct EnumNames<InitKind> {
  static constexpr const char* what = "init";
  static constexpr std::pair<const char*, InitKind> names[] = {{"gpt2", InitKind::gpt2},
                                                               {"nanochat", InitKind::nanochat}};
};

template <typename Enum>
const char* enum_name(Enum v) {
  for (const auto& [name, value] : EnumNames<Enum>::names) {
    if (value == v) return name;
  }
  throw std::logic_error(std::string(EnumNames<Enum>::what) + " value without a name");
}
// A name; std::invalid_argument listing the known ones otherwise ("unknown mlp 'geglu' (known: gelu, relu2, swiglu)").
template <typename Enum>
Enum parse_enum(const std::string& name) {
  std::string list;
  for (const auto& [known, value] : EnumNames<Enum>::names) {
    if (name == known) return value;
    list += (list.empty() ? "" : ", ") + std::string(known);
  }
  throw std::invalid_argument("unknown " + std::string(EnumNames<Enum>::what) + " '" + name + "' (known: " + list + ")");
}

// "none" or a positive finite number (the cap of cap * tanh(logits / cap)).
std::optional<double> parse_logit_softcap(const std::string& text);
std::string logit_softcap_text(const std::optional<double>& cap);

// A field's flag: its name with dashes (n_kv_head: n-kv-head).
std::string field_flag_name(const std::string& field);

// The roles and flag checks of the field table's rows (model/gpt_config_fields.h says what each means).
enum class FieldRole { data, size, setting, choice };
enum class FieldCheck { none, positive, fraction, above_one, open_unit };

struct GptConfig {
#define MYGPT_CONFIG_MEMBER(Type, name, init, ...) Type name = init;
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_CONFIG_MEMBER)
#undef MYGPT_CONFIG_MEMBER

  int64_t head_size() const { return n_embd / n_head; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int64_t mlp_width() const { return mlp_hidden > 0 ? mlp_hidden : 4 * n_embd; }
  // Rows of the fused q, k, v projection and of the MLP's input projection (SwiGLU's gate and up).
  int64_t qkv_rows() const { return (n_head + 2 * kv_heads()) * head_size(); }
  int64_t mlp_in_rows() const { return (mlp == MlpKind::swiglu ? 2 : 1) * mlp_width(); }
  // Whether this is GPT-2's architecture (any size): every choice shows GPT-2's.
  bool is_gpt2_architecture() const;

  // Throws std::invalid_argument naming the first bad field (non-positive sizes, heads that do not
  // divide the width, kv-heads that do not divide the heads, rotary with an odd head size, a soft-cap
  // <= 0, dropout outside [0, 1)).
  void validate() const;
  // One line naming the architecture's choices ("rotary(10000), rmsnorm(eps 1e-05, no weight), relu2 3072, ...,
  // nanochat init"): every field the family options set, so two configs that differ there read differently.
  std::string architecture_text() const;

  // One "key=value" per line, the table's rows in order (choices only where they depart from the default);
  // from_text reads what to_text writes, in any order, and what every earlier version wrote.
  std::string to_text() const;
  static GptConfig from_text(const std::string& text);

  bool operator==(const GptConfig&) const = default;
};

// Calls visit(name, value) for every field in the table's order, with the value run.json shows (the effective
// MLP width and kv-heads).
template <typename Visit>
void visit_shown_fields(const GptConfig& c, Visit&& visit) {
#define MYGPT_VISIT_SHOWN(Type, name, init, role, check, place, phrase, shown, help) visit(#name, shown);
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_VISIT_SHOWN)
#undef MYGPT_VISIT_SHOWN
}

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

// A model shape as a command line gives it: a preset, and the fields that override it (one per row of the
// field table; vocab_size is never given here: the data's --vocab-size sets it).
struct ModelShapeOptions {
  std::string preset;
#define MYGPT_OVERRIDE_MEMBER(Type, name, ...) std::optional<Type> name;
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_OVERRIDE_MEMBER)
#undef MYGPT_OVERRIDE_MEMBER

  // config with the fields of `role` given here put over it.
  void apply_to(GptConfig& config, FieldRole role) const;

  // The preset with the overrides and the data's vocabulary; validated (std::invalid_argument naming the flags
  // that made the shape).
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
