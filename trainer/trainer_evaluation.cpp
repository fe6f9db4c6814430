// The Trainer's evaluations: the validation loss (of held-out text, or of held-out conversations with
// --sft), HellaSwag, CORE and a sample, each when due. Batch b of a pass is rank b % W's, in rounds of one
// batch per rank with a stop check between rounds.
#include <cmath>
#include <limits>
#include <string>

#include "trainer/mixed_precision.h"
#include "trainer/trainer.h"
#include "trainer/validation_batches.h"

namespace mygpt {

bool Trainer::in_evaluation_rounds(int64_t batches, const std::function<void()>& score_next) {
  // Rounds of one batch per rank (a rank past the count sits one out), each ended by the stop check.
  for (int64_t round = 0; round < batches; round += comm_.world_size()) {
    if (round + comm_.rank() < batches) {
      score_next();
    } else if (fully_sharded_) {
      fully_sharded_->idle_forward();  // --zero 3: the others' forwards gather every unit from every rank
    }
    if (round + comm_.world_size() < batches && stop_agreed()) return false;
  }
  return true;
}

void Trainer::validation_pass(BatchLoader& loader, int64_t batches, torch::Tensor& sums,
                              const std::function<void(const Batch&)>& add) {
  torch::NoGradGuard no_grad;
  p_.model->eval();
  evaluation_stopped_ = !in_evaluation_rounds(batches, [&] {
    const Batch batch = loader.next(p_.device);
    AutocastScope autocast(p_.device, precision());
    add(batch);
  });
  comm_.all_reduce(sums, ReduceOp::Sum);  // ranks may hold one batch more than others: sum, then divide
  p_.model->train();
}

double Trainer::evaluate() {
  const auto on_device = torch::TensorOptions().dtype(torch::kFloat).device(p_.device);
  if (p_.sft) {
    // The mean over every assistant token of the held-out batches, as the training loss is over a step's.
    p_.sft_val_loader->reset();
    auto sums = torch::zeros({2}, on_device);  // summed loss, trained targets
    validation_pass(*p_.sft_val_loader, p_.sft_val_batches, sums, [&](const Batch& batch) {
      sums[0] += p_.model->loss(batch.x, batch.y, LossReduction::sum, p_.val_vocab_limit).to(torch::kFloat);
      sums[1] += batch.y.ge(0).sum().to(torch::kFloat);
    });
    return sums[0].item<double>() / sums[1].item<double>();
  }
  p_.val_loader->reset();  // the same validation batches every time, so evaluations compare
  // Batch b is read by rank b % W (the loader's chunk position + rank): each rank its share of the count.
  const int64_t batches = validation_batches(options_.eval_steps, *p_.val_loader).count;
  auto loss_sum = torch::zeros({}, on_device);
  if (p_.val_bpb) p_.val_bpb->reset();
  validation_pass(*p_.val_loader, batches, loss_sum, [&](const Batch& batch) {
    // One pass gives both numbers: the batch's mean loss and its sums for bits per byte.
    const torch::Tensor losses = p_.model->loss(batch.x, batch.y, LossReduction::none, p_.val_vocab_limit);
    loss_sum += losses.mean();
    if (p_.val_bpb) p_.val_bpb->add(losses, batch.y);
  });
  last_val_bpb_ = p_.val_bpb ? p_.val_bpb->combine(comm_) : std::numeric_limits<double>::quiet_NaN();
  return loss_sum.item<double>() / static_cast<double>(batches);
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
  if (!p_.hellaswag.empty() && due(options_.hellaswag_every)) {
    const HellaSwagResult h = evaluate_hellaswag(p_.model, p_.hellaswag, options_.hellaswag_examples, comm_, p_.device,
                                                 precision(), {}, kHellaSwagExamplesPerBatch,
                                                 [this] { return stop_agreed(); });
    if (h.stopped) {
      output_.print(cut + strprintf("HellaSwag was cut short after %lld examples and is not recorded",
                                    static_cast<long long>(h.total)));
      return false;
    }
    output_.print(strprintf("step %lld | hellaswag: %lld/%lld = %.4f", static_cast<long long>(step),
                            static_cast<long long>(h.correct), static_cast<long long>(h.total), h.accuracy()));
    output_.metrics({{"step", step}, {"hellaswag_acc", h.accuracy()}, {"hellaswag_total", h.total}});
  }
  if (p_.core && due(options_.core_every)) {
    const CoreScore core = evaluate_core(p_.model, *p_.core, *p_.core_codec, p_.core_codec->end_of_text(),
                                         options_.core_max_per_task, comm_, p_.device, precision(), p_.core_vocab_limit,
                                         {}, [this] { return stop_agreed(); });
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
  if (p_.sample && due(options_.sample_every) && output_.writes()) {
    // On lines of its own, as generated (newlines kept), and in metrics.jsonl beside the losses.
    const std::string sample = p_.sample(p_.model);
    output_.print(strprintf("step %lld | sample:\n", static_cast<long long>(step)) + sample);
    output_.metrics({{"step", step}, {"sample", sample}});
  }
  return true;
}


}  // namespace mygpt
