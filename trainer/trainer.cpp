#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "model/widening_sum.h"
#include "model/mixed_precision.h"
#include "trainer/step_profiler.h"

namespace mygpt {


Trainer::Trainer(TrainerParts parts, const TrainOptions& options, Communicator& comm, RunOutput output)
    : p_(std::move(parts)),
      options_(options),
      comm_(comm),
      output_(std::move(output)),
      schedule_(p_.schedule),
      grad_sync_(p_.grad_sync.get()),
      rank_check_(comm_, options.check_ranks_every),
      fully_sharded_(std::move(p_.fully_sharded)),
      zero_(std::move(p_.zero)),
      scaler_(options.precision != Precision::fp16
                  ? nullptr
                  : std::make_unique<LossScaler>(
                        LossScalerOptions{options.loss_scale_init, options.loss_scale_growth_interval})),
      model_state_(p_.model),
      loader_state_(*p_.train_loader),
      random_state_(p_.device) {
  if (options_.precision == Precision::automatic) throw std::logic_error("precision must be resolved for the device");
  if ((grad_sync_ == nullptr) == (fully_sharded_ == nullptr)) {
    throw std::logic_error("a Trainer needs its gradient buckets, or its fully sharded model (--zero 3)");
  }
  if (grad_sync_) {
    grad_norm_.emplace(*grad_sync_, comm_, /*sharded=*/options.zero > 0);
  } else {
    sharded_model_state_ = std::make_unique<FullyShardedModelState>(*fully_sharded_, p_.model);
  }
  if (!zero_ && !p_.optimizer) throw std::logic_error("a Trainer needs an optimizer");
  if (scaler_) {
    loss_scale_ = torch::empty({}, torch::TensorOptions().dtype(torch::kFloat).device(p_.device));
    inverse_loss_scale_ = torch::empty_like(loss_scale_);
  }
  stop_flag_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(p_.device));
  if (options_.time_budget) {
    budget_ = std::make_unique<TimeBudget>(options_.time_budget->seconds, comm_, p_.device, p_.budget_clock);
    schedule_.warmup_fraction = options_.warmup_fraction;
  }
  if (options_.cuda_graph) {
    const std::string refusal = cuda_graph_refusal(
        {p_.device, comm_.communicates(), p_.sft, options_.optimizer, options_.zero, options_.recompute});
    if (!refusal.empty()) throw std::invalid_argument(refusal);
    graph_step_ = std::make_unique<CudaGraphStep>();
  }
}

const Batch& Trainer::next_train_batch(int64_t micro) {
  // A graph replays fixed addresses. The loader's batch is on the device already (from pinned memory);
  // the copy into the fixed tensors costs 16 bytes a token, device to device.
  const Batch batch = p_.train_loader->next(p_.device);
  if (inputs_.size() <= static_cast<size_t>(micro)) inputs_.push_back({torch::empty_like(batch.x), torch::empty_like(batch.y)});
  Batch& slot = inputs_[static_cast<size_t>(micro)];
  if (!batch.x.sizes().equals(slot.x.sizes()) || !batch.y.sizes().equals(slot.y.sizes())) {
    throw std::runtime_error("--cuda-graph: a training batch of shape " + std::to_string(batch.x.size(0)) + "x" +
                             std::to_string(batch.x.size(1)) + " where the step was captured with " +
                             std::to_string(slot.x.size(0)) + "x" + std::to_string(slot.x.size(1)) +
                             ": a graph replays fixed shapes");
  }
  slot.x.copy_(batch.x, /*non_blocking=*/true);
  slot.y.copy_(batch.y, /*non_blocking=*/true);
  return slot;
}

