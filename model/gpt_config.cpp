#include "model/gpt_config.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "common/strprintf.h"

namespace mygpt {
namespace {

struct PresetShape {
  int64_t n_layer, n_head, n_embd, block_size, vocab_size;
  double dropout;
  bool bias;
};

// The GPT-2 family (Radford et al. 2019) with the padded vocabulary, plus small shapes that train in
// minutes on a CPU. Character presets keep vocab_size 0: the tokenizer built from the text sets it.
// Every preset has biases, as GPT-2 has (nanoGPT's shakespeare-char config leaves its train.py's
// bias = False; `--bias false` trains that model).
const std::map<std::string, PresetShape>& presets() {
  static const std::map<std::string, PresetShape> table = {
      {"gpt2", {12, 12, 768, 1024, 50304, 0.0, true}},
      {"gpt2-medium", {24, 16, 1024, 1024, 50304, 0.0, true}},
      {"gpt2-large", {36, 20, 1280, 1024, 50304, 0.0, true}},
      {"gpt2-xl", {48, 25, 1600, 1024, 50304, 0.0, true}},
      {"shakespeare-char", {6, 6, 384, 256, 0, 0.2, true}},
      {"small", {4, 4, 128, 128, 0, 0.0, true}},
      {"tiny", {2, 2, 32, 32, 0, 0.0, true}},
  };
  return table;
}

// nanochat's depth dial (karpathy/nanochat scripts/base_train.py): width 64 * depth, heads of 128
// (ceil), as many kv-heads, its 2048-token block, and its block (model/gpt.cpp's nanochat member:
// rotary, weightless RMSNorm also after the embedding, QK-norm, ReLU^2, no biases, untied head,
// soft-cap 15) with its initialization. The architecture is the one transformers' NanoChat reads.
GptConfig nanochat_config(int64_t depth) {
  GptConfig c;
  c.n_layer = depth;
  c.n_embd = 64 * depth;
  c.n_head = std::max<int64_t>(1, (c.n_embd + 127) / 128);
  c.n_kv_head = c.n_head;
  c.block_size = 2048;
  c.vocab_size = 0;  // the data (or --vocab-size) sets it
  c.dropout = 0.0;
  c.bias = false;
  c.positions = Positions::rotary;
  c.rope_theta = 10000.0;
  c.norm = NormKind::rmsnorm;
  c.norm_weight = false;
  c.norm_eps = 1e-6;  // transformers' NanoChatConfig.rms_norm_eps (torch's rms_norm default is finfo.eps)
  c.embedding_norm = true;
  c.qk_norm = true;
  c.mlp = MlpKind::relu2;
  c.tie_head = false;
  c.logit_softcap = 15.0;
  c.init = InitKind::nanochat;
  return c;
}

// A Llama-style block (rotary 10000, RMSNorm with gains, SwiGLU of Llama's 8/3 width rounded up to 64,
// grouped-query attention 4:2, no biases, untied head) at the size of "small"; GPT-2's initialization.
GptConfig llama_small_config() {
  GptConfig c;
  c.n_layer = 4;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 128;
  c.block_size = 128;
  c.vocab_size = 0;
  c.bias = false;
  c.positions = Positions::rotary;
  c.norm = NormKind::rmsnorm;
  c.norm_eps = 1e-5;
  c.mlp = MlpKind::swiglu;
  c.mlp_hidden = 384;
  c.tie_head = false;
  return c;
}

const std::vector<int64_t>& nanochat_depths() {
  static const std::vector<int64_t> depths = {4, 12, 16, 20, 24, 26, 32};
  return depths;
}

// A double as the checkpoint text has always held it (17 significant digits; from_text reads any form).
std::string stored_text(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}
std::string stored_text(int64_t v) { return std::to_string(v); }
std::string stored_text(bool v) { return v ? "1" : "0"; }
std::string stored_text(const std::optional<double>& cap) { return logit_softcap_text(cap); }
template <typename Enum, typename = std::enable_if_t<std::is_enum_v<Enum>>>
std::string stored_text(Enum v) {
  return enum_name(v);
}

// A field's value from its checkpoint text, each type by its own parse; the messages are what they always were.
template <typename Number, typename Parse>
Number stored_number(const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const std::out_of_range&) {
    throw std::invalid_argument("model config holds a number out of range");
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("model config holds a field that is not a number");
  }
}
void read_stored(const std::string& text, int64_t& v) {
  v = stored_number<int64_t>(text, [](const std::string& t) { return std::stoll(t); });
}
void read_stored(const std::string& text, double& v) {
  v = stored_number<double>(text, [](const std::string& t) { return std::stod(t); });
}
void read_stored(const std::string& text, bool& v) {
  v = stored_number<int64_t>(text, [](const std::string& t) { return std::stoll(t); }) != 0;
}
template <typename Named, typename Parse>
void read_named(const std::string& text, Named& v, Parse parse) {
  try {
    v = parse(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("model config: ") + e.what());
  }
}
void read_stored(const std::string& text, std::optional<double>& v) { read_named(text, v, parse_logit_softcap); }
template <typename Enum, typename = std::enable_if_t<std::is_enum_v<Enum>>>
void read_stored(const std::string& text, Enum& v) {
  read_named(text, v, parse_enum<Enum>);
}

// A value as a flag's message shows it (--n-layer 3, --bias false, --logit-softcap 15).
std::string flag_text(int64_t v) { return std::to_string(v); }
std::string flag_text(double v) { return number_text(v); }
std::string flag_text(bool v) { return v ? "true" : "false"; }
std::string flag_text(const std::optional<double>& cap) { return logit_softcap_text(cap); }
template <typename Enum, typename = std::enable_if_t<std::is_enum_v<Enum>>>
std::string flag_text(Enum v) {
  return enum_name(v);
}

// The architecture line's phrases that show several fields.
std::string positions_phrase(const GptConfig& c) {
  std::string text = enum_name(c.positions);
  if (c.positions == Positions::rotary) text += "(" + number_text(c.rope_theta) + ")";
  return text;
}
std::string norm_phrase(const GptConfig& c) {
  return std::string(enum_name(c.norm)) + "(eps " + number_text(c.norm_eps) + (c.norm_weight ? "" : ", no weight") + ")";
}
std::string heads_phrase(const GptConfig& c) {
  std::string text = std::to_string(c.n_head) + " heads";
  if (c.kv_heads() != c.n_head) text += " / " + std::to_string(c.kv_heads()) + " kv";
  return text;
}

void require_positive(int64_t value, const char* name) {
  if (value <= 0) {
    throw std::invalid_argument(std::string(name) + " must be positive, got " + std::to_string(value));
  }
}

}  // namespace

