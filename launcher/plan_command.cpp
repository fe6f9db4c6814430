// `mygpt-ddp plan`: a dry run of a training configuration. Builds the model (on the CPU, no data, no
// training) and prints its size, the work per step and an estimate of the memory one rank needs.
#include <iostream>

#include "common/strprintf.h"
#include "launcher/commands.h"
#include "launcher/run_start.h"
#include "launcher/train_flags.h"
#include "model/gpt.h"

namespace mygpt {
namespace {

int run_plan(const Parsed<TrainFlags>& flags, const MpiSession&) {
  // --init-from (or a checkpoint to resume) decides the shape, as it does for train.
  const GptConfig config =
      resolve_model_config(flags, flags.config.data.vocab_size.value_or(50304), open_run_start(flags));
  const torch::Device device(flags.config.runtime.device == "cuda" ? torch::kCUDA : torch::kCPU);
  const TrainOptions o = resolve_train_options(flags, config, device, /*world_size=*/1);
  const bool bf16 = o.precision == Precision::bf16;
  torch::NoGradGuard no_grad;
  Gpt model(config);
  int64_t decay = 0, no_decay = 0;
  for (const auto& p : model->decay_parameters()) decay += p.numel();
  for (const auto& p : model->no_decay_parameters()) no_decay += p.numel();
  const auto params = static_cast<double>(decay + no_decay);
  const double flops_per_token = 6.0 * (params - static_cast<double>(model->wpe->weight.numel())) +
                                 12.0 * static_cast<double>(config.n_layer * config.n_embd * o.seq_len);
  const double tokens_per_step = static_cast<double>(o.batch_size * o.seq_len * o.grad_accum);
  // Activations kept for backward, per layer and micro-batch: about 34 bytes x B x T x C in 16-bit
  // with a fused attention kernel (Korthikanti et al. 2022), twice that in fp32; plus the logits.
  const double act_bytes_per_value = bf16 ? 1.0 : 2.0;
  const double btc = static_cast<double>(o.batch_size * o.seq_len * config.n_embd);
  const double activations = 34.0 * btc * act_bytes_per_value * static_cast<double>(config.n_layer) +
                             10.0 * static_cast<double>(o.batch_size * o.seq_len * config.vocab_size);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::cout
      << strprintf("model: %lld layers, %lld heads, %lld wide, block %lld, vocab %lld\n",
                   static_cast<long long>(config.n_layer), static_cast<long long>(config.n_head),
                   static_cast<long long>(config.n_embd), static_cast<long long>(config.block_size),
                   static_cast<long long>(config.vocab_size))
      << strprintf("parameters: %lld (%lld decayed in %zu tensors, %lld not decayed in %zu tensors)\n",
                   static_cast<long long>(decay + no_decay), static_cast<long long>(decay),
                   model->decay_parameters().size(), static_cast<long long>(no_decay),
                   model->no_decay_parameters().size())
      << strprintf(
             "per step and rank: %lld x %lld tokens x %lld accumulation = %.0f tokens, %.3g FLOPs (%.3g per token)\n",
             static_cast<long long>(o.batch_size), static_cast<long long>(o.seq_len),
             static_cast<long long>(o.grad_accum), tokens_per_step, flops_per_token * tokens_per_step, flops_per_token)
      << strprintf("schedule: %lld steps, lr %.3g -> %.3g, warmup %lld | precision %s\n",
                   static_cast<long long>(o.steps), o.lr, o.min_lr, static_cast<long long>(o.warmup_steps),
                   bf16 ? "bf16 autocast" : "fp32")
      << strprintf(
             "memory per rank (estimate): weights %.2f GiB + gradients %.2f GiB + AdamW %.2f GiB + "
             "DDP buckets %.2f GiB + activations %.2f GiB = %.2f GiB\n",
             4 * params / gib, 4 * params / gib, 8 * params / gib, 4 * params / gib, activations / gib,
             (20 * params + activations) / gib);
  return 0;
}

}  // namespace

Command plan_command() {
  return make_command<TrainFlags>("plan", "plan [DATA] [train options]",
                                  "dry run: parameters, FLOPs and memory of a configuration", /*multi_rank=*/false,
                                  &train_flag_table, &run_plan);
}

}  // namespace mygpt