StepResult Trainer::train_step(int64_t step) {
  p_.model->train();
  const double lr = budget_ ? schedule_.at_fraction(budget_progress_) : schedule_.at(step);
  optimizer().set_lr(lr);
  if (p_.muon) p_.muon->set_lr(options_.muon_lr * lr / schedule_.max_lr);  // the same schedule, scaled
  const std::vector<Batch> sft_batches = p_.sft ? read_sft_micro_batches() : std::vector<Batch>{};
  const torch::Tensor trained_tokens = p_.sft ? global_trained_tokens(sft_batches) : torch::Tensor();
  const double loss_scale = scaler_ ? scaler_->scale() : 1.0;
  if (scaler_) {  // a power of two: the products below are exact, as with the host's double before
    loss_scale_.fill_(loss_scale);
    inverse_loss_scale_.fill_(1.0 / loss_scale);
  }
  stop_flag_.fill_(stop_requested_here() ? 1.0 : 0.0);
  // --cuda-graph: the step's micro-batches go into their fixed tensors first, then the graph replays the
  // device's part of the step (the eager step reads each one as its forward comes).
  if (graph_step_) {
    for (int64_t micro = 0; micro < options_.grad_accum; ++micro) next_train_batch(micro);
  }
  const std::vector<torch::Tensor> on_device =
      graph_step_ ? graph_step_->run([&] { return step_on_device(sft_batches, trained_tokens); })
                  : step_on_device(sft_batches, trained_tokens);
  // A replay ran AdamW's update without its host code, which counts the steps taken.
  if (graph_step_ && graph_step_->replayed_only()) optimizer().count_replayed_step();

  // The one wait for the device in a step.
  const torch::Tensor host = torch::stack(on_device).to(torch::kCPU);
  const auto* v = host.data_ptr<float>();
  const bool skipped = v[2] != 0;
  if (skipped) optimizer().forget_skipped_step();
  if (scaler_) scaler_->update(/*overflow=*/skipped);  // the same on every rank
  const double trained = p_.sft ? trained_tokens.item<double>() : tokens_per_step();
  return {v[0], v[1], lr, skipped, v[3] > 0, loss_scale, trained};
}

std::vector<torch::Tensor> Trainer::step_on_device(const std::vector<Batch>& sft_batches,
                                                   const torch::Tensor& trained_tokens) {
  // The gradients are views into the synchronizer's buckets, allocated once before the first step: each
  // step's first gradient of a parameter is copied into its slot as backward makes it, and later
  // micro-steps add into the slot (distributed/gradient_sync.h).
  fully_sharded_ ? fully_sharded_->zero_grad() : grad_sync_->zero_grad();

  // Gradient accumulation: the step's loss is the mean over every target it trains on, of all A
  // micro-batches of all ranks, and backward of each micro-batch's share sums to that mean's gradient.
  // Plain training trains every target, and every micro-batch holds as many: each micro-batch's mean
  // loss, divided by A. SFT trains the assistant's tokens only, and micro-batches (and ranks) hold
  // different numbers of them: each micro-batch's SUM of losses, divided by the count over the global
  // batch, counted before the first forward. (A mean of per-micro-batch means would weigh a token of a
  // short reply more than one of a long reply, and N ranks x A would differ from 1 rank x N*A.)
  // fp16 multiplies the loss by the loss scale as well, so that small gradients are not flushed to zero
  // in fp16; they are divided by it again below.
  // Gradient sync averages the ranks' gradients: each rank's SFT share of the global mean is taken W
  // times, so that their average is their sum.
  const torch::Tensor sft_share = p_.sft ? trained_tokens.reciprocal() * comm_.world_size() : torch::Tensor();
  const LossReduction reduction = p_.sft ? LossReduction::sum : LossReduction::mean;
  const auto on_device = torch::TensorOptions().dtype(torch::kFloat).device(p_.device);
  auto loss_sum = torch::zeros({}, on_device);
  for (int64_t micro = 0; micro < options_.grad_accum; ++micro) {
    const Batch& batch = p_.sft                                         ? sft_batches[static_cast<size_t>(micro)]
                         : graph_step_ ? inputs_[static_cast<size_t>(micro)]  // copied before the replay
                                       : next_train_batch(micro);
    if (fully_sharded_) {  // the units' gathers and reduce-scatters run inside forward and backward
      fully_sharded_->begin_micro_step();
    } else {
      grad_sync_->begin_micro_step(/*last_micro_step=*/micro == options_.grad_accum - 1);
    }
    torch::Tensor loss;
    {
      AutocastScope autocast(p_.device, precision());
      loss = p_.model->loss(batch.x, batch.y, reduction);
      loss = p_.sft ? loss * sft_share : loss / static_cast<double>(options_.grad_accum);
    }
    loss_sum += loss.detach();
    // On the last micro-step, gradient buckets start their all-reduce from inside backward.
    (scaler_ ? loss * loss_scale_ : loss).backward();
  }
  // Average gradients across ranks; from here on every rank holds the same gradient.
  fully_sharded_ ? fully_sharded_->finish() : grad_sync_->finish();
  // One small all-reduce carries the mean loss and whether any rank was asked to stop: ranks may see a
  // signal at different steps, and must stop at the same one.
  auto shared = torch::stack({loss_sum, stop_flag_});
  comm_.all_reduce(shared, ReduceOp::Average);
  const torch::Tensor mean_loss = shared[0], stop = shared[1];

  // Clip by the global norm, on the device: one norm kernel per gradient bucket, the same sum whatever
  // the bucket sizes and with --zero 1 or 2 (each rank holding its shard only; the squares all-reduced).
  std::vector<torch::Tensor> gradients;
  if (zero_) {
    gradients = zero_->shard_gradients();
  } else {
    for (const auto& p : p_.model->parameters()) gradients.push_back(p.grad());
  }
  // Exact when the scale is a power of two; an overflow stays inf/NaN and shows in the norm.
  if (scaler_) torch::_foreach_mul_(gradients, inverse_loss_scale_);
  const torch::Tensor grad_norm = fully_sharded_ ? fully_sharded_->gradient_norm() : grad_norm_->compute();
  if (options_.grad_clip > 0) {
    torch::_foreach_mul_(gradients, torch::clamp_max(options_.grad_clip / (grad_norm + 1e-6), 1.0));
  }
  // A step whose loss or gradient norm is not finite changes nothing. Both are the same on every rank
  // by now, so every rank skips alike, and the fused optimizer decides on the device.
  const torch::Tensor found_inf =
      torch::logical_not(torch::isfinite(grad_norm) & torch::isfinite(mean_loss)).to(torch::kFloat);
  optimizer().step(found_inf);
  if (p_.muon) p_.muon->step(found_inf);
  if (zero_) zero_->gather_parameters();  // every rank's updated shard to every rank
  return {mean_loss, grad_norm, found_inf, stop};
}

