#include "distributed/communicator.h"

#include <stdexcept>

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

torch::Tensor Communicator::gather_to_root(const torch::Tensor& mine, int root) {
  torch::NoGradGuard no_grad;
  torch::Tensor flat = mine.reshape({-1}).contiguous();
  if (!communicates()) return flat;  // one rank: it is the root
  auto lengths = torch::zeros({world_size()}, torch::TensorOptions().dtype(torch::kLong).device(flat.device()));
  lengths[rank()].fill_(flat.numel());
  all_reduce(lengths, ReduceOp::Sum);
  const torch::Tensor counts = lengths.to(torch::kCPU);
  const auto* count = counts.data_ptr<int64_t>();
  torch::Tensor gathered;
  if (rank() == root) gathered = torch::empty({counts.sum().item<int64_t>()}, flat.options());
  int64_t offset = 0;
  for (int r = 0; r < world_size(); ++r) {
    if (count[r] == 0) continue;  // every rank knows: no broadcast
    // The root receives straight into its place; another rank sends its own piece, or receives one to drop.
    torch::Tensor piece = rank() == root ? gathered.slice(0, offset, offset + count[r])
                                         : (r == rank() ? flat : torch::empty({count[r]}, flat.options()));
    if (rank() == root && r == rank()) piece.copy_(flat);
    broadcast(piece, r);
    offset += count[r];
  }
  return gathered;
}

torch::Tensor Communicator::chunk_of(const torch::Tensor& full) const {
  if (full.dim() != 1 || full.numel() % world_size() != 0) {
    throw std::logic_error("a sharded collective needs a flat tensor of world_size() equal chunks");
  }
  const int64_t chunk = full.numel() / world_size();
  return full.slice(0, rank() * chunk, (rank() + 1) * chunk);
}

std::unique_ptr<PendingCollective> LocalCommunicator::all_reduce_async(torch::Tensor, ReduceOp) {
  return std::make_unique<CompletedCollective>();
}

std::unique_ptr<PendingCollective> Communicator::reduce_scatter_async(torch::Tensor full, ReduceOp op) {
  chunk_of(full);  // checks the shape
  return all_reduce_async(full, op);
}

std::unique_ptr<PendingCollective> Communicator::all_gather_async(torch::Tensor full) {
  // Every chunk but this rank's is zeroed, so the sum is exact in any dtype (as in gather_rows).
  const torch::Tensor mine = chunk_of(full).clone();
  full.zero_();
  chunk_of(full).copy_(mine);
  return all_reduce_async(full, ReduceOp::Sum);
}

}  // namespace mygpt
