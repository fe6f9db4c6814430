#include "distributed/communicator.h"

namespace mygpt {
namespace {

class CompletedCollective final : public PendingCollective {
 public:
  void wait() override {}
};

}  // namespace

// Runs `collective` on one flat copy of the tensors and writes the result back into them.
template <typename Collective>
void on_flat_copy(std::vector<torch::Tensor>& tensors, Collective&& collective) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat_views;
  for (const auto& t : tensors) flat_views.push_back(t.reshape({-1}));
  auto flat = torch::cat(flat_views);
  collective(flat);
  int64_t offset = 0;
  for (auto& t : tensors) {
    t.copy_(flat.slice(0, offset, offset + t.numel()).view_as(t));
    offset += t.numel();
  }
}

void Communicator::all_reduce(std::vector<torch::Tensor>& tensors, ReduceOp op) {
  if (!communicates()) return;
  on_flat_copy(tensors, [&](torch::Tensor& flat) { all_reduce(flat, op); });
}

void Communicator::broadcast(std::vector<torch::Tensor>& tensors, int root) {
  if (!communicates()) return;
  on_flat_copy(tensors, [&](torch::Tensor& flat) { broadcast(flat, root); });
}

torch::Tensor Communicator::gather_rows(const torch::Tensor& mine) {
  // Every other row is zero, so the sum is exact in any dtype.
  auto rows = torch::zeros({world_size(), mine.numel()}, mine.options());
  rows[rank()].copy_(mine.reshape({-1}));
  all_reduce(rows, ReduceOp::Sum);
  return rows;
}

std::unique_ptr<PendingCollective> LocalCommunicator::all_reduce_async(torch::Tensor, ReduceOp) {
  return std::make_unique<CompletedCollective>();
}

}  // namespace mygpt
