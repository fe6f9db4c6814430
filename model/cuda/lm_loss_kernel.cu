// One thread block per row. Memory traffic per element: one read for the row's max and sum, one read
// and one write for the gradient, all in the logits' type (2 bytes under bf16). The ATen sequence it
// replaces (upcast copy, max, subtract, exp, sum, divide, scatter, scale, downcast) makes about ten fp32
// passes over every chunk of logits, which on a GPU costs more than the head's matmuls themselves.
#include "model/cuda/lm_loss_kernel.h"
#include "model/cuda/device_codec.h"
#include "model/cuda/lm_loss_row_math.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mygpt::cuda_kernels {
namespace {

using row_math::MaxSum;

constexpr int kMaxThreads = 512;
constexpr int kWarp = 32;

// The block's combined pair, returned to every thread (the one part of the row's work that the CPU
// tests cannot run: warp shuffles and shared memory).
__device__ MaxSum block_reduce(MaxSum value) {
  __shared__ MaxSum per_warp[kMaxThreads / kWarp];
  __shared__ MaxSum total;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    MaxSum other{__shfl_down_sync(0xffffffffu, value.max, offset), __shfl_down_sync(0xffffffffu, value.sum, offset)};
    value = row_math::combine(value, other);
  }
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  if (lane == 0) per_warp[warp] = value;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum acc = per_warp[0];
    for (int w = 1; w < static_cast<int>(blockDim.x) / kWarp; ++w) acc = row_math::combine(acc, per_warp[w]);
    total = acc;
  }
  __syncthreads();
  return total;
}

// One block per row; the row's arithmetic is row_math's (shared with the CPU tests).
template <typename T, int kPack>
__global__ void lm_loss_rows_kernel(T* __restrict__ logits, const int64_t* __restrict__ targets,
                                    float* __restrict__ row_losses, int64_t vocab, int64_t packs, float grad_scale,
                                    bool write_grad) {
  using Codec = DeviceCodec<T>;
  const int64_t row = blockIdx.x;
  T* row_logits = logits + row * vocab;
  const int64_t target = targets[row];
  const bool target_valid = target >= 0 && target < vocab;
  // Read before the reduction's barrier: after it, other threads may overwrite the row with gradients.
  float target_logit = 0.0f;
  if (threadIdx.x == 0 && target_valid) target_logit = Codec::to_float(row_logits[target]);
  const MaxSum local = row_math::thread_max_sum<T, Codec, kPack>(row_logits, packs, threadIdx.x, blockDim.x);
  const float log_sum = row_math::log_sum(block_reduce(local));
  if (threadIdx.x == 0) row_losses[row] = row_math::row_loss(log_sum, target_valid, target_logit);
  if (!write_grad) return;
  row_math::write_gradient<T, Codec, kPack>(row_logits, packs, threadIdx.x, blockDim.x, log_sum, target, grad_scale);
}

template <typename T>
cudaError_t launch_typed(T* logits, const int64_t* targets, float* row_losses, int64_t rows, int64_t vocab,
                         float grad_scale, bool write_grad, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const row_math::RowLaunch shape = row_math::row_launch(
      vocab, sizeof(T), reinterpret_cast<std::uintptr_t>(logits) % 16 == 0, kMaxThreads, kWarp);
  const dim3 grid(static_cast<unsigned int>(rows));
  if (shape.vector) {
    lm_loss_rows_kernel<T, row_math::vector_pack<T>()><<<grid, shape.threads, 0, stream>>>(
        logits, targets, row_losses, vocab, shape.packs, grad_scale, write_grad);
  } else {
    lm_loss_rows_kernel<T, 1><<<grid, shape.threads, 0, stream>>>(logits, targets, row_losses, vocab, shape.packs,
                                                                   grad_scale, write_grad);
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
