#pragma once
// Everything that shapes a training run as the trainer reads it. The fields are filled by the train
// command's options table (launcher/train_flags.cpp), which holds each one's flag, default, help, check
// and GPT-2 recipe value; the few derived ones say so.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "common/duration.h"

#include "model/attention_backend.h"
#include "model/activation_recompute.h"
#include "model/mixed_precision.h"

namespace mygpt {

// adamw: AdamW for every parameter. muon: Muon for the blocks' 2-D weights, AdamW for the rest.
enum class OptimizerKind { adamw, muon };

// The steps of a run with --time-budget and no --steps: it ends when the budget is spent.
inline constexpr int64_t kUnboundedSteps = std::numeric_limits<int64_t>::max();

struct TrainOptions {
  int64_t steps{};               // optimizer steps (kUnboundedSteps: --time-budget alone ends the run)
  std::optional<Duration> time_budget;  // wall-clock budget (trainer/time_budget.h); unset: --steps ends the run
  double warmup_fraction{};      // with a time budget: the warm-up's share of it
  int64_t batch_size{};          // micro-batch rows per rank
  int64_t seq_len{};             // tokens per row (0 on the command line: the model's block size)
  int64_t grad_accum{};          // micro-batches per optimizer step and rank (derived from total_batch_tokens)
  int64_t total_batch_tokens{};  // tokens per optimizer step over all ranks; 0: grad_accum decides
  double lr{};                   // peak learning rate
  std::optional<double> min_lr;  // floor of the cosine decay; unset on the command line: lr / 10 (resolved)
  int64_t warmup_steps{};
  double weight_decay{};
  double beta1{}, beta2{}, eps{};  // AdamW
  OptimizerKind optimizer{};
  double muon_lr{};  // peak; follows the same warmup and decay as lr
  double muon_momentum{};
  bool muon_nesterov{};
  int64_t muon_ns_steps{};
  double muon_weight_decay{};
  double grad_clip{};       // 0 disables clipping (the norm is still reported)
  int64_t max_bad_steps{};  // consecutive non-finite steps (skipped) before the run stops
  bool fused_loss{};        // chunked head + cross-entropy that never holds the whole logits
  int64_t loss_chunk_rows{};  // rows per chunk of the fused loss; 0: by device
  bool cuda_loss_kernel{};    // the fused loss's CUDA kernel (model/cuda/lm_loss_kernel.cu)
  bool cuda_norm_kernel{};    // LayerNorm's CUDA kernels under 16-bit autocast (model/cuda/layer_norm_kernel.cu)
  bool cuda_graph{};          // the step's device work captured in a CUDA graph and replayed (trainer/cuda_graph_step.h)
  AttentionBackend attention{};  // preferred scaled-dot-product attention kernel
  Recompute recompute{};    // activations each block recomputes in backward
  Precision precision{};    // resolved for the device before training (never automatic there)
  double loss_scale_init{};             // fp16: the dynamic loss scale's start (trainer/loss_scaler.h)
  int64_t loss_scale_growth_interval{};  // fp16: good steps in a row before the scale doubles
  uint64_t seed{};
  int64_t eval_every{};  // 0 disables periodic validation
  int64_t eval_steps{};  // validation batches per evaluation, all ranks together
  int64_t log_every{};
  // Not given: every eval_every steps, keeping the newest 2 (resolve_train_options fills both in).
  std::optional<int64_t> checkpoint_every;  // 0: only at the end
  std::optional<int64_t> keep_checkpoints;  // 0 keeps all
  bool final_checkpoint{};  // false: none after the last step (checkpoint-every and a stop still write)
  int64_t hellaswag_every{};     // with a HellaSwag file
  int64_t hellaswag_examples{};  // per evaluation; 0 means all
  int64_t core_every{};          // with a CORE bundle
  int64_t core_max_per_task{};   // items per task per evaluation; 0 means all
  int64_t sample_every{};        // rank 0 prints a sample every N steps; 0 disables
  std::string sample_prompt;
  int64_t sample_tokens{};
  double peak_tflops{};  // the device's peak for MFU; 0 means unknown (looked up for known GPUs)
  double bucket_mb{};    // DDP gradient bucket size
  bool ddp_overlap{};    // start bucket all-reduces during backward
  int64_t zero{};        // 1: AdamW state sharded across ranks (ZeRO stage 1, trainer/sharded_adamw.h)
  int64_t check_ranks_every{};  // compare the ranks' parameters every N steps (trainer/rank_consistency.h); 0: off
  std::string out;       // output folder: checkpoints, metrics.jsonl
  std::string profile;   // a trace of profile_steps steps (trainer/step_profiler.h); empty: off
  int64_t profile_steps{};
};

}  // namespace mygpt
