#pragma once
// Builds a training run from its plan (launcher/run_plan.h) and its data: the one way, used by `train` and
// by the tests. It constructs: every derivation is the plan's, and every refusal but three (HellaSwag, CORE
// and samples without the tokenizer they need, refused where the log's notes on the data precede them).
#include <torch/torch.h>

#include <functional>
#include <memory>

#include "dataloader/training_data.h"
#include "distributed/communicator.h"
#include "launcher/run_plan.h"
#include "launcher/run_start.h"
#include "trainer/trainer.h"

namespace mygpt {

// The model (seeded, or the weights of --init-from on rank 0; then rank 0's weights on every rank), the
// optimizer (AdamW, with --zero 1 sharded over the gradient buckets, Muon beside it), the schedule, the
// loaders, HellaSwag, CORE, samples and the output of rank 0, owned by the returned Trainer. comm must
// outlive it; data is the data the plan was resolved with, start how the run starts. A resumed run takes
// its shape from start's checkpoint; the caller restores it (Trainer::restore).
std::unique_ptr<Trainer> build_trainer(const RunPlan& plan, const TrainingData& data, Communicator& comm,
                                       const torch::Device& device, std::function<bool()> stop_requested,
                                       const RunStart& start);

}  // namespace mygpt
