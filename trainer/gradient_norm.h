#pragma once
// The global gradient norm, computed the same way whether a rank holds the whole gradients or only its
// shard of them (--zero 1): every parameter's gradient is cut into pieces of kShardAlignment elements
// (counted from its start), each piece's norm is taken, and the norm of all piece norms, in parameter
// order, is the result. A shard boundary always falls on a piece boundary, so sharded and unsharded runs
// add the same numbers in the same order: bit-identical norms, hence bit-identical clipping.
#include <torch/torch.h>

#include <vector>

namespace mygpt {

// Pieces of a parameter of numel elements.
int64_t gradient_norm_pieces(int64_t numel);
// The norms of the pieces of a flat gradient that starts at a piece boundary (the last may be short).
torch::Tensor piece_norms(const torch::Tensor& flat);
// Of whole gradients, in the model's parameter order.
torch::Tensor global_gradient_norm(const std::vector<torch::Tensor>& gradients);

}  // namespace mygpt
