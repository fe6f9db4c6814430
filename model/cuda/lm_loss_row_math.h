#pragma once
// The per-row arithmetic of the fused loss kernel (lm_loss_kernel.cu), in one source that nvcc compiles
// for the GPU and the host compiler for the CPU, so that the CPU tests (tests/test_lm_loss_row_math.cpp)
// check the very code the kernel runs against the ATen path: the online max and sum, the -inf and NaN
// rules, the vector (16-byte) and scalar loads, the gradient written in place, for fp32, bf16 and fp16.
// What stays GPU-only is the thread block's reduction of the threads' partial (max, sum) pairs and the
// launch itself. A thread t of a block of `threads` handles packs t, t + threads, t + 2 threads, ...
//
// The element type T comes with a Codec: static float to_float(T) and static T from_float(float) (CUDA's
// intrinsics on the device; c10::BFloat16 / c10::Half on the host, which round to nearest even as they do).
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MYGPT_HOST_DEVICE __host__ __device__ __forceinline__
#define MYGPT_UNROLL _Pragma("unroll")
#else
#define MYGPT_HOST_DEVICE inline
#define MYGPT_UNROLL
#endif

namespace mygpt::cuda_kernels::row_math {

// A running (max, sum of exp(x - max)) pair: the online softmax of Milakov & Gimelshein (2018).
struct MaxSum {
  float max;
  float sum;
};

MYGPT_HOST_DEVICE MaxSum empty_max_sum() { return {-INFINITY, 0.0f}; }

MYGPT_HOST_DEVICE void add_value(MaxSum& acc, float x) {
  if (x > acc.max) {
    acc.sum = acc.sum * expf(acc.max - x) + 1.0f;
    acc.max = x;
  } else if (x != -INFINITY) {
    // -inf adds exp(-inf) = 0, and must be skipped rather than computed: while the max is still -inf,
    // exp(-inf - -inf) would be NaN (a row starting with masked logits; found by the CPU tests).
    acc.sum += expf(x - acc.max);  // NaN in x makes the sum, and so the loss, NaN
  }
}

MYGPT_HOST_DEVICE MaxSum combine(MaxSum a, MaxSum b) {
  // An empty side (max -inf, sum 0) must not turn the other into NaN through exp(-inf - -inf).
  if (a.max == -INFINITY) return b;
  if (b.max == -INFINITY) return a;
  const float m = fmaxf(a.max, b.max);
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

// kPack elements of T in one load or store: 16 bytes when the row allows it (vocab a multiple of kPack,
// the row 16-byte aligned), one element otherwise.
template <typename T, int kPack>
struct alignas(sizeof(T) * kPack) Pack {
  T v[kPack];
};

template <typename T>
constexpr int vector_pack() {
  return static_cast<int>(16 / sizeof(T));
}

// How the kernel covers a row: 16-byte packs or single elements, and how many threads (a multiple of
// the warp, enough to cover a short row once, at most max_threads).
struct RowLaunch {
  bool vector;
  int64_t packs;  // per row
  int threads;
};
MYGPT_HOST_DEVICE RowLaunch row_launch(int64_t vocab, int element_bytes, bool row_16_byte_aligned, int max_threads,
                                       int warp) {
  const int64_t pack = 16 / element_bytes;
  const bool vector = vocab % pack == 0 && row_16_byte_aligned;
  const int64_t packs = vector ? vocab / pack : vocab;
  const int64_t warps = (packs + warp - 1) / warp;
  const int threads = warps >= max_threads / warp ? max_threads : static_cast<int>(warps) * warp;
  return {vector, packs, threads};
}

// Thread `thread`'s (max, sum) over its packs of one row.
template <typename T, typename Codec, int kPack>
MYGPT_HOST_DEVICE MaxSum thread_max_sum(const T* row, int64_t packs, int64_t thread, int64_t threads) {
  const auto* row_packs = reinterpret_cast<const Pack<T, kPack>*>(row);
  MaxSum local = empty_max_sum();
  for (int64_t p = thread; p < packs; p += threads) {
    const Pack<T, kPack> pack = row_packs[p];
MYGPT_UNROLL
    for (int k = 0; k < kPack; ++k) add_value(local, Codec::to_float(pack.v[k]));
  }
  return local;
}

// logsumexp of the row from its combined pair.
MYGPT_HOST_DEVICE float log_sum(MaxSum row_total) { return row_total.max + logf(row_total.sum); }

// The row's loss: NaN for a target outside [0, vocab), which makes the trainer skip the step.
MYGPT_HOST_DEVICE float row_loss(float row_log_sum, bool target_valid, float target_logit) {
  return target_valid ? row_log_sum - target_logit : NAN;
}

// Thread `thread`'s packs of the row replaced by (softmax - onehot(target)) * grad_scale: exp(x - logsumexp)
// needs no division by the sum. The row's target logit must have been read before (the caller's barrier).
template <typename T, typename Codec, int kPack>
MYGPT_HOST_DEVICE void write_gradient(T* row, int64_t packs, int64_t thread, int64_t threads, float row_log_sum,
                                      int64_t target, float grad_scale) {
  auto* row_packs = reinterpret_cast<Pack<T, kPack>*>(row);
  for (int64_t p = thread; p < packs; p += threads) {
    Pack<T, kPack> pack = row_packs[p];
MYGPT_UNROLL
    for (int k = 0; k < kPack; ++k) {
      const int64_t column = p * kPack + k;
      float grad = expf(Codec::to_float(pack.v[k]) - row_log_sum);
      if (column == target) grad -= 1.0f;
      pack.v[k] = Codec::from_float(grad * grad_scale);
    }
    row_packs[p] = pack;
  }
}

}  // namespace mygpt::cuda_kernels::row_math
