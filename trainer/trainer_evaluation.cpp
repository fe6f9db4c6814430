// The Trainer's evaluations: the validation loss (of held-out text, or of held-out conversations with
// --sft), HellaSwag and CORE through the evaluator `eval` calls too (eval/evaluator.h), and a sample, each when due.
#include <cmath>
#include <limits>
#include <string>

#include "eval/evaluator.h"
#include "eval/validation_batches.h"
#include "model/mixed_precision.h"
#include "trainer/trainer.h"

namespace mygpt {

// The run's evaluations as one plan (eval/evaluator.h, which `eval` fills from its flags): the held-out text or
// conversations, HellaSwag's examples, the CORE bundle.
EvaluationPlan Trainer::evaluation_plan() {
  EvaluationPlan plan;
  if (p_.sft && p_.sft_val_loader) {
    // The mean over every assistant token of the held-out batches, as the training loss is over a step's.
    plan.validation = p_.sft_val_loader.get();
    plan.validation_batches = p_.sft_val_batches;
    plan.conversations = true;
  } else if (p_.val_loader) {
    plan.validation = p_.val_loader.get();
    plan.validation_batches = validation_batches(options_.eval_steps, *p_.val_loader).count;
    if (p_.val_bpb) plan.bits_per_byte = &*p_.val_bpb;
  }
  plan.validation_vocab_limit = p_.val_vocab_limit;
  if (!p_.hellaswag.empty()) plan.hellaswag = &p_.hellaswag;
  plan.hellaswag_examples = options_.hellaswag_examples;
  if (p_.core) {
    plan.core = &*p_.core;
    plan.core_codec = p_.core_codec.get();
  }
  plan.core_max_per_task = options_.core_max_per_task;
  plan.core_vocab_limit = p_.core_vocab_limit;
  return plan;
}

double Trainer::evaluate() {
  // The same validation batches every time, so evaluations compare. Batch b is read by rank b % W.
  if (p_.sft) {
    p_.sft_val_loader->reset();
  } else {
    p_.val_loader->reset();
  }
  const EvaluationPlan plan = evaluation_plan();
  // A stop asked during the pass ends it at the next round, on every rank together.
  const ValidationLoss result = Evaluator(plan, p_.model, comm_, p_.device, precision(), evaluation_rounds()).validation_loss();
  evaluation_stopped_ = result.stopped;
  last_val_bpb_ = result.bits_per_byte;
  return result.loss;
}

// Every rank takes part in every round of a HellaSwag or CORE pass: a stop ends it on all together, and under
// --zero 3 a rank whose items are done runs the gathers the others' forwards wait for.
EvaluationRounds Trainer::evaluation_rounds() {
  EvaluationRounds rounds;
  rounds.stop = [this] { return stop_agreed(); };
  if (fully_sharded_) rounds.sit_out = [this] { fully_sharded_->idle_forward(); };
  return rounds;
}

bool Trainer::evaluate_at(int64_t step, bool final, TrainSummary& summary) {
  auto due = [&](int64_t every) { return every > 0 && (final || step % every == 0); };
  // A stop asked during an evaluation (a full HellaSwag takes minutes on a CPU; Slurm's grace before
  // SIGKILL may be shorter) ends it at the next batch, on every rank together.
  const std::string cut = strprintf("step %lld | stop requested: ", static_cast<long long>(step));
  // A run of --time-budget ends with a validation whatever --eval-every says: its val_bpb is its result.
  if (has_validation() && (due(options_.eval_every) || (final && budget_))) {
    const double val_loss = evaluate();
    if (evaluation_stopped_) {
      output_.print(cut + "the validation loss was cut short and is not recorded");
      return false;
    }
    summary.last_val_loss = val_loss;
    summary.last_val_bpb = last_val_bpb_;
    if (std::isnan(last_val_bpb_)) {
      output_.print(strprintf("step %lld | val loss: %.4f", static_cast<long long>(step), val_loss));
      output_.metrics({{"step", step}, {"val_loss", val_loss}});
    } else {
      output_.print(strprintf("step %lld | val loss: %.4f | val bpb: %.4f", static_cast<long long>(step), val_loss,
                              last_val_bpb_));
      output_.metrics({{"step", step}, {"val_loss", val_loss}, {"val_bpb", last_val_bpb_}});
    }
  }
  const EvaluationPlan plan = evaluation_plan();
  Evaluator evaluator(plan, p_.model, comm_, p_.device, precision(), evaluation_rounds());
  if (plan.hellaswag && due(options_.hellaswag_every)) {
    const HellaSwagResult h = evaluator.hellaswag();
    if (h.stopped) {
      output_.print(cut + strprintf("HellaSwag was cut short after %lld examples and is not recorded",
                                    static_cast<long long>(h.total)));
      return false;
    }
    output_.print(strprintf("step %lld | hellaswag: %lld/%lld = %.4f", static_cast<long long>(step),
                            static_cast<long long>(h.correct), static_cast<long long>(h.total), h.accuracy()));
    output_.metrics({{"step", step}, {"hellaswag_acc", h.accuracy()}, {"hellaswag_total", h.total}});
  }
  if (plan.core && due(options_.core_every)) {
    const CoreScore core = evaluator.core();
    if (core.stopped) {
      output_.print(cut + "CORE was cut short and is not recorded");
      return false;
    }
    nlohmann::json tasks = nlohmann::json::object();
    for (const CoreTaskScore& t : core.tasks) tasks[t.label] = t.centered;
    output_.print(strprintf("step %lld | CORE: %.4f (%zu tasks, centered accuracy)", static_cast<long long>(step),
                            core.core, core.tasks.size()));
    output_.metrics({{"step", step}, {"core", core.core}, {"core_tasks", tasks}});
  }
  // Rank 0 samples. At --zero 3 each forward of the sample gathers every unit from all the ranks, so the
  // others generate the same tokens beside it (the same weights and seed) and drop the text.
  if (p_.sample && due(options_.sample_every) && (output_.writes() || fully_sharded_)) {
    const std::string sample = p_.sample(p_.model);
    if (output_.writes()) {
      // On lines of its own, as generated (newlines kept), and in metrics.jsonl beside the losses.
      output_.print(strprintf("step %lld | sample:\n", static_cast<long long>(step)) + sample);
      output_.metrics({{"step", step}, {"sample", sample}});
    }
  }
  return true;
}


}  // namespace mygpt
