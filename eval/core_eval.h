#pragma once
// nanochat's CORE metric (the DCLM paper's in-context tasks): per task, the accuracy over its items
// (eval/core_prompts.h says which items, how they are rendered and what is scored), centered on the
// task's random baseline, (acc - 0.01 rb) / (1 - 0.01 rb); CORE is the mean of the centered accuracies.
// Items are scored by the shared loop (eval/choice_scoring.h): ranks stride them, N ranks == 1.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/core_bundle.h"
#include "eval/evaluation_rounds.h"
#include "distributed/communicator.h"
#include "model/gpt.h"
#include "tokenizer/text_codec.h"
#include "model/mixed_precision.h"

namespace mygpt {

struct CoreTaskScore {
  std::string label;
  CoreTaskType type = CoreTaskType::multiple_choice;
  double accuracy = 0, centered = 0;
  int64_t items = 0;
};

struct CoreScore {
  std::vector<CoreTaskScore> tasks;
  double core = 0;
  bool stopped = false;  // a stop all ranks agreed on cut the pass: nothing in it is a result
};

// One line per task whose scored items are fewer than its shots + 1 (nanochat fails there; each item here
// takes all the others as its examples).
std::vector<std::string> core_fewshot_notes(const CoreBundle& bundle, int64_t max_per_task);

// bos: the tokenizer's document token (TextCodec::end_of_text), put first in every row; -1: none.
// on_progress(label, done, total) after each item this rank scored; rounds as in score_items.
CoreScore evaluate_core(Gpt& model, const CoreBundle& bundle, const TextCodec& codec, int64_t bos, int64_t max_per_task,
                        Communicator& comm, const torch::Device& device, Precision precision, int64_t vocab_limit,
                        const std::function<void(const std::string& label, int64_t done, int64_t total)>& on_progress = {},
                        const EvaluationRounds& rounds = {});

// {"core": X, "tasks": {"LABEL": {"type": T, "accuracy": A, "centered": C, "examples": N}}}
nlohmann::json core_score_json(const CoreScore& score);

}  // namespace mygpt