std::optional<double> parse_logit_softcap(const std::string& text) {
  if (text == "none") return std::nullopt;
  size_t used = 0;
  double cap = 0.0;
  try {
    cap = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !std::isfinite(cap) || cap <= 0.0) {
    throw std::invalid_argument("logit soft-cap must be a positive number or none, got '" + text + "'");
  }
  // The cap is applied to fp32 (or 16-bit) logits: one beyond float's range becomes inf there and every
  // loss NaN (issue 41's audit: --logit-softcap 1e40 trained with every step skipped).
  if (cap > static_cast<double>(FLT_MAX)) {
    throw std::invalid_argument("logit soft-cap must be at most 3.4e38 (float32's largest number), got '" + text + "'");
  }
  // Below float32's smallest normal number the cap rounds to a subnormal or to 0 there (1e-50 became no
  // cap at all).
  if (cap < static_cast<double>(FLT_MIN)) {
    throw std::invalid_argument("logit soft-cap must be at least 1.2e-38 (float32's smallest normal number), got '" +
                                text + "'");
  }
  return cap;
}

std::string logit_softcap_text(const std::optional<double>& cap) { return cap ? number_text(*cap) : "none"; }

std::string field_flag_name(const std::string& field) {
  std::string flag = field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

bool GptConfig::is_gpt2_architecture() const {
  // The same sizes and settings with every choice at its default (GPT-2's), compared as shown: the MLP's 4x
  // width and as many kv-heads as heads, named or not, are GPT-2's.
  GptConfig gpt2;
#define MYGPT_COPY_SIZE(Type, name, init, role, ...) \
  if (FieldRole::role != FieldRole::choice) gpt2.name = name;
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_COPY_SIZE)
#undef MYGPT_COPY_SIZE
  bool same = true;
#define MYGPT_SAME_SHOWN(Type, name, init, role, check, place, phrase, shown, help) \
  same = same && [](const GptConfig& c) { return shown; }(*this) == [](const GptConfig& c) { return shown; }(gpt2);
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_SAME_SHOWN)
#undef MYGPT_SAME_SHOWN
  return same;
}

std::string GptConfig::architecture_text() const {
  std::vector<std::pair<int, std::string>> phrases;
  const GptConfig& c = *this;
#define MYGPT_PHRASE(Type, name, init, role, check, place, phrase, ...) \
  if (place > 0) phrases.emplace_back(place, phrase);
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_PHRASE)
#undef MYGPT_PHRASE
  std::stable_sort(phrases.begin(), phrases.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string text;
  for (const auto& [place, phrase] : phrases) {
    if (!phrase.empty()) text += (text.empty() ? "" : ", ") + phrase;
  }
  return text;
}

