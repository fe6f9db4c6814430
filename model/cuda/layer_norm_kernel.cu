// One warp per row: a row of GPT-class widths (768 to a few thousand fp32) is a few KiB, so a warp reads
// it from memory once and its later passes hit the cache; the row's sums are warp shuffles, with no
// shared memory or block barrier. The backward's weight and bias gradients are column sums over all rows:
// each warp sums its own run of rows into its own shared-memory partial (each lane owns fixed columns,
// so no two threads ever add to the same place), the block adds its warps' partials in a fixed order and
// writes them out, and the caller sums the partials' columns, so the result is the same on every run (no
// atomics). The forward can take the
// residual add before the norm with it (a block's x + attention output), the backward the residual
// stream's own gradient and the branch's 16-bit one: each row's add then costs no pass of its own.
#include "model/cuda/layer_norm_kernel.h"
#include "model/cuda/device_codec.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

// A lane reads and writes V consecutive columns at a time: V = 4 (one 16-byte fp32 access, one 8-byte
// 16-bit one) where the width is a multiple of 4 and every array is so aligned, else V = 1. Scalar loads
// left the kernels at about 2.1 TB/s of an H100's 3.35 (docs/benchmarks-log.md, 2026-11-27).
template <int V>
__device__ void load_f32(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 r = *reinterpret_cast<const float4*>(p);
    v[0] = r.x, v[1] = r.y, v[2] = r.z, v[3] = r.w;
  } else {
    v[0] = p[0];
  }
}
template <int V>
__device__ void store_f32(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    p[0] = v[0];
  }
}
template <typename T, int V>
__device__ void load_lowp(const T* p, float (&v)[V]) {
  if constexpr (V == 4) {
    static_assert(sizeof(T) == 2, "four 16-bit values are one 8-byte access");
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    T t[4];
    memcpy(t, &raw, sizeof raw);
    for (int k = 0; k < 4; ++k) v[k] = DeviceCodec<T>::to_float(t[k]);
  } else {
    v[0] = DeviceCodec<T>::to_float(p[0]);
  }
}
template <typename T, int V>
__device__ void store_lowp(T* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    T t[4];
    for (int k = 0; k < 4; ++k) t[k] = DeviceCodec<T>::from_float(v[k]);
    uint2 raw;
    memcpy(&raw, t, sizeof raw);
    *reinterpret_cast<uint2*>(p) = raw;
  } else {
    p[0] = DeviceCodec<T>::from_float(v[0]);
  }
}

