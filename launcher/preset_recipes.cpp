// The recipes that presets bring: each one table of the values its run takes where a flag is not given
// (--help lists them beside each option's default, "[gpt2: ...; shakespeare-char: ...]").
#include "launcher/train_flag_groups.h"

namespace mygpt {

void add_preset_recipes(OptionTable<TrainFlags>& t) {
  // GPT-2 124M on 10B tokens of FineWeb (build-nanogpt's train_gpt2.py): 0.5M tokens per step, warm-up of
  // 375M tokens, one epoch; every gpt2 preset brings it.
  t.recipe("gpt2", {{"steps", 19073},
                    {"seq-len", 1024},
                    {"total-batch-tokens", 524288},
                    {"lr", 6e-4},
                    {"warmup-steps", 715},
                    {"checkpoint-every", 5000},
                    // Muon's, where --optimizer muon: KellerJordan/Muon's example for a GPT-2-like model.
                    {"muon-weight-decay", 0.01}});
  // nanoGPT's config/train_shakespeare_char.py.
  t.recipe("shakespeare-char", {{"steps", 5000},
                                {"batch-size", 64},
                                {"lr", 1e-3},
                                {"warmup-steps", 100},
                                {"beta2", 0.99},
                                {"eval-steps", 200}});
  t.recipe_of(
      [](const TrainFlags& f) { return is_gpt2_preset(f.model.preset) ? std::string("gpt2") : f.model.preset; });
}

}  // namespace mygpt
