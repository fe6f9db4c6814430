#include "trainer/trainer.h"

#include <chrono>

namespace mygpt {

Trainer::Trainer(Gpt model, AdamW& optimizer, BatchLoader& train_loader, ShardedBatchLoader* val_loader,
                 Communicator& comm, RunOutput& output, const TrainOptions& options, torch::Device device,
                 CheckpointMeta checkpoint_meta)
    : model_(std::move(model)),
      optimizer_(optimizer),
      train_loader_(train_loader),
      val_loader_(val_loader),
      comm_(comm),
      output_(output),
      options_(options),
      device_(device),
      checkpoint_meta_(std::move(checkpoint_meta)),
      schedule_{options.lr, options.min_lr, options.warmup_steps, options.steps},
      grad_sync_(model_->parameters(), comm, static_cast<size_t>(options.bucket_mb * (1 << 20)), options.ddp_overlap) {}

StepResult Trainer::train_step(int64_t step) {
  model_->train();
  const double lr = schedule_.at(step);
  optimizer_.set_lr(lr);
  optimizer_.zero_grad();

  // Gradient accumulation: each micro-batch's loss is scaled by 1/A so the summed gradient is the
  // gradient of the mean loss over all A micro-batches.
  auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device_));
  for (int64_t micro = 0; micro < options_.grad_accum; ++micro) {
    Batch batch = train_loader_.next(device_);
    grad_sync_.begin_micro_step(micro == options_.grad_accum - 1);
    auto loss = model_->loss(batch.x, batch.y) / static_cast<double>(options_.grad_accum);
    loss_sum += loss.detach();
    loss.backward();
  }
  // Average gradients across ranks; from here on every rank holds the same gradient.
  grad_sync_.finish();
  comm_.all_reduce(loss_sum, ReduceOp::Average);

  // Clip by the global norm (max_norm = infinity when disabled, so the norm is still measured).
  const double max_norm = options_.grad_clip > 0 ? options_.grad_clip : std::numeric_limits<double>::infinity();
  const double grad_norm = torch::nn::utils::clip_grad_norm_(optimizer_.parameters(), max_norm);
  optimizer_.step();
  return {loss_sum.item<double>(), grad_norm, lr};
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  val_loader_->reset();  // the same validation batches every time, so evaluations compare
  auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device_));
  for (int64_t i = 0; i < options_.eval_steps; ++i) {
    Batch batch = val_loader_->next(device_);
    loss_sum += model_->loss(batch.x, batch.y);
  }
  auto mean = loss_sum / static_cast<double>(options_.eval_steps);
  comm_.all_reduce(mean, ReduceOp::Average);
  model_->train();
  return mean.item<double>();
}

void Trainer::save_checkpoint_at(int64_t steps_done) {
  if (!output_.writes()) return;
  CheckpointMeta meta = checkpoint_meta_;
  meta.step = steps_done;
  const auto path = checkpoint_path(output_.out_dir(), steps_done);
  save_checkpoint(path, model_, &optimizer_, meta, {{"train_loader", train_loader_.state()}});
  output_.print("saved checkpoint " + path.string());
}

TrainSummary Trainer::run(int64_t start_step) {
  using Clock = std::chrono::steady_clock;
  TrainSummary summary;
  const double tokens_per_step = static_cast<double>(options_.batch_size * options_.seq_len * options_.grad_accum *
                                                     comm_.world_size());
  for (int64_t step = start_step; step < options_.steps; ++step) {
    const bool last_step = step == options_.steps - 1;
    if (val_loader_ != nullptr && options_.eval_every > 0 && (step % options_.eval_every == 0 || last_step)) {
      const double val_loss = evaluate();
      summary.last_val_loss = val_loss;
      output_.print(strprintf("step %d | val loss: %.4f", static_cast<int>(step), val_loss));
      output_.metrics({{"step", step}, {"val_loss", val_loss}});
    }

    const auto t0 = Clock::now();
    const StepResult r = train_step(step);  // .item() inside waits for the device, so dt is real
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();

    if (summary.steps_run == 0) summary.first_loss = r.loss;
    summary.last_loss = r.loss;
    ++summary.steps_run;
    const double tok_per_sec = tokens_per_step / dt;
    if (step % options_.log_every == 0 || last_step) {
      output_.print(strprintf("step %5d | loss: %.6f | lr %.4e | norm: %.4f | dt: %.2fms | tok/sec: %.2f",
                              static_cast<int>(step), r.loss, r.lr, r.grad_norm, dt * 1000.0, tok_per_sec));
    }
    output_.metrics({{"step", step}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
                     {"dt_ms", dt * 1000.0}, {"tok_per_sec", tok_per_sec},
                     {"sync_wait_ms", grad_sync_.last_stats().wait_ms},
                     {"buckets_overlapped", grad_sync_.last_stats().buckets_launched_in_backward}});
    const int64_t steps_done = step + 1;
    if (options_.checkpoint_every > 0 && steps_done % options_.checkpoint_every == 0 && !last_step) {
      save_checkpoint_at(steps_done);
    }
  }
  save_checkpoint_at(options_.steps);
  return summary;
}

}  // namespace mygpt
