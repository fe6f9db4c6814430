// One warp per row: a row of GPT-class widths (768 to a few thousand fp32) is a few KiB, so a warp reads
// it from memory once and its later passes hit the cache; the row's sums are warp shuffles, with no
// shared memory or block barrier. The backward's weight and bias gradients are column sums over all rows:
// each warp sums its own run of rows into its own shared-memory partial (each lane owns fixed columns,
// so no two threads ever add to the same place), writes that partial out, and the caller sums the
// partials' columns, so the result is the same on every run (no atomics). The forward can take the
// residual add before the norm with it (a block's x + attention output), the backward the residual
// stream's own gradient and the branch's 16-bit one: each row's add then costs no pass of its own.
#include "model/cuda/layer_norm_kernel.h"
#include "model/cuda/device_codec.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace mygpt::cuda_kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kForwardWarpsPerBlock = 8;
// Enough warps for every SM of a large GPU to keep its memory pipes busy (132 SMs x 32 warps).
constexpr int64_t kBackwardWarpsWanted = 4096;

__device__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void layer_norm_forward_kernel(const float* __restrict__ x, const T* __restrict__ branch,
                                          float* __restrict__ x_sum, const float* __restrict__ weight,
                                          const float* __restrict__ bias, T* __restrict__ y,
                                          float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t rows,
                                          int width, float eps) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (row >= rows) return;  // the whole warp: a row belongs to one warp
  const float* xr = x + row * width;
  const T* br = branch != nullptr ? branch + row * width : nullptr;
  // The row's value at column c: x, or x + branch with the residual add fused in. Later passes recompute
  // the sum from the cached inputs rather than read back x_sum, which the read-only cache may not see.
  auto value = [xr, br](int c) { return br != nullptr ? xr[c] + DeviceCodec<T>::to_float(br[c]) : xr[c]; };
  float sum = 0.f;
  float* sr = br != nullptr ? x_sum + row * width : nullptr;
  for (int c = lane; c < width; c += kWarp) {
    const float v = value(c);
    if (sr != nullptr) sr[c] = v;
    sum += v;
  }
  const float mean = warp_sum(sum) / static_cast<float>(width);
  // The variance from the deviations (a second pass over the cached row), not E[x^2] - mean^2, which
  // cancels catastrophically when the mean is large against the spread.
  float squares = 0.f;
  for (int c = lane; c < width; c += kWarp) {
    const float d = value(c) - mean;
    squares += d * d;
  }
  const float rstd = rsqrtf(warp_sum(squares) / static_cast<float>(width) + eps);
  T* yr = y + row * width;
  for (int c = lane; c < width; c += kWarp) yr[c] = DeviceCodec<T>::from_float((value(c) - mean) * rstd * weight[c] + bias[c]);
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight, xhat = (x - mean) * rstd: the input
// gradient of y = xhat * weight + bias. Partials: sum over the warp's rows of dy * xhat (weight) and dy (bias).
template <typename T>
__global__ void layer_norm_backward_kernel(const T* __restrict__ dy, const float* __restrict__ x,
                                           const float* __restrict__ weight, const float* __restrict__ mean_in,
                                           const float* __restrict__ rstd_in, const float* __restrict__ dresidual,
                                           float* __restrict__ dx, T* __restrict__ dbranch,
                                           float* __restrict__ partials, int64_t rows, int width,
                                           int64_t rows_per_warp) {
  extern __shared__ float shared[];
  const int lane = threadIdx.x % kWarp;
  const int warp_in_block = threadIdx.x / kWarp;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + warp_in_block;
  const int64_t first = warp * rows_per_warp;
  if (first >= rows) return;
  float* dweight = shared + static_cast<int64_t>(warp_in_block) * 2 * width;
  float* dbias = dweight + width;
  for (int c = lane; c < width; c += kWarp) {
    dweight[c] = 0.f;
    dbias[c] = 0.f;
  }
  const int64_t last = first + rows_per_warp < rows ? first + rows_per_warp : rows;
  for (int64_t row = first; row < last; ++row) {
    const float mean = mean_in[row];
    const float rstd = rstd_in[row];
    const T* dyr = dy + row * width;
    const float* xr = x + row * width;
    float sum_g = 0.f, sum_g_xhat = 0.f;
    for (int c = lane; c < width; c += kWarp) {
      const float d = DeviceCodec<T>::to_float(dyr[c]);
      const float xhat = (xr[c] - mean) * rstd;
      const float g = d * weight[c];
      sum_g += g;
      sum_g_xhat += g * xhat;
      dweight[c] += d * xhat;
      dbias[c] += d;
    }
    const float mean_g = warp_sum(sum_g) / static_cast<float>(width);
    const float mean_g_xhat = warp_sum(sum_g_xhat) / static_cast<float>(width);
    float* dxr = dx + row * width;
    const float* drr = dresidual != nullptr ? dresidual + row * width : nullptr;
    T* dbr = dbranch != nullptr ? dbranch + row * width : nullptr;
    for (int c = lane; c < width; c += kWarp) {
      const float xhat = (xr[c] - mean) * rstd;
      const float g = DeviceCodec<T>::to_float(dyr[c]) * weight[c];
      float v = rstd * (g - mean_g - xhat * mean_g_xhat);
      if (drr != nullptr) v += drr[c];
      dxr[c] = v;
      if (dbr != nullptr) dbr[c] = DeviceCodec<T>::from_float(v);
    }
  }
  float* out = partials + warp * 2 * width;
  for (int c = lane; c < width; c += kWarp) {
    out[c] = dweight[c];
    out[width + c] = dbias[c];
  }
}

