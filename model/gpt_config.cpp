#include "model/gpt_config.h"

#include <map>
#include <sstream>
#include <stdexcept>

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

void require_positive(int64_t value, const char* name) {
  if (value <= 0) {
    throw std::invalid_argument(std::string(name) + " must be positive, got " + std::to_string(value));
  }
}

}  // namespace

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
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    throw std::invalid_argument("dropout must be in [0, 1), got " + std::to_string(dropout));
  }
  // Sizes whose tensors no machine holds are bad input, not an allocator failure halfway through a
  // build (and they keep every size product below int64's range). 2^40 parameters is ~700x GPT-2 XL.
  const double width = static_cast<double>(n_embd);
  const double parameters = static_cast<double>(n_layer) * 12.0 * width * width +
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
  std::ostringstream out;
  out.precision(17);
  out << "vocab_size=" << vocab_size << "\nblock_size=" << block_size << "\nn_layer=" << n_layer
      << "\nn_head=" << n_head << "\nn_embd=" << n_embd << "\ndropout=" << dropout << "\nbias=" << (bias ? 1 : 0)
      << "\n";
  return out.str();
}

GptConfig GptConfig::from_text(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("model config line without '=': " + line);
    fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  auto field = [&](const char* key) -> const std::string& {
    const auto it = fields.find(key);
    if (it == fields.end()) throw std::invalid_argument(std::string("model config lacks ") + key);
    return it->second;
  };
  GptConfig config;
  try {
    config.vocab_size = std::stoll(field("vocab_size"));
    config.block_size = std::stoll(field("block_size"));
    config.n_layer = std::stoll(field("n_layer"));
    config.n_head = std::stoll(field("n_head"));
    config.n_embd = std::stoll(field("n_embd"));
    config.dropout = std::stod(field("dropout"));
    config.bias = std::stoll(field("bias")) != 0;
  } catch (const std::out_of_range&) {
    throw std::invalid_argument("model config holds a number out of range");
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind("model config", 0) == 0) throw;
    throw std::invalid_argument("model config holds a field that is not a number");
  }
  config.validate();
  return config;
}

GptConfig preset_config(const std::string& name) {
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
  return names;
}

bool is_gpt2_preset(const std::string& name) { return name.rfind("gpt2", 0) == 0; }

GptConfig ModelShapeOptions::resolve(int64_t vocab_size) const {
  GptConfig config = preset_config(preset);
  if (n_layer) config.n_layer = *n_layer;
  if (n_head) config.n_head = *n_head;
  if (n_embd) config.n_embd = *n_embd;
  if (block_size) config.block_size = *block_size;
  if (dropout) config.dropout = *dropout;
  if (bias) config.bias = *bias;
  config.vocab_size = vocab_size;  // the data decides: character vocabulary, or the (padded) BPE one
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    // Name the flags that made the shape, so that the user knows what to change.
    std::string made_by = "--preset " + preset;
    auto given = [&](const char* flag, const std::optional<int64_t>& value) {
      if (value) made_by += std::string(" --") + flag + " " + std::to_string(*value);
    };
    given("n-layer", n_layer);
    given("n-head", n_head);
    given("n-embd", n_embd);
    given("block-size", block_size);
    throw std::invalid_argument(std::string(e.what()) + " (the shape of " + made_by + ", vocabulary " +
                                std::to_string(vocab_size) + " from the data or --vocab-size)");
  }
  return config;
}

int64_t padded_vocab_size(int64_t vocab_size, int64_t multiple) {
  return (vocab_size + multiple - 1) / multiple * multiple;
}

ParameterCounts count_parameters(const GptConfig& c) {
  ParameterCounts n;
  const int64_t C = c.n_embd, L = c.n_layer;
  // wte (also the head), wpe; per block c_attn, attn c_proj, c_fc, mlp c_proj.
  n.decayed = (c.vocab_size + c.block_size) * C + L * 12 * C * C;
  n.decayed_tensors = 2 + 4 * L;
  // Per block: two layer norms (weight, bias) and the four linears' biases; the final layer norm.
  n.not_decayed = c.bias ? L * 13 * C + 2 * C : L * 2 * C + C;
  n.not_decayed_tensors = c.bias ? L * 8 + 2 : L * 2 + 1;
  return n;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes(const GptConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"wte.weight", {c.vocab_size, C}},
                                                                      {"wpe.weight", {c.block_size, C}}};
  auto add = [&](const std::string& name, int64_t out, int64_t in) {
    shapes.push_back({name + ".weight", in > 0 ? std::vector<int64_t>{out, in} : std::vector<int64_t>{out}});
    if (c.bias) shapes.push_back({name + ".bias", {out}});
  };
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string block = "h." + std::to_string(i) + ".";
    add(block + "ln_1", C, 0);
    add(block + "attn.c_attn", 3 * C, C);
    add(block + "attn.c_proj", C, C);
    add(block + "ln_2", C, 0);
    add(block + "mlp.c_fc", 4 * C, C);
    add(block + "mlp.c_proj", C, 4 * C);
  }
  add("ln_f", C, 0);
  return shapes;
}

}  // namespace mygpt
