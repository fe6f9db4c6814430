#pragma once
// Builds a training run from its options and its data: the one way, used by `train` and by the tests.
#include <torch/torch.h>

#include <functional>
#include <memory>

#include "dataloader/training_data.h"
#include "distributed/communicator.h"
#include "launcher/train_flags.h"
#include "trainer/trainer.h"

namespace mygpt {

// The model (seeded, then rank 0's weights on every rank), AdamW, the loaders, HellaSwag, samples and
// the output of rank 0, owned by the returned Trainer. comm must outlive it.
std::unique_ptr<Trainer> build_trainer(const Parsed<TrainFlags>& flags, const TrainingData& data, Communicator& comm,
                                       const torch::Device& device, std::function<bool()> stop_requested = {});

}  // namespace mygpt
