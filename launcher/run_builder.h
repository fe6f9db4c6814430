#pragma once
// Builds a training run from its options and its data: the one way, used by `train` and by the tests.
#include <torch/torch.h>

#include <functional>
#include <memory>

#include "dataloader/training_data.h"
#include "distributed/communicator.h"
#include "launcher/run_start.h"
#include "launcher/train_flags.h"
#include "trainer/trainer.h"

namespace mygpt {

// The model (seeded, or the weights of --init-from on rank 0; then rank 0's weights on every rank), AdamW,
// the loaders, HellaSwag, samples and the output of rank 0, owned by the returned Trainer. comm must
// outlive it. start is how the run starts (launcher/run_start.h); null opens it from the flags. A
// resumed run takes its shape from start's checkpoint; the caller restores it (Trainer::restore).
std::unique_ptr<Trainer> build_trainer(const Parsed<TrainFlags>& flags, const TrainingData& data, Communicator& comm,
                                       const torch::Device& device, std::function<bool()> stop_requested = {},
                                       const RunStart* start = nullptr);

}  // namespace mygpt
