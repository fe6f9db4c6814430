#include "trainer/sharded_gather.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

namespace mygpt {

torch::Tensor gather_sharded_tensor(Communicator& comm, const ShardedTensor& sharded, int root) {
  torch::NoGradGuard no_grad;
  const torch::Tensor piece = sharded.piece.reshape({-1});
  if (piece.scalar_type() != sharded.dtype) {
    throw std::logic_error("sharded state '" + sharded.name + "': a piece of another type than the tensor's");
  }
  // Where each rank's piece lies (two integers a rank), then the pieces themselves, in rank order.
  const torch::Tensor place =
      torch::tensor({sharded.offset, piece.numel()}, torch::TensorOptions().dtype(torch::kLong)).to(piece.device());
  const torch::Tensor places = comm.gather_to_root(place, root);
  torch::Tensor pieces = comm.gather_to_root(piece, root);
  if (comm.rank() != root) return {};
  const int64_t numel = std::accumulate(sharded.shape.begin(), sharded.shape.end(), int64_t{1}, std::multiplies<>());
  const torch::Tensor where = places.to(torch::kCPU).view({comm.world_size(), 2});
  // Each piece in its place; the ranks' pieces must tile the tensor, in any order.
  std::vector<std::pair<int64_t, int64_t>> spans;  // (offset, length) per non-empty piece, in rank order
  for (int r = 0; r < comm.world_size(); ++r) {
    const int64_t length = where[r][1].item<int64_t>();
    if (length > 0) spans.emplace_back(where[r][0].item<int64_t>(), length);
  }
  std::vector<std::pair<int64_t, int64_t>> sorted = spans;
  std::sort(sorted.begin(), sorted.end());
  int64_t covered = 0;
  for (const auto& [offset, length] : sorted) {
    if (offset != covered) break;
    covered += length;
  }
  if (covered != numel || pieces.numel() != numel) {
    throw std::logic_error("sharded state '" + sharded.name + "': the ranks' pieces do not cover it exactly once");
  }
  // The usual case (ZeRO's shards follow the ranks): the pieces in rank order are the tensor already.
  if (sorted == spans) return pieces.view(sharded.shape);
  torch::Tensor whole = torch::empty({numel}, pieces.options());
  int64_t read = 0;
  for (const auto& [offset, length] : spans) {
    whole.slice(0, offset, offset + length).copy_(pieces.slice(0, read, read + length));
    read += length;
  }
  return whole.view(sharded.shape);
}

}  // namespace mygpt
