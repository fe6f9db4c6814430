#include "trainer/gradient_sync.h"

namespace mygpt {

GradientSynchronizer::GradientSynchronizer(std::vector<torch::Tensor> params, Communicator& comm)
    : params_(std::move(params)), comm_(comm) {}

void GradientSynchronizer::finish() {
  if (comm_.world_size() == 1) return;
  std::vector<torch::Tensor> grads;
  for (auto& p : params_) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);  // keep every rank's list aligned
    grads.push_back(p.grad());
  }
  comm_.all_reduce(grads, ReduceOp::Average);
}

}  // namespace mygpt
