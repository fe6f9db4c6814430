#pragma once
// The training loop. One optimizer step (Trainer::train_step in trainer.cpp) reads top to bottom:
// micro-batches with gradient accumulation, gradient sync across ranks, clipping, LR schedule, AdamW.
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "dataloader/batch_loader.h"
#include "model/gpt.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint.h"
#include "distributed/communicator.h"
#include "distributed/gradient_sync.h"
#include "trainer/hellaswag_eval.h"
#include "trainer/lr_schedule.h"
#include "trainer/run_output.h"
#include "trainer/train_options.h"

namespace mygpt {

// What a Trainer works on; the launcher builds these.
struct TrainerParts {
  Gpt model{nullptr};
  AdamW* optimizer = nullptr;
  BatchLoader* train_loader = nullptr;
  ShardedBatchLoader* val_loader = nullptr;                 // null: no validation loss
  const std::vector<TokenizedHellaSwag>* hellaswag = nullptr;  // null: no HellaSwag
  Communicator* comm = nullptr;
  RunOutput* output = nullptr;
  torch::Device device = torch::kCPU;
  CheckpointMeta checkpoint_meta;
  std::function<double()> peak_memory_mib;                  // CUDA allocator peak, or peak RSS on CPU
  std::function<std::string(Gpt&)> sample;                  // a text sample from the model (rank 0 prints it)
  std::function<bool()> stop_requested;                     // SIGINT/SIGTERM seen by this process
};

struct StepResult {
  double loss;       // mean over all micro-batches of all ranks
  double grad_norm;  // global norm after synchronization, before clipping
  double lr;
};

struct TrainSummary {
  double first_loss = 0, last_loss = 0;
  double last_val_loss = -1;  // -1 when no validation ran
  int64_t steps_run = 0;
  bool stopped_early = false;  // a stop signal ended the run after a checkpoint
};

class Trainer {
 public:
  Trainer(TrainerParts parts, const TrainOptions& options);

  // Trains from start_step (0, or the step a checkpoint was saved at) to options.steps.
  TrainSummary run(int64_t start_step);
  StepResult train_step(int64_t step);
  // Mean validation loss over eval_steps batches per rank, averaged over ranks.
  double evaluate();
  void save_checkpoint_at(int64_t steps_done);
  // Restores model, optimizer, data position and RNG states; returns the step to continue from.
  // Throws std::invalid_argument when the checkpoint cannot continue this run.
  int64_t restore(LoadedCheckpoint& checkpoint);

  // Model FLOPs per trained token: 6 per weight (forward + backward) plus attention (PaLM appendix B).
  double flops_per_token() const;

 private:
  void log_step(int64_t step, const StepResult& r, double dt, double& smoothed_dt);
  std::map<std::string, torch::Tensor> rank_states();
  void prune_checkpoints();
  bool any_rank_wants_to_stop();

  TrainerParts p_;
  TrainOptions options_;
  LrSchedule schedule_;
  GradientSynchronizer grad_sync_;
};

}  // namespace mygpt