int64_t rows_per_warp(int64_t rows) { return std::max<int64_t>(1, (rows + kBackwardWarpsWanted - 1) / kBackwardWarpsWanted); }

int backward_warps_per_block(int64_t width) {
  const int64_t fit = (48 * 1024) / (2 * width * static_cast<int64_t>(sizeof(float)));
  return static_cast<int>(std::clamp<int64_t>(fit, 1, 4));
}

template <typename T>
cudaError_t forward_typed(const float* x, const T* branch, float* x_sum, const float* weight, const float* bias, T* y,
                          float* mean, float* rstd, int64_t rows, int64_t width, float eps, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((rows + kForwardWarpsPerBlock - 1) / kForwardWarpsPerBlock);
  layer_norm_forward_kernel<T><<<blocks, kForwardWarpsPerBlock * kWarp, 0, stream>>>(
      x, branch, x_sum, weight, bias, y, mean, rstd, rows, static_cast<int>(width), eps);
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_typed(const T* dy, const float* x, const float* weight, const float* mean, const float* rstd,
                           const float* dresidual, float* dx, T* dbranch, float* partials, int64_t rows,
                           int64_t width, cudaStream_t stream) {
  const int64_t per_warp = rows_per_warp(rows);
  const int64_t warps = (rows + per_warp - 1) / per_warp;
  const int warps_per_block = backward_warps_per_block(width);
  const auto blocks = static_cast<unsigned>((warps + warps_per_block - 1) / warps_per_block);
  const size_t shared_bytes = static_cast<size_t>(warps_per_block) * 2 * width * sizeof(float);
  layer_norm_backward_kernel<T><<<blocks, warps_per_block * kWarp, shared_bytes, stream>>>(
      dy, x, weight, mean, rstd, dresidual, dx, dbranch, partials, rows, static_cast<int>(width), per_warp);
  return cudaGetLastError();
}

}  // namespace

int64_t layer_norm_backward_partial_rows(int64_t rows) {
  const int64_t per_warp = rows_per_warp(rows);
  return (rows + per_warp - 1) / per_warp;
}

int launch_layer_norm_forward(const float* x, const void* branch, float* x_sum, const float* weight,
                              const float* bias, void* y, LowpType type, float* mean, float* rstd, int64_t rows,
                              int64_t width, float eps, void* stream) {
  if (rows == 0) return 0;
  if (width < 1 || width > kLayerNormMaxWidth) return static_cast<int>(cudaErrorInvalidValue);
  const auto s = static_cast<cudaStream_t>(stream);
  if (type == LowpType::bfloat16) {
    using T = __nv_bfloat16;
    return forward_typed(x, static_cast<const T*>(branch), x_sum, weight, bias, static_cast<T*>(y), mean, rstd, rows,
                         width, eps, s);
  }
  using T = __half;
  return forward_typed(x, static_cast<const T*>(branch), x_sum, weight, bias, static_cast<T*>(y), mean, rstd, rows,
                       width, eps, s);
}

int launch_layer_norm_backward(const void* dy, LowpType type, const float* x, const float* weight, const float* mean,
                               const float* rstd, const float* dresidual, float* dx, void* dbranch, float* partials,
                               int64_t rows, int64_t width, void* stream) {
  if (rows == 0) return 0;
  if (width < 1 || width > kLayerNormMaxWidth) return static_cast<int>(cudaErrorInvalidValue);
  const auto s = static_cast<cudaStream_t>(stream);
  if (type == LowpType::bfloat16) {
    using T = __nv_bfloat16;
    return backward_typed(static_cast<const T*>(dy), x, weight, mean, rstd, dresidual, dx, static_cast<T*>(dbranch),
                          partials, rows, width, s);
  }
  using T = __half;
  return backward_typed(static_cast<const T*>(dy), x, weight, mean, rstd, dresidual, dx, static_cast<T*>(dbranch),
                        partials, rows, width, s);
}

}  // namespace mygpt::cuda_kernels