template <typename T, int V>
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
  // The row's values at columns c..c+V-1: x, or x + branch with the residual add fused in (one IEEE add
  // each). Later passes recompute the sum from the cached inputs rather than read back x_sum, which the
  // read-only cache may not see.
  auto values = [xr, br](int c, float (&v)[V]) {
    load_f32<V>(xr + c, v);
    if (br != nullptr) {
      float b[V];
      load_lowp<T, V>(br + c, b);
      for (int k = 0; k < V; ++k) v[k] += b[k];
    }
  };
  float sum = 0.f;
  float* sr = br != nullptr ? x_sum + row * width : nullptr;
  for (int c = lane * V; c < width; c += kWarp * V) {
    float v[V];
    values(c, v);
    if (sr != nullptr) store_f32<V>(sr + c, v);
    for (int k = 0; k < V; ++k) sum += v[k];
  }
  const float mean = warp_sum(sum) / static_cast<float>(width);
  // The variance from the deviations (a second pass over the cached row), not E[x^2] - mean^2, which
  // cancels catastrophically when the mean is large against the spread.
  float squares = 0.f;
  for (int c = lane * V; c < width; c += kWarp * V) {
    float v[V];
    values(c, v);
    for (int k = 0; k < V; ++k) squares += (v[k] - mean) * (v[k] - mean);
  }
  const float rstd = rsqrtf(warp_sum(squares) / static_cast<float>(width) + eps);
  T* yr = y + row * width;
  for (int c = lane * V; c < width; c += kWarp * V) {
    float v[V], w[V], b[V];
    values(c, v);
    load_f32<V>(weight + c, w);
    load_f32<V>(bias + c, b);
    for (int k = 0; k < V; ++k) v[k] = (v[k] - mean) * rstd * w[k] + b[k];
    store_lowp<T, V>(yr + c, v);
  }
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight, xhat = (x - mean) * rstd: the input
// gradient of y = xhat * weight + bias. Partials: sum over the block's rows of dy * xhat (weight) and dy
// (bias): each warp sums its own run of rows into its own shared-memory partial, then the block's threads
// add the warps' partials column by column in warp order and write one row of partials per block (a
// quarter of the bytes one row per warp would write and ATen would read back).
template <typename T, int V>
__global__ void layer_norm_backward_kernel(const T* __restrict__ dy, const float* __restrict__ x,
                                           const float* __restrict__ weight, const float* __restrict__ mean_in,
                                           const float* __restrict__ rstd_in, const float* __restrict__ dresidual,
                                           float* __restrict__ dx, T* __restrict__ dbranch,
                                           float* __restrict__ partials, int64_t rows, int width,
                                           int64_t rows_per_warp) {
  extern __shared__ float shared[];
  const int lane = threadIdx.x % kWarp;
  const int warp_in_block = threadIdx.x / kWarp;
  const int warps_in_block = blockDim.x / kWarp;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * warps_in_block + warp_in_block) * rows_per_warp;
  float* dweight = shared + static_cast<int64_t>(warp_in_block) * 2 * width;
  float* dbias = dweight + width;
  // Every warp zeroes its partial, one past the last row too: the block sums them all below.
  for (int c = lane; c < width; c += kWarp) {
    dweight[c] = 0.f;
    dbias[c] = 0.f;
  }
  __syncwarp();
  const int64_t last = first + rows_per_warp < rows ? first + rows_per_warp : rows;
  for (int64_t row = first; row < last; ++row) {
    const float mean = mean_in[row];
    const float rstd = rstd_in[row];
    const T* dyr = dy + row * width;
    const float* xr = x + row * width;
    float sum_g = 0.f, sum_g_xhat = 0.f;
    for (int c = lane * V; c < width; c += kWarp * V) {
      float d[V], xv[V], w[V], dw[V], db[V];
      load_lowp<T, V>(dyr + c, d);
      load_f32<V>(xr + c, xv);
      load_f32<V>(weight + c, w);
      load_f32<V>(dweight + c, dw);  // this lane's own columns: no other thread touches them
      load_f32<V>(dbias + c, db);
      for (int k = 0; k < V; ++k) {
        const float xhat = (xv[k] - mean) * rstd;
        const float g = d[k] * w[k];
        sum_g += g;
        sum_g_xhat += g * xhat;
        dw[k] += d[k] * xhat;
        db[k] += d[k];
      }
      store_f32<V>(dweight + c, dw);
      store_f32<V>(dbias + c, db);
    }
    const float mean_g = warp_sum(sum_g) / static_cast<float>(width);
    const float mean_g_xhat = warp_sum(sum_g_xhat) / static_cast<float>(width);
    float* dxr = dx + row * width;
    const float* drr = dresidual != nullptr ? dresidual + row * width : nullptr;
    T* dbr = dbranch != nullptr ? dbranch + row * width : nullptr;
    for (int c = lane * V; c < width; c += kWarp * V) {
      float d[V], xv[V], w[V], v[V];
      load_lowp<T, V>(dyr + c, d);
      load_f32<V>(xr + c, xv);
      load_f32<V>(weight + c, w);
      for (int k = 0; k < V; ++k) {
        const float xhat = (xv[k] - mean) * rstd;
        v[k] = rstd * (d[k] * w[k] - mean_g - xhat * mean_g_xhat);
      }
      if (drr != nullptr) {
        float r[V];
        load_f32<V>(drr + c, r);
        for (int k = 0; k < V; ++k) v[k] += r[k];
      }
      store_f32<V>(dxr + c, v);
      if (dbr != nullptr) store_lowp<T, V>(dbr + c, v);
    }
  }
  __syncthreads();
  float* out = partials + static_cast<int64_t>(blockIdx.x) * 2 * width;
  for (int c = threadIdx.x; c < 2 * width; c += blockDim.x) {
    float total = 0.f;
    for (int w = 0; w < warps_in_block; ++w) total += shared[static_cast<int64_t>(w) * 2 * width + c];
    out[c] = total;
  }
}

