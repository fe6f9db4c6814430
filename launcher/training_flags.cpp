// The Training group of train's options: the step, the optimizer and its schedule, precision.
#include "launcher/train_flag_groups.h"

#include "common/duration.h"
#include "launcher/shared_flags.h"

namespace mygpt {

void add_training_flags(OptionTable<TrainFlags>& t) {
  using F = TrainFlags;
  using T = TrainOptions;
  const auto muon = [](const Parsed<TrainFlags>& run) { return run.config.train.optimizer == OptimizerKind::muon; };
  // Judged on the precision the device resolves (run_plan), as auto becomes fp16 on some GPUs.
  const auto not_fp16 = [](const Parsed<TrainFlags>& run) { return run.config.train.precision != Precision::fp16; };
  const auto not_fp16_why = [](const Parsed<TrainFlags>& run) {
    return std::string("with ") + precision_description(run.config.train.precision) + " (loss scaling is fp16's)";
  };
  const auto budget = [](const Parsed<TrainFlags>& run) { return run.config.train.time_budget.has_value(); };
  t.group("Training (the recipe values of presets in brackets)");
  t.add("steps", &F::train, &T::steps,
        "optimizer steps; a run with --time-budget and without --steps ends when its budget is spent")
      .init(2000)
      .check(positive)
      .read_by(kPlanCommand);
  t.add("time-budget", &F::train, &T::time_budget,
        "train for this wall-clock time (300, 300s, 5m, 1h30m) from the first step, evaluations and checkpoints "
        "included: the warm-up and the decay run by the share of it spent, the ranks stop together at the first "
        "step after it, and one last validation ends with the line `val_bpb: X`. With --steps as well, whichever "
        "comes first ends the run. Kept in checkpoints: a resumed run has what is left")
      .text_form(parse_duration, duration_text)
      .read_by(kPlanCommand);
  t.add("warmup-fraction", &F::train, &T::warmup_fraction, "with --time-budget: the linear warm-up's share of it")
      .init(0.05)
      .check(in_range(0, 1, false))
      .only_with("time-budget", budget, "without --time-budget (--warmup-steps warms up a run of --steps)")
      .read_by(kPlanCommand);
  t.add("batch-size", &F::train, &T::batch_size, "micro-batch rows per rank")
      .init(16)
      .check(positive)
      .read_by(kPlanCommand);
  t.add("seq-len", &F::train, &T::seq_len, "tokens per row; 0 means the model's block size")
      .init(0)
      .check(non_negative)
      .read_by(kPlanCommand);
  t.add("grad-accum", &F::train, &T::grad_accum, "micro-batches accumulated per optimizer step and rank")
      .init(1)
      .check(positive)
      .read_by(kPlanCommand);
  t.add("total-batch-tokens", &F::train, &T::total_batch_tokens,
        "tokens per optimizer step over all ranks; sets --grad-accum (must divide evenly); 0: off")
      .init(0)
      .check(non_negative)
      .read_by(kPlanCommand);
  t.add("lr", &F::train, &T::lr, "peak learning rate")
      .init(1e-3)
      .check(positive)
      .read_by(kPlanCommand);
  t.add("min-lr", &F::train, &T::min_lr,
        "learning rate at the end of the cosine decay; not given: a tenth of --lr (as build-nanogpt and nanoGPT)")
      .check(non_negative)
      .read_by(kPlanCommand);
  t.add("warmup-steps", &F::train, &T::warmup_steps, "linear warmup steps; a run shorter than the default (not given) warms up for a tenth of its --steps, and a value given must not exceed --steps")
      .init(100)
      .check(non_negative)
      .refused_with({"time-budget"}, budget, "with --time-budget (its warm-up is --warmup-fraction of the budget)")
      .read_by(kPlanCommand);
  t.add("weight-decay", &F::train, &T::weight_decay, "AdamW weight decay on 2-D weights").init(0.1).check(non_negative);
  t.add("beta1", &F::train, &T::beta1, "AdamW's first-moment decay").init(0.9).check(in_range(0, 1, false));
  t.add("beta2", &F::train, &T::beta2, "AdamW's second-moment decay")
      .init(0.95)
      .check(in_range(0, 1, false));
  t.add("eps", &F::train, &T::eps, "AdamW's denominator epsilon").init(1e-8).check(positive);
  t.add("optimizer", &F::train, &T::optimizer,
        "adamw: AdamW for every parameter; muon: Muon (momentum orthogonalized by Newton-Schulz) for the 2-D "
        "weights inside the blocks, AdamW (--lr, --weight-decay, --beta1/2) for embeddings, head, biases, gains")
      .names({{"adamw", OptimizerKind::adamw}, {"muon", OptimizerKind::muon}})
      .init(OptimizerKind::adamw);
  t.add("muon-lr", &F::train, &T::muon_lr, "Muon's peak learning rate (same warmup and decay as --lr)")
      .init(0.02)
      .check(positive)
      .only_with("optimizer", muon, "without --optimizer muon");
  t.add("muon-momentum", &F::train, &T::muon_momentum, "Muon's momentum").init(0.95).check(in_range(0, 1, false))
      .only_with("optimizer", muon, "without --optimizer muon");
  t.add("muon-nesterov", &F::train, &T::muon_nesterov, "Nesterov momentum in Muon").init(true)
      .only_with("optimizer", muon, "without --optimizer muon");
  t.add("muon-ns-steps", &F::train, &T::muon_ns_steps, "Newton-Schulz iterations per Muon update")
      .init(5)
      .check(positive)
      .only_with("optimizer", muon, "without --optimizer muon");
  t.add("muon-weight-decay", &F::train, &T::muon_weight_decay, "Muon's decoupled weight decay")
      .init(0.0)
      .check(non_negative)
      .only_with("optimizer", muon, "without --optimizer muon");
  t.add("grad-clip", &F::train, &T::grad_clip, "clip the global gradient norm; 0 disables")
      .init(1.0)
      .check(non_negative);
  t.add("max-bad-steps", &F::train, &T::max_bad_steps,
        "a step whose loss or gradient norm is not finite is skipped; this many in a row stop the run with a "
        "checkpoint of the last good weights (exit 1)")
      .init(10)
      .check(positive);
  t.add("check-ranks-every", &F::train, &T::check_ranks_every,
        "every N steps compare a checksum of every rank's parameters, and stop (exit 1) with one line naming the "
        "step and the ranks when they differ (a torn collective); 0: off")
      .init(0)
      .check(non_negative)
      .of_process();
  t.add("fused-loss", &F::train, &T::fused_loss,
        "compute the output head and cross-entropy in chunks of rows, never holding all logits (false: the plain "
        "loss, for comparison)")
      .init(true)
      .read_by(kPlanCommand)
      .of_process();
  t.add("loss-chunk-rows", &F::train, &T::loss_chunk_rows,
        "rows per chunk of the fused loss; 0 sizes chunks by device (about 64 MiB of fp32 logits on a CPU, 1 GiB "
        "on a GPU)")
      .init(0)
      .check(non_negative)
      .read_by(kPlanCommand)
      .of_process();
  t.add("cuda-loss-kernel", &F::train, &T::cuda_loss_kernel,
        "on CUDA, one fused kernel per chunk of the fused loss computes softmax, loss and gradient in place, and "
        "the head's fp32 weight gradient is accumulated by the 16-bit matmul itself (false: ATen ops; CPUs always "
        "use those)")
      .init(true)
      .of_process();
  t.add("cuda-norm-kernel", &F::train, &T::cuda_norm_kernel,
        "on CUDA under bf16/fp16, each LayerNorm writes its 16-bit output directly and its backward computes "
        "the input, weight and bias gradients in one pass (false: ATen's fp32 LayerNorm and the casts around "
        "it; CPUs always use ATen's)")
      .init(true)
      .of_process();
  t.add("cuda-graph", &F::train, &T::cuda_graph,
        "on CUDA, the step's device work (forward, backward, clipping, AdamW) is captured in a CUDA graph after "
        "3 warm-up steps and replayed at every step, without the host's launch gaps between kernels. One "
        "process (not a job of ranks), token data, AdamW, no --zero, --recompute or --sft; refused elsewhere")
      .init(false)
      .of_process();
  t.add("attention", &F::train, &T::attention,
        "preferred attention kernel (LibTorch's scaled_dot_product_attention); where it cannot run the next "
        "in PyTorch's order runs; math: the reference kernel only")
      .names(attention_backend_names())
      .init(AttentionBackend::automatic)
      .of_process();
  t.add("recompute", &F::train, &T::recompute,
        "activations recomputed in backward instead of kept: none, mlp (each block's MLP: its 4x-wide GELU input "
        "and output) or block (all of each block; only its input is kept). Less memory, one more forward of that "
        "part; the same losses and gradients")
      .names({{"none", Recompute::none}, {"mlp", Recompute::mlp}, {"block", Recompute::block}})
      .init(Recompute::none)
      .read_by(kPlanCommand)
      .of_process();
  precision_flag(t, &F::train, &T::precision).read_by(kPlanCommand).of_process();  // follows the device
  t.add("loss-scale-init", &F::train, &T::loss_scale_init,
        "fp16: the loss is multiplied by this before backward so small gradients survive fp16; it halves at "
        "each overflow (that step is skipped) and doubles after --loss-scale-growth-interval good steps")
      .init(65536.0)
      .check(in_range(1, 3.4e38, true))
      .refused_with({"precision"}, not_fp16, not_fp16_why);
  t.add("loss-scale-growth-interval", &F::train, &T::loss_scale_growth_interval,
        "fp16: good steps in a row before the loss scale doubles")
      .init(2000)
      .check(positive)
      .refused_with({"precision"}, not_fp16, not_fp16_why);
  seed_flag(t, &F::train, &T::seed);
}

}  // namespace mygpt