std::vector<torch::Tensor> Trainer::whole_parameters() {
  std::vector<torch::Tensor> out;
  if (!fully_sharded_) {
    for (const auto& p : p_.model->parameters()) out.push_back(p.detach().clone());
    return out;
  }
  std::map<std::string, torch::Tensor> by_name;
  fully_sharded_->for_each_whole_parameter(
      [&](const std::string& name, const torch::Tensor& whole) { by_name[name] = whole.detach().clone(); });
  for (const auto& item : p_.model->named_parameters()) out.push_back(by_name.at(item.key()));
  return out;
}

std::vector<Batch> Trainer::read_sft_micro_batches() {
  std::vector<Batch> batches;
  for (int64_t micro = 0; micro < options_.grad_accum; ++micro) batches.push_back(p_.train_loader->next(p_.device));
  return batches;
}

torch::Tensor Trainer::global_trained_tokens(const std::vector<Batch>& micro_batches) {
  // Counted in fp32 on the device (exact below 2^24 tokens a step), so no step waits for the host here.
  auto count = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(p_.device));
  for (const Batch& batch : micro_batches) count += batch.y.ge(0).sum().to(torch::kFloat);
  comm_.all_reduce(count, ReduceOp::Sum);
  // Every conversation trains at least one token (dataloader/chat_data.h), so the count is never 0.
  return count;
}

double Trainer::tokens_per_step() const {
  return static_cast<double>(options_.batch_size * options_.seq_len * options_.grad_accum * comm_.world_size());
}

double Trainer::flops_per_token() const {
  return training_flops_per_token(p_.model->config(), options_.seq_len);
}

void Trainer::stop_after_bad_steps(int64_t bad_in_a_row, int64_t steps_done, const StepResult& last) {
  const std::string what = std::to_string(bad_in_a_row) +
                           " steps in a row had a non-finite loss or gradient norm (lower --lr?); stopped";
  // The skipped steps changed no weights, so the bad steps were computed on these. They are good weights
  // only when finite and giving a finite loss (the gradient alone overflowed): an update that blew them up
  // (to 1e30, say) leaves finite weights whose loss is not, and no one could sample from them. The same
  // on every rank (the loss is all-reduced, the weights are one copy), so all take one branch.
  bool weights_finite = std::isfinite(last.loss);
  if (fully_sharded_) {
    weights_finite = fully_sharded_->parameters_finite() && weights_finite;  // a collective: called first
  } else {
    for (const auto& parameter : p_.model->parameters()) {
      weights_finite = weights_finite && torch::isfinite(parameter).all().item<bool>();
    }
  }
  if (weights_finite) {
    save_checkpoint_at(steps_done);
    throw std::runtime_error(what + " with a checkpoint of the last good weights at step " + std::to_string(steps_done));
  }
  const auto newest = output_.writes() ? latest_checkpoint(output_.out_dir()) : std::nullopt;
  throw std::runtime_error(what + "; the weights themselves give a non-finite loss, so they were not saved (" +
                           (newest ? "the newest checkpoint is " + newest->string() : std::string("no checkpoint")) +
                           ")");
}

