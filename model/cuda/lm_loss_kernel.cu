// One thread block per row. Memory traffic per element: one read for the row's max and sum, one read
// and one write for the gradient, all in the logits' type (2 bytes under bf16). The ATen sequence it
// replaces (upcast copy, max, subtract, exp, sum, divide, scatter, scale, downcast) makes about ten fp32
// passes over every chunk of logits, which on a GPU costs more than the head's matmuls themselves.
#include "model/cuda/lm_loss_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace mygpt::cuda_kernels {
namespace {

constexpr int kMaxThreads = 512;
constexpr int kWarp = 32;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }

// A running (max, sum of exp(x - max)) pair: the online softmax of Milakov & Gimelshein (2018).
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ void add_value(MaxSum& acc, float x) {
  if (x > acc.max) {
    acc.sum = acc.sum * expf(acc.max - x) + 1.0f;
    acc.max = x;
  } else {
    acc.sum += expf(x - acc.max);  // NaN in x makes the sum, and so the loss, NaN
  }
}

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  // An empty side (max -inf, sum 0) must not turn the other into NaN through exp(-inf - -inf).
  if (a.max == -INFINITY) return b;
  if (b.max == -INFINITY) return a;
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

// The block's combined pair, returned to every thread.
__device__ MaxSum block_reduce(MaxSum value) {
  __shared__ MaxSum per_warp[kMaxThreads / kWarp];
  __shared__ MaxSum total;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    MaxSum other{__shfl_down_sync(0xffffffffu, value.max, offset), __shfl_down_sync(0xffffffffu, value.sum, offset)};
    value = combine(value, other);
  }
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  if (lane == 0) per_warp[warp] = value;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum acc = per_warp[0];
    for (int w = 1; w < static_cast<int>(blockDim.x) / kWarp; ++w) acc = combine(acc, per_warp[w]);
    total = acc;
  }
  __syncthreads();
  return total;
}

// kPack elements of T travel in one 16-byte load or store when the row allows it (kVector).
template <typename T, bool kVector>
__global__ void lm_loss_rows_kernel(T* __restrict__ logits, const int64_t* __restrict__ targets,
                                    float* __restrict__ row_losses, int64_t vocab, float grad_scale,
                                    bool write_grad) {
  constexpr int kPack = kVector ? 16 / sizeof(T) : 1;
  struct alignas(sizeof(T) * kPack) Pack {
    T v[kPack];
  };
  const int64_t row = blockIdx.x;
  T* row_logits = logits + row * vocab;
  const int64_t target = targets[row];
  const bool target_valid = target >= 0 && target < vocab;
  // Read before the reduction's barrier: after it, other threads may overwrite the row with gradients.
  float target_logit = 0.0f;
  if (threadIdx.x == 0 && target_valid) target_logit = to_float(row_logits[target]);

  const int64_t packs = vocab / kPack;
  Pack* row_packs = reinterpret_cast<Pack*>(row_logits);
  MaxSum local{-INFINITY, 0.0f};
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack pack = row_packs[p];
#pragma unroll
    for (int k = 0; k < kPack; ++k) add_value(local, to_float(pack.v[k]));
  }
  const MaxSum row_total = block_reduce(local);
  const float log_sum = row_total.max + logf(row_total.sum);
  if (threadIdx.x == 0) row_losses[row] = target_valid ? log_sum - target_logit : NAN;
  if (!write_grad) return;

  // softmax - onehot, scaled: exp(x - logsumexp) needs no division by the sum.
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    Pack pack = row_packs[p];
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      const int64_t column = p * kPack + k;
      float grad = expf(to_float(pack.v[k]) - log_sum);
      if (column == target) grad -= 1.0f;
      pack.v[k] = from_float<T>(grad * grad_scale);
    }
    row_packs[p] = pack;
  }
}

template <typename T>
cudaError_t launch_typed(T* logits, const int64_t* targets, float* row_losses, int64_t rows, int64_t vocab,
                         float grad_scale, bool write_grad, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  constexpr int kPack = 16 / sizeof(T);
  const bool vector = vocab % kPack == 0 && reinterpret_cast<std::uintptr_t>(logits) % 16 == 0;
  const int64_t work_items = vector ? vocab / kPack : vocab;
  // Enough warps to cover the row once when it is short (character vocabularies), at most kMaxThreads.
  const int64_t warps = (work_items + kWarp - 1) / kWarp;
  const int threads = static_cast<int>(warps >= kMaxThreads / kWarp ? kMaxThreads : warps * kWarp);
  const dim3 grid(static_cast<unsigned int>(rows));
  if (vector) {
    lm_loss_rows_kernel<T, true>
        <<<grid, threads, 0, stream>>>(logits, targets, row_losses, vocab, grad_scale, write_grad);
  } else {
    lm_loss_rows_kernel<T, false>
        <<<grid, threads, 0, stream>>>(logits, targets, row_losses, vocab, grad_scale, write_grad);
  }
  return cudaGetLastError();
}

}  // namespace

int launch_lm_loss_rows(void* logits, LogitsType type, const int64_t* targets, float* row_losses, int64_t rows,
                        int64_t vocab, float grad_scale, bool write_grad, void* stream) {
  if (rows < 0 || vocab <= 0 || rows > 0x7fffffff) return static_cast<int>(cudaErrorInvalidValue);
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case LogitsType::float32:
      return launch_typed(static_cast<float*>(logits), targets, row_losses, rows, vocab, grad_scale, write_grad, s);
    case LogitsType::bfloat16:
      return launch_typed(static_cast<__nv_bfloat16*>(logits), targets, row_losses, rows, vocab, grad_scale,
                          write_grad, s);
    case LogitsType::float16:
      return launch_typed(static_cast<__half*>(logits), targets, row_losses, rows, vocab, grad_scale, write_grad, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace mygpt::cuda_kernels