int64_t rows_per_warp(int64_t rows) { return std::max<int64_t>(1, (rows + kBackwardWarpsWanted - 1) / kBackwardWarpsWanted); }

// The backward's dynamic shared memory: a block may have 48 KiB without opting in. The kernel has no
// static __shared__ of its own; adding some would make the widest launches (6144 columns: one warp's
// partials are exactly 48 KiB) fail.
constexpr int64_t kBackwardSharedBytes = 48 * 1024;
static_assert(2 * kLayerNormMaxWidth * static_cast<int64_t>(sizeof(float)) <= kBackwardSharedBytes,
              "one warp's weight and bias partials of the widest row must fit a block's shared memory");

int backward_warps_per_block(int64_t width) {
  const int64_t fit = kBackwardSharedBytes / (2 * width * static_cast<int64_t>(sizeof(float)));
  return static_cast<int>(std::clamp<int64_t>(fit, 1, 4));
}

int64_t backward_blocks(int64_t rows, int64_t width) {
  const int64_t per_warp = rows_per_warp(rows);
  const int64_t warps = (rows + per_warp - 1) / per_warp;
  const int warps_per_block = backward_warps_per_block(width);
  return (warps + warps_per_block - 1) / warps_per_block;
}

// Whether the four-wide accesses apply: a width of whole fours, and every array aligned to its access (a
// row then starts aligned too). A null pointer (an optional array) is aligned.
bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

template <typename T>
cudaError_t forward_typed(const float* x, const T* branch, float* x_sum, const float* weight, const float* bias, T* y,
                          float* mean, float* rstd, int64_t rows, int64_t width, float eps, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((rows + kForwardWarpsPerBlock - 1) / kForwardWarpsPerBlock);
  const bool wide = width % 4 == 0 && aligned(x, 16) && aligned(x_sum, 16) && aligned(weight, 16) &&
                    aligned(bias, 16) && aligned(branch, 8) && aligned(y, 8);
  if (wide) {
    layer_norm_forward_kernel<T, 4><<<blocks, kForwardWarpsPerBlock * kWarp, 0, stream>>>(
        x, branch, x_sum, weight, bias, y, mean, rstd, rows, static_cast<int>(width), eps);
  } else {
    layer_norm_forward_kernel<T, 1><<<blocks, kForwardWarpsPerBlock * kWarp, 0, stream>>>(
        x, branch, x_sum, weight, bias, y, mean, rstd, rows, static_cast<int>(width), eps);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_typed(const T* dy, const float* x, const float* weight, const float* mean, const float* rstd,
                           const float* dresidual, float* dx, T* dbranch, float* partials, int64_t rows,
                           int64_t width, cudaStream_t stream) {
  const int64_t per_warp = rows_per_warp(rows);
  const int warps_per_block = backward_warps_per_block(width);
  const auto blocks = static_cast<unsigned>(backward_blocks(rows, width));
  const size_t shared_bytes = static_cast<size_t>(warps_per_block) * 2 * width * sizeof(float);
  const bool wide = width % 4 == 0 && aligned(dy, 8) && aligned(x, 16) && aligned(weight, 16) &&
                    aligned(dresidual, 16) && aligned(dx, 16) && aligned(dbranch, 8);
  if (wide) {
    layer_norm_backward_kernel<T, 4><<<blocks, warps_per_block * kWarp, shared_bytes, stream>>>(
        dy, x, weight, mean, rstd, dresidual, dx, dbranch, partials, rows, static_cast<int>(width), per_warp);
  } else {
    layer_norm_backward_kernel<T, 1><<<blocks, warps_per_block * kWarp, shared_bytes, stream>>>(
        dy, x, weight, mean, rstd, dresidual, dx, dbranch, partials, rows, static_cast<int>(width), per_warp);
  }
  return cudaGetLastError();
}

}  // namespace

int64_t layer_norm_backward_partial_rows(int64_t rows, int64_t width) { return backward_blocks(rows, width); }

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
