#pragma once
// The model config's fields as one table: each row makes GptConfig's member (model/gpt_config.h), its
// "key=value" line in the checkpoint text (to_text, from_text), its override of a preset (ModelShapeOptions,
// and so its --flag in the Model group of `train` and `plan`, launcher/model_flags.cpp), its part of the
// architecture line, its entry in run.json's "model" object, and how a flag given with a stored model must agree
// with it (launcher/run_start.cpp). Adding a field is its row here and its use in the model (model/gpt.cpp).
//
// X(Type, name, default, role, check, place, phrase, shown, help):
//   Type, name, default  the member; the text key is the name, the flag the name with dashes (n_kv_head: --n-kv-head).
//   role    data     (set by the data, not by a model flag: written always, read as required)
//           size     (written always, read as required; a flag given with a stored model must equal it)
//           setting  (written always, read as required; a run's choice: a resume must agree, --init-from takes the flag)
//           choice   (written only where it departs from the default, so that GPT-2's text is what it always was
//                     and a checkpoint older than the field reads as GPT-2; a flag given with a stored model must
//                     make the same architecture line)
//   check   the flag's check beyond its type: none, positive, fraction ([0, 1)), above_one ((1, inf)),
//           open_unit ((0, 1)); enums and the soft-cap are checked by their own parse.
//   place, phrase  the field's phrase in the architecture line (an expression of the config `c`, "" for none), the
//           phrases ordered by place; place 0: none (the sizes, or a field another's phrase shows).
//   shown   the value that run.json and the architecture comparison show (an expression of `c`: the effective
//           MLP width and kv-heads where 0 means "the default").
//   help    the flag's help ("": no flag; --vocab-size is the data's).
//
// The rows are in the order of train's --help (the Model group) and of the checkpoint text.
#define MYGPT_GPT_CONFIG_FIELDS(X)                                                                                   \
  /* GPT-2's 50257 padded up to a multiple of 64 for faster matmuls */                                              \
  X(int64_t, vocab_size, 50304, data, none, 0, "", c.vocab_size, "")                                               \
  X(int64_t, n_layer, 12, size, positive, 0, "", c.n_layer, "transformer blocks (overrides the preset)")           \
  X(int64_t, n_head, 12, size, positive, 0, "", c.n_head, "attention heads (overrides the preset)")                \
  X(int64_t, n_embd, 768, size, positive, 0, "", c.n_embd, "embedding width (overrides the preset)")               \
  /* longest context the position embedding covers */                                                              \
  X(int64_t, block_size, 1024, size, positive, 0, "", c.block_size, "longest context (overrides the preset)")      \
  X(double, dropout, 0.0, setting, fraction, 0, "", c.dropout, "dropout probability (overrides the preset)")       \
  /* in the linear layers and the norms */                                                                          \
  X(bool, bias, true, size, none, 90, std::string(c.bias ? "biases" : "no biases"), c.bias,                         \
    "biases in the linear layers and layer norms (overrides the preset; GPT-2's and the small ones: true)")        \
  /* The family's choices; the defaults are GPT-2's, so a config that sets none of them is GPT-2. */                \
  X(Positions, positions, Positions::learned, choice, none, 10, positions_phrase(c), c.positions,                   \
    "position encoding: learned (GPT-2) or rotary")                                                                 \
  /* rotary base (rotary only) */                                                                                   \
  X(double, rope_theta, 10000.0, choice, above_one, 0, "", c.rope_theta,                                            \
    "rotary base (rotary positions; nanochat and Llama 2: 10000)")                                                  \
  X(NormKind, norm, NormKind::layernorm, choice, none, 20, norm_phrase(c), c.norm,                                  \
    "normalization: layernorm (GPT-2) or rmsnorm")                                                                  \
  /* a learned gain in every norm (nanochat's RMSNorm has none) */                                                  \
  X(bool, norm_weight, true, choice, none, 0, "", c.norm_weight, "a learned gain in every norm (nanochat: false)")  \
  X(double, norm_eps, 1e-5, choice, open_unit, 0, "", c.norm_eps, "the norms' epsilon (GPT-2: 1e-5, nanochat: 1e-6)") \
  X(bool, embedding_norm, false, choice, none, 30, std::string(c.embedding_norm ? "embedding norm" : ""),           \
    c.embedding_norm, "a norm right after the token embedding (nanochat)")                                          \
  /* queries and keys normalized per head before attention (and rotary) */                                         \
  X(bool, qk_norm, false, choice, none, 40, std::string(c.qk_norm ? "qk-norm" : ""), c.qk_norm,                     \
    "normalize queries and keys per head (nanochat, Qwen3)")                                                        \
  X(MlpKind, mlp, MlpKind::gelu_tanh, choice, none, 50, enum_name(c.mlp) + (" " + std::to_string(c.mlp_width())),   \
    c.mlp, "MLP: gelu (GPT-2's tanh-GELU), relu2 (nanochat) or swiglu (Llama)")                                     \
  /* the MLP's inner width; 0: 4 * n_embd */                                                                        \
  X(int64_t, mlp_hidden, 0, choice, positive, 0, "", c.mlp_width(), "the MLP's inner width (default 4 x --n-embd)") \
  /* key/value heads (grouped-query attention when fewer); 0: n_head */                                             \
  X(int64_t, n_kv_head, 0, choice, positive, 60, heads_phrase(c), c.kv_heads(),                                     \
    "key/value heads; fewer than --n-head: grouped-query attention")                                                \
  /* the output head is the token embedding */                                                                      \
  X(bool, tie_head, true, choice, none, 70, std::string(c.tie_head ? "tied head" : "untied head"), c.tie_head,      \
    "the output head is the token embedding (GPT-2: true, nanochat: false)")                                        \
  /* logits -> cap * tanh(logits / cap) (nanochat: 15) */                                                           \
  X(std::optional<double>, logit_softcap, std::nullopt, choice, none, 80,                                           \
    c.logit_softcap ? "soft-cap " + number_text(*c.logit_softcap) : std::string(), c.logit_softcap,                 \
    "cap the logits to cap * tanh(logits / cap) (nanochat: 15), or none")                                           \
  /* see GptImpl::reset_parameters */                                                                               \
  X(InitKind, init, InitKind::gpt2, choice, none, 100, enum_name(c.init) + std::string(" init"), c.init,            \
    "initialization: gpt2 (N(0, 0.02)) or nanochat (zero output projections)")