namespace {

// Hours, minutes and seconds; an ETA beyond a year (a --steps of 2^63) as years, not an int overflowed.
std::string eta_text(double seconds) {
  constexpr double kYear = 365.25 * 86400;
  if (!(seconds < kYear)) return seconds >= kYear ? strprintf("%.3g years", seconds / kYear) : std::string("?");
  const auto s = static_cast<int64_t>(seconds);
  return strprintf("%lldh%02lldm%02llds", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60),
                   static_cast<long long>(s % 60));
}

}  // namespace

bool Trainer::stop_requested_here() const { return p_.stop_requested && p_.stop_requested(); }

bool Trainer::budget_allows(int64_t step) {
  budget_spent_ = budget_->agreed_spent();  // rank 0's clock: every rank decides alike
  if (budget_spent_ >= budget_->budget_seconds()) return false;
  const double steps_done = options_.steps == kUnboundedSteps
                                ? 0.0
                                : static_cast<double>(step) / static_cast<double>(options_.steps);
  budget_progress_ = std::max(budget_spent_ / budget_->budget_seconds(), steps_done);
  return true;
}

bool Trainer::stop_agreed() {
  if (!p_.stop_requested) return false;  // the same on every rank: no collective then
  auto flag = torch::full({1}, stop_requested_here() ? 1.0f : 0.0f, torch::TensorOptions().device(p_.device));
  comm_.all_reduce(flag, ReduceOp::Max);
  return flag.item<float>() > 0.0f;
}

void Trainer::log_step(int64_t step, const StepResult& r, double dt, double& smoothed_dt) {
  // Trained tokens (SFT: the assistant's, not the prompts' nor the padding) for tok/sec; every position
  // computed for the MFU, which counts the work done.
  const double tok_per_sec = r.trained_tokens / dt;
  const double computed_per_sec = tokens_per_step() / dt;
  smoothed_dt = smoothed_dt <= 0 ? dt : 0.9 * smoothed_dt + 0.1 * dt;
  // MFU per device: this rank's share of the tokens against one device's peak.
  const double mfu = options_.peak_tflops > 0
                         ? flops_per_token() * computed_per_sec / comm_.world_size() / (options_.peak_tflops * 1e12)
                         : -1;
  const double memory_mib = p_.peak_memory_mib ? p_.peak_memory_mib() : -1;
  const double eta_s = budget_ ? std::max(0.0, budget_->budget_seconds() - budget_spent_)
                               : smoothed_dt * static_cast<double>(options_.steps - step - 1);
  const bool last_step = step == options_.steps - 1;
  // Best-fit packing's cropped share so far: a run that crops most of what it reads says so as it goes.
  const std::optional<double> dropped = p_.train_loader->dropped_share();
  if (step % options_.log_every == 0 || last_step) {
    output_.print(
        strprintf("step %5lld | loss: %.6f | lr %.4e | norm: %.4f | dt: %.2fms | %s: %.2f | mfu: %s | "
                  "mem: %.0f MiB | eta: %s%s",
                  static_cast<long long>(step), r.loss, r.lr, r.grad_norm, dt * 1000.0,
                  p_.sft ? "trained tok/sec" : "tok/sec", tok_per_sec,
                  mfu >= 0 ? strprintf("%.2f%%", 100 * mfu).c_str() : "n/a", memory_mib, eta_text(eta_s).c_str(),
                  dropped ? strprintf(" | cropped: %.1f%%", 100 * *dropped).c_str() : ""));
  }
  nlohmann::json record = {{"step", step},
                           {"skipped", r.skipped},
                           {"loss", r.loss},
                           {"lr", r.lr},
                           {"grad_norm", r.grad_norm},
                           {"dt_ms", dt * 1000.0},
                           {"tok_per_sec", tok_per_sec},
                           {"trained_tokens", r.trained_tokens},
                           {"peak_mem_mib", memory_mib},
                           {"sync_wait_ms", grad_sync_ ? grad_sync_->last_stats().wait_ms : 0.0},
                           {"buckets_overlapped", grad_sync_ ? grad_sync_->last_stats().buckets_launched_in_backward : 0}};
  if (mfu >= 0) record["mfu"] = mfu;
  if (dropped) record["cropped_share"] = *dropped;
  if (scaler_) record["loss_scale"] = r.loss_scale;
  if (budget_) record["budget_spent_s"] = budget_spent_;
  output_.metrics(record);
}

