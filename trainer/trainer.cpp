#include "trainer/trainer.h"

#include <chrono>
#include <filesystem>

#include "trainer/mixed_precision.h"

namespace mygpt {
namespace {

// The generator that dropout uses on this device.
at::Generator device_generator(const torch::Device& device) {
  return at::globalContext().defaultGenerator(device);
}

}  // namespace

Trainer::Trainer(TrainerParts parts, const TrainOptions& options)
    : p_(std::move(parts)),
      options_(options),
      schedule_{options.lr, options.min_lr, options.warmup_steps, options.steps},
      grad_sync_(p_.model->parameters(), *p_.comm, static_cast<size_t>(options.bucket_mb * (1 << 20)),
                 options.ddp_overlap) {}

StepResult Trainer::train_step(int64_t step) {
  p_.model->train();
  const double lr = schedule_.at(step);
  p_.optimizer->set_lr(lr);
  p_.optimizer->zero_grad();

  // Gradient accumulation: each micro-batch's loss is scaled by 1/A so the summed gradient is the
  // gradient of the mean loss over all A micro-batches.
  auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(p_.device));
  for (int64_t micro = 0; micro < options_.grad_accum; ++micro) {
    Batch batch = p_.train_loader->next(p_.device);
    grad_sync_.begin_micro_step(micro == options_.grad_accum - 1);
    torch::Tensor loss;
    {
      AutocastScope autocast(p_.device, options_.bf16);
      loss = p_.model->loss(batch.x, batch.y) / static_cast<double>(options_.grad_accum);
    }
    loss_sum += loss.detach();
    loss.backward();  // on the last micro-step, gradient buckets start their all-reduce from in here
  }
  // Average gradients across ranks; from here on every rank holds the same gradient.
  grad_sync_.finish();
  p_.comm->all_reduce(loss_sum, ReduceOp::Average);

  // Clip by the global norm (max_norm = infinity when disabled, so the norm is still measured).
  const double max_norm = options_.grad_clip > 0 ? options_.grad_clip : std::numeric_limits<double>::infinity();
  const double grad_norm = torch::nn::utils::clip_grad_norm_(p_.optimizer->parameters(), max_norm);
  p_.optimizer->step();
  return {loss_sum.item<double>(), grad_norm, lr};
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  p_.model->eval();
  p_.val_loader->reset();  // the same validation batches every time, so evaluations compare
  auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(p_.device));
  for (int64_t i = 0; i < options_.eval_steps; ++i) {
    Batch batch = p_.val_loader->next(p_.device);
    AutocastScope autocast(p_.device, options_.bf16);
    loss_sum += p_.model->loss(batch.x, batch.y).to(torch::kFloat);
  }
  auto mean = loss_sum / static_cast<double>(options_.eval_steps);
  p_.comm->all_reduce(mean, ReduceOp::Average);
  p_.model->train();
  return mean.item<double>();
}

double Trainer::flops_per_token() const {
  const GptConfig& c = p_.model->config();
  const double weights = static_cast<double>(p_.model->num_parameters() - p_.model->wpe->weight.numel());
  const double attention = 12.0 * static_cast<double>(c.n_layer * c.n_embd * options_.seq_len);
  return 6.0 * weights + attention;
}

std::map<std::string, torch::Tensor> Trainer::rank_states() {
  // Every rank's data position and RNG states, gathered so that rank 0 can store them all.
  std::map<std::string, torch::Tensor> states;
  auto gather = [&](const torch::Tensor& t) { return p_.comm->gather_rows(t.to(p_.device)).to(torch::kCPU); };
  states["loader"] = gather(p_.train_loader->state());
  states["rng_cpu"] = gather(at::detail::getDefaultCPUGenerator().get_state());
  if (!p_.device.is_cpu()) states["rng_device"] = gather(device_generator(p_.device).get_state());
  return states;
}