void GptConfig::validate() const {
  require_positive(vocab_size, "vocab size");
  require_positive(block_size, "block size");
  require_positive(n_layer, "n_layer");
  require_positive(n_head, "n_head");
  require_positive(n_embd, "n_embd");
  if (n_embd % n_head != 0) {
    throw std::invalid_argument("n_head (" + std::to_string(n_head) + ") does not divide n_embd (" +
                                std::to_string(n_embd) + ")");
  }
  if (n_kv_head < 0) throw std::invalid_argument("n_kv_head must be positive, got " + std::to_string(n_kv_head));
  if (n_head % kv_heads() != 0) {
    throw std::invalid_argument("n_kv_head (" + std::to_string(kv_heads()) + ") does not divide n_head (" +
                                std::to_string(n_head) + ")");
  }
  if (positions == Positions::rotary && head_size() % 2 != 0) {
    throw std::invalid_argument("rotary positions need an even head size, got " + std::to_string(head_size()) +
                                " (n_embd " + std::to_string(n_embd) + " / n_head " + std::to_string(n_head) + ")");
  }
  if (!(rope_theta > 1.0 && std::isfinite(rope_theta))) {
    throw std::invalid_argument("rope_theta must be a finite number above 1, got " + number_text(rope_theta));
  }
  if (!(norm_eps > 0.0 && norm_eps < 1.0)) {
    throw std::invalid_argument("norm_eps must be in (0, 1), got " + number_text(norm_eps));
  }
  if (mlp_hidden < 0) throw std::invalid_argument("mlp_hidden must be positive, got " + std::to_string(mlp_hidden));
  if (logit_softcap && !(*logit_softcap >= static_cast<double>(FLT_MIN) && *logit_softcap <= static_cast<double>(FLT_MAX))) {
    throw std::invalid_argument("logit soft-cap must be within float32's normal numbers (1.2e-38 to 3.4e38), got " +
                                number_text(*logit_softcap));
  }
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    throw std::invalid_argument("dropout must be in [0, 1), got " + std::to_string(dropout));
  }
  // Sizes whose tensors no machine holds are bad input, not an allocator failure halfway through a
  // build (and they keep every size product below int64's range). 2^40 parameters is ~700x GPT-2 XL.
  const double width = static_cast<double>(n_embd);
  const double per_layer = 4.0 * width * width + 3.0 * width * static_cast<double>(mlp_width());
  const double parameters = static_cast<double>(n_layer) * per_layer +
                            (static_cast<double>(vocab_size) + static_cast<double>(block_size)) * width;
  if (parameters > 1099511627776.0) {
    throw std::invalid_argument(strprintf("a model of %lld layers, %lld wide, vocabulary %lld and block %lld has "
                                          "%.3g parameters, beyond the 2^40 this program builds",
                                          static_cast<long long>(n_layer), static_cast<long long>(n_embd),
                                          static_cast<long long>(vocab_size), static_cast<long long>(block_size),
                                          parameters));
  }
}

std::string GptConfig::to_text() const {
  // The choices only where they depart from GPT-2's: a GPT-2 config's text has the fields it always had, and a
  // checkpoint written before a choice existed reads as GPT-2.
  const GptConfig gpt2;
  std::string out;
#define MYGPT_WRITE_FIELD(Type, name, init, role, ...)              \
  if (FieldRole::role != FieldRole::choice || name != gpt2.name) { \
    out += #name "=" + stored_text(name) + "\n";                    \
  }
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_WRITE_FIELD)
#undef MYGPT_WRITE_FIELD
  return out;
}

GptConfig GptConfig::from_text(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("model config line without '=': " + line);
    fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  GptConfig config;
  // A choice absent keeps its default; any other field absent is an error (the message it always had).
#define MYGPT_READ_FIELD(Type, name, init, role, ...)                                                  \
  if (const auto it = fields.find(#name); it != fields.end()) {                                       \
    read_stored(it->second, config.name);                                                             \
  } else if (FieldRole::role != FieldRole::choice) {                                                  \
    throw std::invalid_argument("model config: model config lacks " #name);                           \
  }
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_READ_FIELD)
#undef MYGPT_READ_FIELD
  config.validate();
  return config;
}

GptConfig preset_config(const std::string& name) {
  if (name == "llama-small") return llama_small_config();
  if (name.rfind("nanochat-d", 0) == 0) {
    const std::string digits = name.substr(10);
    if (!digits.empty() && digits.size() <= 2 && digits.find_first_not_of("0123456789") == std::string::npos &&
        digits[0] != '0') {
      return nanochat_config(std::stoll(digits));  // any depth 1..99 (the listed ones are nanochat's)
    }
  }
  const auto it = presets().find(name);
  if (it == presets().end()) {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown preset '" + name + "' (known: " + known + ")");
  }
  const PresetShape& p = it->second;
  GptConfig config;
  config.n_layer = p.n_layer;
  config.n_head = p.n_head;
  config.n_embd = p.n_embd;
  config.block_size = p.block_size;
  config.vocab_size = p.vocab_size;
  config.dropout = p.dropout;
  config.bias = p.bias;
  return config;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, shape] : presets()) names.push_back(name);
  for (const int64_t depth : nanochat_depths()) names.push_back("nanochat-d" + std::to_string(depth));
  names.push_back("llama-small");
  return names;
}

