#pragma once
// GPT-2's GELU, the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with our own
// float32 CPU kernel. ATen's CPU kernel spends most of its time in SLEEF's 1-ulp tanh (6-8% of a small
// model's CPU training step); 0.5 (1 + tanh(z)) is sigmoid(2z), which takes one exp and one division
// and is as accurate (more so in the negative tail, where 1 + tanh(z) cancels). The loops and their
// error bounds: model/gelu_tanh_cpu_kernels.{h,cpp}.
#include <torch/torch.h>

namespace mygpt {

// The MLP's activation: float32 CPU tensors through our kernel (an autograd function whose backward is
// our kernel too, and ATen's differentiable gelu_backward where a double backward is being recorded);
// other dtypes (bf16 under autocast) and other devices through ATen's gelu(x, "tanh") as before.
torch::Tensor gelu_tanh(const torch::Tensor& x);

// The kernels on float32 CPU tensors of any shape: what ATen's gelu(x, "tanh") and
// gelu_backward(grad, x, "tanh") compute. No autograd; for gelu_tanh and the tests.
torch::Tensor gelu_tanh_cpu_forward(const torch::Tensor& x);
torch::Tensor gelu_tanh_cpu_backward(const torch::Tensor& grad, const torch::Tensor& x);

}  // namespace mygpt
