#include "eval/validation_loss.h"

#include <algorithm>

namespace mygpt {

ValidationLoss validation_loss(Gpt& model, BatchLoader& loader, const ValidationPass& pass, Communicator& comm,
                               const torch::Device& device, Precision precision) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  if (pass.bpb) pass.bpb->reset();
  // Summed loss and trained targets, on the device (no wait per batch).
  const auto sum_type = device.is_mps() ? torch::kFloat : torch::kDouble;
  auto sums = torch::zeros({2}, torch::TensorOptions().dtype(sum_type).device(device));
  ValidationLoss result;
  const int64_t ranks = comm.world_size();
  for (int64_t round = 0; round < pass.batches; round += ranks) {
    if (round + comm.rank() < pass.batches) {
      const Batch batch = loader.next(device);
      AutocastScope autocast(device, precision);
      if (pass.masked_targets) {
        sums[0] += model->loss(batch.x, batch.y, LossReduction::sum, pass.vocab_limit).to(sum_type);
        sums[1] += batch.y.ge(0).sum().to(sum_type);
      } else {
        // One pass gives both numbers: the positions' losses and, from them, the sums for bits per byte.
        const torch::Tensor losses = model->loss(batch.x, batch.y, LossReduction::none, pass.vocab_limit);
        sums[0] += losses.to(sum_type).sum();
        sums[1] += static_cast<double>(losses.numel());
        if (pass.bpb) pass.bpb->add(losses, batch.y);
      }
    } else if (pass.sit_out) {
      pass.sit_out();
    }
    if (pass.progress) {
      const torch::Tensor local = sums.to(torch::kCPU);
      pass.progress(std::min(round + ranks, pass.batches),
                    local[0].item<double>() / std::max(local[1].item<double>(), 1.0));
    }
    if (round + ranks < pass.batches && pass.stop && pass.stop()) {
      result.stopped = true;
      break;
    }
  }
  comm.all_reduce(sums, ReduceOp::Sum);  // ranks may hold one batch more than others: sum, then divide
  const torch::Tensor total = sums.to(torch::kCPU, torch::kDouble);
  result.targets = total[1].item<double>();
  result.loss = total[0].item<double>() / result.targets;
  if (pass.bpb) result.bits_per_byte = pass.bpb->combine(comm);
  if (was_training) model->train();
  return result;
}

}  // namespace mygpt
