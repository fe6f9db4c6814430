#pragma once
// LayerNorm on CUDA under autocast, through our kernels (model/cuda/layer_norm_kernel.cu): the fp32
// residual stream in, the 16-bit output the next matmul takes out, and in backward all three gradients
// in one pass. Built only where CMake found nvcc beside a CUDA LibTorch; elsewhere
// layer_norm_cuda_kernel_built() is false and every LayerNorm is ATen's.
#include <torch/torch.h>

#include <utility>

namespace mygpt {

bool layer_norm_cuda_kernel_built();

// Whether layer_norm_cuda_lowp takes these: x fp32 on CUDA, weight and bias fp32 of x's last size (at
// most the kernels' widest row), out_type bf16 or fp16.
bool layer_norm_cuda_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             at::ScalarType out_type);

// torch::layer_norm(x, {width}, weight, bias, eps).to(out_type) to fp32 rounding, differentiable in x,
// weight and bias, without the fp32 output and its casts.
torch::Tensor layer_norm_cuda_lowp(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                   double eps, at::ScalarType out_type);

// x + branch (fp32, x's shape; branch: a residual branch's output in out_type) and its LayerNorm in
// out_type, as (x + branch, layer_norm(x + branch).to(out_type)) computes them, in one pass forward and
// one backward (which adds the sum's own gradient, and gives the branch its gradient in 16 bits).
std::pair<torch::Tensor, torch::Tensor> add_layer_norm_cuda_lowp(const torch::Tensor& x, const torch::Tensor& branch,
                                                                 const torch::Tensor& weight, const torch::Tensor& bias,
                                                                 double eps, at::ScalarType out_type);

}  // namespace mygpt