void Trainer::print_setup() const {
  const GptConfig& c = p_.model->config();
  output_.print(strprintf("model: %lld layers, %lld heads, %lld wide, block %lld, vocab %lld | %lld parameters",
                          static_cast<long long>(c.n_layer), static_cast<long long>(c.n_head),
                          static_cast<long long>(c.n_embd), static_cast<long long>(c.block_size),
                          static_cast<long long>(c.vocab_size), static_cast<long long>(p_.model->num_parameters())));
  if (!c.is_gpt2_architecture()) output_.print("architecture: " + c.architecture_text());
  const int world = comm_.world_size();
  output_.print(strprintf("batch: %lld x %lld tokens x %lld accumulation x %d ranks = %lld tokens per step | %s",
                          static_cast<long long>(options_.batch_size), static_cast<long long>(options_.seq_len),
                          static_cast<long long>(options_.grad_accum), world,
                          static_cast<long long>(options_.batch_size * options_.seq_len * options_.grad_accum * world),
                          precision_description(precision())));
  if (scaler_) {
    output_.print(strprintf("fp16 loss scale: %g, halving at each overflow (that step is skipped), doubling "
                            "after %lld good steps",
                            scaler_->scale(), static_cast<long long>(options_.loss_scale_growth_interval)));
  }
  if (fully_sharded_) {
    output_.print(strprintf("zero 3: parameters, gradients and AdamW state sharded over %d rank(s) (each unit "
                            "all-gathered before its forward and its backward, its gradients reduce-scattered)",
                            world));
  } else if (zero_) {
    output_.print(strprintf("zero %lld: AdamW state%s sharded over %d rank(s) (gradients reduce-scattered, "
                            "parameters all-gathered)",
                            static_cast<long long>(options_.zero),
                            options_.zero >= 2 ? " and gradients" : "", world));
  }
  // What changes the run's arithmetic or its speed says so in the log, resumed runs included.
  if (p_.muon) {
    output_.print(strprintf("optimizer: Muon for the blocks' matrices (lr %g, momentum %g, %lld Newton-Schulz steps), "
                            "AdamW for the rest (lr %g)",
                            options_.muon_lr, options_.muon_momentum, static_cast<long long>(options_.muon_ns_steps),
                            schedule_.max_lr));
  }
  if (options_.recompute != Recompute::none) {
    output_.print(std::string("recompute: ") +
                  (options_.recompute == Recompute::mlp ? "each block's MLP activations are" : "each whole block is") +
                  " recomputed in backward (--recompute " +
                  (options_.recompute == Recompute::mlp ? "mlp" : "block") + "): less memory, more compute");
  }
}

