#include "trainer/gradient_norm.h"

#include <algorithm>

namespace mygpt {

GradientNorm::GradientNorm(const GradientSynchronizer& grads, Communicator& comm, bool sharded)
    : grads_(grads), comm_(comm), sharded_(sharded) {
  const int64_t chunks = sharded ? comm.world_size() : 1;
  for (size_t b = 0; b < grads.layout().size(); ++b) {
    const BucketLayout& bucket = grads.layout()[b];
    // Rows past the last parameter are padding for equal chunks: they are not pieces of anything.
    const int64_t used_rows = (bucket.used + kShardAlignment - 1) / kShardAlignment;
    const int64_t chunk_rows = bucket.numel / chunks / kShardAlignment;
    const int64_t first = sharded ? chunk_rows * comm.rank() : 0;
    const int64_t last = std::min(used_rows, first + chunk_rows);
    if (first < last) rows_.push_back({b, first - (sharded ? chunk_rows * comm.rank() : 0), last - first, pieces_ + first});
    pieces_ += used_rows;
  }
}

torch::Tensor GradientNorm::compute() const {
  torch::NoGradGuard no_grad;
  const torch::Tensor& any = grads_.shard_gradients(0);
  // Sharded, the other ranks' rows stay zero here, so the all-reduce's sum is exact.
  auto norms = sharded_ ? torch::zeros({pieces_}, any.options()) : torch::empty({pieces_}, any.options());
  for (const Rows& r : rows_) {
    const torch::Tensor rows = grads_.shard_gradients(r.bucket)
                                   .slice(0, r.first * kShardAlignment, (r.first + r.count) * kShardAlignment)
                                   .view({r.count, kShardAlignment});
    auto out = norms.slice(0, r.position, r.position + r.count);
    torch::linalg_vector_norm_out(out, rows, 2, /*dim=*/1);
  }
  if (sharded_) comm_.all_reduce(norms, ReduceOp::Sum);
  return torch::linalg_vector_norm(norms, 2);
}

}  // namespace mygpt
