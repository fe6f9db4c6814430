#pragma once
// Activation checkpointing (--recompute), which LibTorch lacks: a function's forward runs without
// keeping its intermediate activations, and backward runs it again, from its saved input, to get them.
// The rerun starts from the random generators' state and the autocast setting of the first run, so
// dropout draws the same masks and the recomputed activations are the first ones bit for bit; the
// generators are then put back where they were, so nothing after it sees a difference either.
#include <torch/torch.h>

#include <functional>

namespace mygpt {

// What a transformer block recomputes in backward: nothing, its MLP (the 4x-wide GELU input and output,
// the largest activations), or all of it (only the block's input is kept).
enum class Recompute { none, mlp, block };

// fn(x), its activations recomputed in backward. Plain fn(x) where no gradient is being recorded.
// The parameters fn uses get their gradients accumulated during that backward, as usual.
torch::Tensor recompute_in_backward(std::function<torch::Tensor(const torch::Tensor&)> fn, const torch::Tensor& x);

}  // namespace mygpt