TrainSummary Trainer::run(int64_t start_step) {
  using Clock = std::chrono::steady_clock;
  TrainSummary summary;
  if (start_step >= options_.steps) {
    output_.print("nothing to train: the run is at step " + std::to_string(start_step) + " of " +
                  std::to_string(options_.steps));
    return summary;
  }
  if (budget_) {
    const Duration budget{budget_->budget_seconds()}, before{budget_->spent_before()};
    if (before.seconds >= budget.seconds) {
      output_.print("nothing to train: the run has spent its --time-budget " + duration_text(budget));
      return summary;
    }
    if (before.seconds > 0) {
      output_.print(strprintf("time budget: %.1fs of %s spent before this resume; %.1fs left", before.seconds,
                              duration_text(budget).c_str(), budget.seconds - before.seconds));
    }
    budget_->start();  // from here on every second counts: steps, evaluations, checkpoints
  }
  if (output_.writes()) {
    if (const int removed = remove_stale_checkpoint_temporaries(output_.out_dir())) {
      output_.print("removed " + std::to_string(removed) + " unfinished checkpoint file(s) of an earlier run");
    }
  }
  double smoothed_dt = 0;
  int64_t bad_in_a_row = 0;
  StepProfiler profiler(output_.writes() ? options_.profile : "", options_.profile_steps, start_step, options_.steps);
  int64_t end_step = options_.steps;  // the steps done when the loop ends: --steps, or where the budget ran out
  for (int64_t step = start_step; step < options_.steps; ++step) {
    // Before the step's evaluations, so that a run out of time goes straight to its last ones.
    if (budget_ && !budget_allows(step)) {
      output_.print(strprintf("time budget spent: %.1fs of %s, after %lld steps", budget_spent_,
                              duration_text({budget_->budget_seconds()}).c_str(), static_cast<long long>(step)));
      end_step = step;
      break;
    }
    // Evaluations at step s see the weights after s steps (the last ones come after the loop).
    if (!evaluate_at(step, /*final=*/false, summary)) {
      output_.print("stop requested: saving a checkpoint at step " + std::to_string(step));
      save_checkpoint_at(step);
      summary.stopped_early = true;
      if (const std::string line = p_.train_loader->report(); !line.empty()) output_.print(line);
      return summary;
    }

    profiler.before_step(step);
    const auto t0 = Clock::now();
    const StepResult r = train_step(step);  // ends by waiting for the device, so dt is real
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (const std::string line = profiler.after_step(step); !line.empty()) output_.print(line);
    if (summary.steps_run == 0) summary.first_loss = r.loss;
    summary.last_loss = r.loss;
    ++summary.steps_run;
    log_step(step, r, dt, smoothed_dt);
    // --check-ranks-every: the ranks still hold the same parameters (--zero 3: gathered unit by unit)
    if (fully_sharded_) {
      rank_check_.after_step(step, *p_.model, [&] { return whole_parameters(); });
    } else {
      rank_check_.after_step(step, *p_.model);
    }
    // After the first step the loss has run: if ATen refused the widening addmm, the log (and the
    // benchmark row that reads it) says which path this run measures.
    if (summary.steps_run == 1) {
      if (const std::string note = widening_sum_note(); !note.empty()) output_.print(note);
    }

    const int64_t steps_done = step + 1;
    // fp16: gradients that overflowed while the loss was finite only say that the loss scale was too
    // large, which it no longer is (it halved). That is not a bad step, unless the scale was down to 1.
    const bool overflow_only = r.skipped && scaler_ && std::isfinite(r.loss) && r.loss_scale > 1.0;
    if (r.skipped) ++summary.steps_skipped;
    if (!r.skipped) {
      bad_in_a_row = 0;
    } else if (overflow_only) {
      output_.print(strprintf("step %lld | skipped: gradients overflowed fp16 at loss scale %g; the scale is now %g",
                              static_cast<long long>(step), r.loss_scale, scaler_->scale()));
    } else {
      ++bad_in_a_row;
      output_.print(
          strprintf("step %lld | skipped: loss or gradient norm not finite (%lld in a row, --max-bad-steps %lld)",
                    static_cast<long long>(step), static_cast<long long>(bad_in_a_row),
                    static_cast<long long>(options_.max_bad_steps)));
      if (bad_in_a_row >= options_.max_bad_steps) stop_after_bad_steps(bad_in_a_row, steps_done, r);
    }
    if (step + 1 == options_.steps) break;
    if (r.stop_requested) {
      // Preemption (Slurm sends SIGTERM) or Ctrl-C: keep the work done so far and end cleanly.
      output_.print("stop requested: saving a checkpoint at step " + std::to_string(steps_done));
      save_checkpoint_at(steps_done);
      summary.stopped_early = true;
      if (const std::string line = p_.train_loader->report(); !line.empty()) output_.print(line);
      return summary;
    }
    // Not after a bad step: the weights it was computed on may be what went wrong (stop_after_bad_steps).
    const int64_t every = options_.checkpoint_every.value_or(0);
    if (every > 0 && steps_done % every == 0 && bad_in_a_row == 0) save_checkpoint_at(steps_done);
  }
  if (const std::string line = p_.train_loader->report(); !line.empty()) output_.print(line);
  if (options_.final_checkpoint) save_checkpoint_at(end_step);
  // The last evaluations run on the weights just saved.
  evaluate_at(end_step, /*final=*/true, summary);
  return summary;
}

}  // namespace mygpt