void Trainer::save_checkpoint_at(int64_t steps_done) {
  auto states = rank_states();  // a collective: every rank takes part, rank 0 writes
  if (!p_.output->writes()) return;
  CheckpointMeta meta = p_.checkpoint_meta;
  meta.step = steps_done;
  states["world_size"] = torch::tensor({static_cast<int64_t>(p_.comm->world_size())}, torch::kLong);
  const auto path = checkpoint_path(p_.output->out_dir(), steps_done);
  save_checkpoint(path, p_.model, p_.optimizer, meta, states);
  p_.output->print("saved checkpoint " + path.string());
  prune_checkpoints();
}

void Trainer::prune_checkpoints() {
  if (options_.keep_checkpoints <= 0) return;
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(p_.output->out_dir())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt_", 0) == 0 && entry.path().extension() == ".pt") found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());  // zero-padded step numbers sort by step
  for (size_t i = 0; i + static_cast<size_t>(options_.keep_checkpoints) < found.size(); ++i) {
    std::filesystem::remove(found[i]);
  }
}

int64_t Trainer::restore(LoadedCheckpoint& ckpt) {
  if (!(ckpt.meta.model_config == p_.model->config())) {
    throw std::invalid_argument("the checkpoint's model shape differs from this run's (check --preset and model flags)");
  }
  {
    torch::NoGradGuard no_grad;
    auto saved = ckpt.model->parameters();
    auto mine = p_.model->parameters();
    for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(saved[i]);
  }
  load_optimizer_state(ckpt, *p_.optimizer);
  const int rank = p_.comm->rank(), world = p_.comm->world_size();
  const int64_t saved_world = ckpt.extra.count("world_size") ? ckpt.extra["world_size"].item<int64_t>() : 1;
  if (!ckpt.extra.count("loader")) throw std::invalid_argument("the checkpoint holds no data-loader position");
  if (saved_world == world) {
    p_.train_loader->load_state(ckpt.extra["loader"][rank].clone());
    at::Generator(at::detail::getDefaultCPUGenerator()).set_state(ckpt.extra["rng_cpu"][rank].clone());
    if (ckpt.extra.count("rng_device") && !p_.device.is_cpu()) {
      device_generator(p_.device).set_state(ckpt.extra["rng_device"][rank].clone());
    }
  } else if (options_.data_order == "sequential") {
    // The sequential position counts chunks of all ranks together, so it carries over to any world
    // size; per-rank random streams cannot, so they are re-seeded from (seed, step, rank).
    p_.train_loader->load_state(ckpt.extra["loader"][0].clone());
    torch::manual_seed(options_.seed + static_cast<uint64_t>(ckpt.meta.step) * 1000003ULL + static_cast<uint64_t>(rank));
    p_.output->print("note: resuming " + std::to_string(saved_world) + "-rank checkpoint on " + std::to_string(world) +
                     " rank(s): data position kept, random streams re-seeded (not bit-identical)");
  } else {
    throw std::invalid_argument("the checkpoint was written by " + std::to_string(saved_world) +
                                " ranks; with --data-order random it resumes only on the same number of ranks");
  }
  return ckpt.meta.step;
}

bool Trainer::any_rank_wants_to_stop() {
  if (!p_.stop_requested) return false;
  // Ranks may see the signal at different steps; they must stop at the same one.
  auto flag = torch::tensor({p_.stop_requested() ? 1.0f : 0.0f}).to(p_.device);
  p_.comm->all_reduce(flag, ReduceOp::Max);
  return flag.item<float>() > 0;
}

