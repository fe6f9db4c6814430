#include "launcher/train_flags.h"

#include <limits>
#include <stdexcept>

#include "launcher/shared_flags.h"
#include "launcher/train_flag_groups.h"

namespace mygpt {
namespace {

// The check of a family option whose value model/ parses (model/gpt_config.h): its message, naming the flag.
template <typename Parse>
std::function<void(const std::string&, const std::string&)> family_choice(Parse parse) {
  return [parse](const std::string& flag, const std::string& value) {
    try {
      parse(value);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--" + flag + ": " + e.what());
    }
  };
}

OptionTable<TrainFlags> make_table() {
  using F = TrainFlags;
  using M = ModelShapeOptions;
  using R = RuntimeOptions;
  OptionTable<F> t;
  add_data_flags(t);
  t.group("Model");
  t.add("preset", &F::model, &M::preset,
        "model shape: gpt2, gpt2-medium, gpt2-large, gpt2-xl (these bring the GPT-2 recipe's defaults), "
        "shakespeare-char, small, tiny; nanochat-d12 ... nanochat-d32 (nanochat's depth dial, any nanochat-dN), "
        "llama-small")
      .init("small")
      .check([](const std::string&, const std::string& name) { preset_config(name); })
      .read_by(kPlanCommand);
  t.add("n-layer", &F::model, &M::n_layer, "transformer blocks (overrides the preset)")
      .check(positive)
      .read_by(kPlanCommand);
  t.add("n-head", &F::model, &M::n_head, "attention heads (overrides the preset)")
      .check(positive)
      .read_by(kPlanCommand);
  t.add("n-embd", &F::model, &M::n_embd, "embedding width (overrides the preset)")
      .check(positive)
      .read_by(kPlanCommand);
  t.add("block-size", &F::model, &M::block_size, "longest context (overrides the preset)")
      .check(positive)
      .read_by(kPlanCommand);
  t.add("dropout", &F::model, &M::dropout, "dropout probability (overrides the preset)")
      .check(in_range(0, 1, /*hi_inclusive=*/false))
      .read_by(kPlanCommand);
  t.add("bias", &F::model, &M::bias,
        "biases in the linear layers and layer norms (overrides the preset; GPT-2's and the small ones: true)")
      .read_by(kPlanCommand);
  // The architecture family (model/gpt_config.h); each overrides the preset's choice.
  t.add("positions", &F::model, &M::positions, "position encoding: learned (GPT-2) or rotary")
      .check(family_choice(parse_positions))
      .read_by(kPlanCommand);
  t.add("rope-theta", &F::model, &M::rope_theta, "rotary base (rotary positions; nanochat and Llama 2: 10000)")
      .check(in_open_range(1, std::numeric_limits<double>::infinity()))
      .read_by(kPlanCommand);
  t.add("norm", &F::model, &M::norm, "normalization: layernorm (GPT-2) or rmsnorm")
      .check(family_choice(parse_norm))
      .read_by(kPlanCommand);
  t.add("norm-weight", &F::model, &M::norm_weight, "a learned gain in every norm (nanochat: false)")
      .read_by(kPlanCommand);
  t.add("norm-eps", &F::model, &M::norm_eps, "the norms' epsilon (GPT-2: 1e-5, nanochat: 1e-6)")
      .check(in_open_range(0, 1))
      .read_by(kPlanCommand);
  t.add("embedding-norm", &F::model, &M::embedding_norm, "a norm right after the token embedding (nanochat)")
      .read_by(kPlanCommand);
  t.add("qk-norm", &F::model, &M::qk_norm, "normalize queries and keys per head (nanochat, Qwen3)")
      .read_by(kPlanCommand);
  t.add("mlp", &F::model, &M::mlp, "MLP: gelu (GPT-2's tanh-GELU), relu2 (nanochat) or swiglu (Llama)")
      .check(family_choice(parse_mlp))
      .read_by(kPlanCommand);
  t.add("mlp-hidden", &F::model, &M::mlp_hidden, "the MLP's inner width (default 4 x --n-embd)")
      .check(positive)
      .read_by(kPlanCommand);
  t.add("n-kv-head", &F::model, &M::n_kv_head, "key/value heads; fewer than --n-head: grouped-query attention")
      .check(positive)
      .read_by(kPlanCommand);
  t.add("tie-head", &F::model, &M::tie_head, "the output head is the token embedding (GPT-2: true, nanochat: false)")
      .read_by(kPlanCommand);
  t.add("logit-softcap", &F::model, &M::logit_softcap, "cap the logits to cap * tanh(logits / cap) (nanochat: 15), or none")
      .check(family_choice(parse_logit_softcap))
      .read_by(kPlanCommand);
  t.add("init", &F::model, &M::init, "initialization: gpt2 (N(0, 0.02)) or nanochat (zero output projections)")
      .check(family_choice(parse_init))
      .read_by(kPlanCommand);
  t.add("init-from", &F::runtime, &R::init_from,
        "start from these weights: a checkpoint (file or folder) or a Hugging Face folder (GPT-2, NanoChat, Llama, Qwen3). The model's shape "
        "comes from it (shape flags must agree); optimizer, step, schedule and data position start fresh. With "
        "--resume auto: only while --out holds no checkpoint (a requeued fine-tuning job resumes its own)")
      .read_by(kPlanCommand)
      .of_process();
  add_training_flags(t);
  add_run_flags(t);
  add_plan_flags(t);
  add_preset_recipes(t);
  t.check_declarations();
  return t;
}

}  // namespace

const OptionTable<TrainFlags>& train_flag_table() {
  static const OptionTable<TrainFlags> table = make_table();
  return table;
}

}  // namespace mygpt
