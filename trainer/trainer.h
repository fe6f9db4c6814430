#pragma once
// The training loop. One optimizer step (Trainer::train_step in trainer.cpp) reads top to bottom:
// micro-batches with gradient accumulation, gradient sync across ranks, clipping, LR schedule, AdamW.
#include <torch/torch.h>

#include "dataloader/batch_loader.h"
#include "model/gpt.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint.h"
#include "trainer/communicator.h"
#include "trainer/gradient_sync.h"
#include "trainer/lr_schedule.h"
#include "trainer/run_output.h"
#include "trainer/train_options.h"

namespace mygpt {

struct StepResult {
  double loss;       // mean over all micro-batches of all ranks
  double grad_norm;  // global norm after synchronization, before clipping
  double lr;
};

struct TrainSummary {
  double first_loss = 0, last_loss = 0;
  double last_val_loss = -1;  // -1 when no validation ran
  int64_t steps_run = 0;
};

class Trainer {
 public:
  Trainer(Gpt model, AdamW& optimizer, BatchLoader& train_loader, ShardedBatchLoader* val_loader,
          Communicator& comm, RunOutput& output, const TrainOptions& options, torch::Device device,
          CheckpointMeta checkpoint_meta);

  // Trains from start_step (0, or the step a checkpoint was saved at) to options.steps.
  TrainSummary run(int64_t start_step);
  StepResult train_step(int64_t step);
  // Mean validation loss over eval_steps batches per rank, averaged over ranks.
  double evaluate();
  void save_checkpoint_at(int64_t steps_done);

 private:
  Gpt model_;
  AdamW& optimizer_;
  BatchLoader& train_loader_;
  ShardedBatchLoader* val_loader_;
  Communicator& comm_;
  RunOutput& output_;
  TrainOptions options_;
  torch::Device device_;
  CheckpointMeta checkpoint_meta_;
  LrSchedule schedule_;
  GradientSynchronizer grad_sync_;
};

}  // namespace mygpt
