#pragma once
// One evaluator for `train` (every --eval-every, --hellaswag-every, --core-every steps) and `eval` (once):
// both describe what to evaluate in one EvaluationPlan and call the same passes, so a number printed by one
// is the number the other prints for the same model and data. The callers print; the evaluator computes.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dataloader/batch_loader.h"
#include "distributed/communicator.h"
#include "eval/bits_per_byte.h"
#include "eval/core_eval.h"
#include "eval/evaluation_rounds.h"
#include "eval/hellaswag_eval.h"
#include "eval/validation_loss.h"
#include "model/gpt.h"
#include "model/mixed_precision.h"
#include "tokenizer/text_codec.h"

namespace mygpt {

// Which evaluations run, on what, within which limits. The data is the caller's (it outlives the plan); a
// null pointer leaves that evaluation out.
struct EvaluationPlan {
  // The validation loss: `validation_batches` batches of `validation` (all ranks together), read from where
  // the loader stands (train resets it before each pass, so every pass scores the same batches).
  BatchLoader* validation = nullptr;
  int64_t validation_batches = 0;
  bool conversations = false;            // held-out conversations: the assistant's tokens are the targets
  BitsPerByte* bits_per_byte = nullptr;  // plain text with a tokenizer: bits per byte beside the loss
  int64_t validation_vocab_limit = 0;    // the tokenizer's tokens among the model's rows; 0: every row

  // HellaSwag: its first `hellaswag_examples` examples (0: all), every row of the model in the softmax.
  const std::vector<TokenizedHellaSwag>* hellaswag = nullptr;
  int64_t hellaswag_examples = 0;

  // CORE: each task's first `core_max_per_task` items in nanochat's order (0: all), prompts encoded with
  // `core_codec` (its end of text the BOS of each row).
  const CoreBundle* core = nullptr;
  const TextCodec* core_codec = nullptr;
  int64_t core_max_per_task = 0;
  int64_t core_vocab_limit = 0;
};

class Evaluator {
 public:
  // rounds: what every rank does between and within rounds (train: the stop check, --zero 3's idle forward).
  Evaluator(const EvaluationPlan& plan, Gpt& model, Communicator& comm, const torch::Device& device,
            Precision precision, EvaluationRounds rounds = {});

  // Each pass is a collective: every rank calls it. The optional progress callbacks hear of this rank's work.
  ValidationLoss validation_loss(const std::function<void(int64_t done, double running_loss)>& progress = {});
  HellaSwagResult hellaswag(const std::function<void(int64_t done, int64_t correct)>& on_example = {});
  CoreScore core(const std::function<void(const std::string& label, int64_t done, int64_t total)>& on_progress = {});

 private:
  const EvaluationPlan& plan_;
  Gpt& model_;
  Communicator& comm_;
  torch::Device device_;
  Precision precision_;
  EvaluationRounds rounds_;
};

}  // namespace mygpt