void Trainer::log_step(int64_t step, const StepResult& r, double dt, double& smoothed_dt) {
  const double tokens = static_cast<double>(options_.batch_size * options_.seq_len * options_.grad_accum *
                                            p_.comm->world_size());
  const double tok_per_sec = tokens / dt;
  smoothed_dt = smoothed_dt <= 0 ? dt : 0.9 * smoothed_dt + 0.1 * dt;
  // MFU per device: this rank's share of the tokens against one device's peak.
  const double mfu = options_.peak_tflops > 0
                         ? flops_per_token() * tok_per_sec / p_.comm->world_size() / (options_.peak_tflops * 1e12)
                         : -1;
  const double memory_mib = p_.peak_memory_mib ? p_.peak_memory_mib() : -1;
  const double eta_s = smoothed_dt * static_cast<double>(options_.steps - step - 1);
  const bool last_step = step == options_.steps - 1;
  if (step % options_.log_every == 0 || last_step) {
    p_.output->print(strprintf("step %5lld | loss: %.6f | lr %.4e | norm: %.4f | dt: %.2fms | tok/sec: %.2f | mfu: %s | "
                               "mem: %.0f MiB | eta: %s",
                               static_cast<long long>(step), r.loss, r.lr, r.grad_norm, dt * 1000.0, tok_per_sec,
                               mfu >= 0 ? strprintf("%.2f%%", 100 * mfu).c_str() : "n/a", memory_mib,
                               strprintf("%dh%02dm%02ds", static_cast<int>(eta_s / 3600),
                                         static_cast<int>(eta_s / 60) % 60, static_cast<int>(eta_s) % 60).c_str()));
  }
  nlohmann::json record = {{"step", step}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
                           {"dt_ms", dt * 1000.0}, {"tok_per_sec", tok_per_sec}, {"peak_mem_mib", memory_mib},
                           {"sync_wait_ms", grad_sync_.last_stats().wait_ms},
                           {"buckets_overlapped", grad_sync_.last_stats().buckets_launched_in_backward}};
  if (mfu >= 0) record["mfu"] = mfu;
  p_.output->metrics(record);
}

TrainSummary Trainer::run(int64_t start_step) {
  using Clock = std::chrono::steady_clock;
  TrainSummary summary;
  double smoothed_dt = 0;
  for (int64_t step = start_step; step < options_.steps; ++step) {
    const bool last_step = step == options_.steps - 1;
    auto due = [&](int64_t every) { return every > 0 && (step % every == 0 || last_step); };
    if (p_.val_loader != nullptr && due(options_.eval_every)) {
      const double val_loss = evaluate();
      summary.last_val_loss = val_loss;
      p_.output->print(strprintf("step %lld | val loss: %.4f", static_cast<long long>(step), val_loss));
      p_.output->metrics({{"step", step}, {"val_loss", val_loss}});
    }
    if (p_.hellaswag != nullptr && due(options_.hellaswag_every)) {
      const HellaSwagResult h = evaluate_hellaswag(p_.model, *p_.hellaswag, options_.hellaswag_limit, *p_.comm,
                                                   p_.device, options_.bf16);
      p_.output->print(strprintf("step %lld | hellaswag: %lld/%lld = %.4f", static_cast<long long>(step),
                                 static_cast<long long>(h.correct), static_cast<long long>(h.total), h.accuracy()));
      p_.output->metrics({{"step", step}, {"hellaswag_acc", h.accuracy()}, {"hellaswag_total", h.total}});
    }

    if (p_.sample && due(options_.sample_every) && p_.output->writes()) {
      p_.output->print(strprintf("step %lld | sample: ", static_cast<long long>(step)) + p_.sample(p_.model));
    }

    const auto t0 = Clock::now();
    const StepResult r = train_step(step);  // .item() inside waits for the device, so dt is real
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (summary.steps_run == 0) summary.first_loss = r.loss;
    summary.last_loss = r.loss;
    ++summary.steps_run;
    log_step(step, r, dt, smoothed_dt);

    const int64_t steps_done = step + 1;
    if (!last_step && any_rank_wants_to_stop()) {
      // Preemption (Slurm sends SIGTERM) or Ctrl-C: keep the work done so far and end cleanly.
      p_.output->print("stop requested: saving a checkpoint at step " + std::to_string(steps_done));
      save_checkpoint_at(steps_done);
      summary.stopped_early = true;
      return summary;
    }
    if (options_.checkpoint_every > 0 && steps_done % options_.checkpoint_every == 0 && !last_step) {
      save_checkpoint_at(steps_done);
    }
  }
  save_checkpoint_at(options_.steps);
  return summary;
}

}  // namespace mygpt
