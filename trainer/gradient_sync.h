#pragma once
// DDP gradient synchronization: after the last micro-step of an optimizer step, every rank holds the
// average of all ranks' gradients. Earlier micro-steps only accumulate locally (no communication).
#include <torch/torch.h>

#include <vector>

#include "trainer/communicator.h"

namespace mygpt {

class GradientSynchronizer {
 public:
  GradientSynchronizer(std::vector<torch::Tensor> params, Communicator& comm);

  // Call before each micro-step's backward; communication is only wanted on the last one.
  void begin_micro_step(bool last_micro_step) { last_micro_step_ = last_micro_step; }
  // Call after the last backward of a step: returns once every gradient holds the cross-rank average.
  void finish();

 private:
  std::vector<torch::Tensor> params_;
  Communicator& comm_;
  bool last_micro_step_ = true;
};

}  // namespace mygpt