bool is_gpt2_preset(const std::string& name) { return name.rfind("gpt2", 0) == 0; }

GptConfig ModelShapeOptions::resolve(int64_t vocab_size) const {
  GptConfig config = preset_config(preset);
  apply_to(config, FieldRole::size);
  apply_to(config, FieldRole::setting);
  apply_to(config, FieldRole::choice);
  config.vocab_size = vocab_size;  // the data decides: character vocabulary, or the (padded) BPE one
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    // Name the flags that made the shape, so that the user knows what to change.
    std::string made_by = "--preset " + preset;
#define MYGPT_NAME_GIVEN(Type, name, ...) \
  if (this->name) made_by += " --" + field_flag_name(#name) + " " + flag_text(*this->name);
    MYGPT_GPT_CONFIG_FIELDS(MYGPT_NAME_GIVEN)
#undef MYGPT_NAME_GIVEN
    throw std::invalid_argument(std::string(e.what()) + " (the shape of " + made_by + ", vocabulary " +
                                std::to_string(vocab_size) + " from the data or --vocab-size)");
  }
  return config;
}

void ModelShapeOptions::apply_to(GptConfig& config, FieldRole role) const {
#define MYGPT_APPLY(Type, name, init, field_role, ...) \
  if (FieldRole::field_role == role && name) config.name = *name;
  MYGPT_GPT_CONFIG_FIELDS(MYGPT_APPLY)
#undef MYGPT_APPLY
}

int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple) {
  return (vocab_size + multiple - 1) / multiple * multiple;
}

ParameterCounts count_parameters(const GptConfig& c) {
  // From the shapes, so that the two can never disagree: matrices and embeddings decay, the rest not.
  ParameterCounts n;
  for (const auto& [name, shape] : parameter_shapes(c)) {
    int64_t numel = 1;
    for (const int64_t d : shape) numel *= d;
    if (shape.size() >= 2) {
      n.decayed += numel;
      ++n.decayed_tensors;
    } else {
      n.not_decayed += numel;
      ++n.not_decayed_tensors;
    }
  }
  return n;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes(const GptConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"wte.weight", {c.vocab_size, C}}};
  if (c.positions == Positions::learned) shapes.push_back({"wpe.weight", {c.block_size, C}});
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    shapes.push_back({name + ".weight", {out, in}});
    if (c.bias) shapes.push_back({name + ".bias", {out}});
  };
  auto norm = [&](const std::string& name, int64_t width) {
    if (c.norm_weight) shapes.push_back({name + ".weight", {width}});
    if (c.bias && c.norm == NormKind::layernorm) shapes.push_back({name + ".bias", {width}});
  };
  if (c.embedding_norm) norm("ln_e", C);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string block = "h." + std::to_string(i) + ".";
    norm(block + "ln_1", C);
    linear(block + "attn.c_attn", c.qkv_rows(), C);
    linear(block + "attn.c_proj", C, c.n_head * c.head_size());
    if (c.qk_norm) {
      norm(block + "attn.q_norm", c.head_size());
      norm(block + "attn.k_norm", c.head_size());
    }
    norm(block + "ln_2", C);
    linear(block + "mlp.c_fc", c.mlp_in_rows(), C);
    linear(block + "mlp.c_proj", C, c.mlp_width());
  }
  norm("ln_f", C);
  if (!c.tie_head) shapes.push_back({"lm_head.weight", {c.vocab_size, C}});
  return shapes;
}

double training_flops_per_token(const GptConfig& c, int64_t seq_len) {
  double weights = 0.0;
  for (const auto& [name, shape] : parameter_shapes(c)) {
    if (name == "wpe.weight" || (name == "wte.weight" && !c.tie_head)) continue;  // lookups, not matmuls
    double numel = 1.0;
    for (const int64_t d : shape) numel *= static_cast<double>(d);
    weights += numel;
  }
  return 6.0 * weights +
         12.0 * static_cast<double>(c.n_layer) * static_cast<double>(c.n_head * c.head_size()) * static_cast<double>(seq_len);
}

}  // namespace mygpt
