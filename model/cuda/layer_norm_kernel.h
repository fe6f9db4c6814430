#pragma once
// LayerNorm kernels for the mixed-precision training step (model/layer_norm_cuda.h), declared without CUDA
// or LibTorch types so that plain C++ can call them and nvcc never compiles torch headers.
//
// Under autocast ATen runs a LayerNorm in fp32 and the 16-bit matmul after it casts the fp32 output (one
// more pass); backward casts the 16-bit gradient back to fp32 (another) and then runs two kernels, the
// input gradient's and the weight and bias gradients'. Here the forward writes the 16-bit output
// directly and the backward reads the 16-bit gradient and produces all three gradients in one pass.
#include <cstdint>

namespace mygpt::cuda_kernels {

enum class LowpType { bfloat16, float16 };

// The widest row the kernels take: the backward keeps a warp's weight and bias gradient partials (2 x
// width fp32) in shared memory, at most 48 KiB per block without opting in to more.
constexpr int64_t kLayerNormMaxWidth = 6144;

// x (rows, width) fp32 on the device; weight, bias (width) fp32. Writes y (rows, width) in `type`:
//   y = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + eps)   (biased var, fp32 arithmetic)
// and mean, rstd (rows) fp32 for the backward. With `branch` (rows, width) in `type` (a residual branch's
// output), x + branch is normalized instead and written to x_sum (fp32): the residual add fused in.
// Returns the launch's cudaError_t (0: success).
int launch_layer_norm_forward(const float* x, const void* branch, float* x_sum, const float* weight,
                              const float* bias, void* y, LowpType type, float* mean, float* rstd, int64_t rows,
                              int64_t width, float eps, void* stream);

// How many rows of partial weight and bias gradients the backward writes for `rows` rows of `width` (each
// row of partials is 2 x width fp32: the weight's, then the bias's); their column sums are the gradients.
int64_t layer_norm_backward_partial_rows(int64_t rows, int64_t width);

// dy (rows, width) in `type`; x (the normalized input: x_sum when the add was fused), mean, rstd, weight
// as in the forward. Writes dx (rows, width) fp32 and partials (layer_norm_backward_partial_rows(rows, width), 2,
// width) fp32. With dresidual (rows, width) fp32, the gradient x receives from its other uses, dx is the
// sum of both; with dbranch, dx is also written there in `type` (the residual branch's gradient).
int launch_layer_norm_backward(const void* dy, LowpType type, const float* x, const float* weight, const float* mean,
                               const float* rstd, const float* dresidual, float* dx, void* dbranch, float* partials,
                               int64_t rows, int64_t width, void* stream);

}  // namespace mygpt::cuda_kernels
