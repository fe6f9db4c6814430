#include "model/decode_linear.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <ATen/autocast_mode.h>

namespace mygpt {
namespace {

// 16 floats in GCC's generic vector type: one AVX-512 register, two AVX2 ones, four SSE ones. The same
// source compiles for each instruction set below, so every CPU runs the same sums in the same order.
using v16 = float __attribute__((vector_size(64)));
// Passing v16 by value has a different calling convention with and without AVX-512, which GCC warns of;
// every function that does so here is inlined into its instruction set's caller, so no call crosses.
#pragma GCC diagnostic ignored "-Wpsabi"
constexpr int64_t kLanes = 16;

[[gnu::always_inline]] inline v16 load(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);  // an unaligned vector load
  return v;
}

// The last in % 16 inputs, zero-padded to a whole vector (zeros add nothing to a sum of products).
[[gnu::always_inline]] inline v16 load_tail(const float* p, int64_t count) {
  float lanes[kLanes] = {};
  std::memcpy(lanes, p, static_cast<size_t>(count) * sizeof(float));
  return load(lanes);
}

// The lanes added pairwise in a fixed tree (8 + 8, 4 + 4, 2 + 2, 1 + 1).
[[gnu::always_inline]] inline float sum_lanes(v16 v) {
  float lanes[kLanes];
  std::memcpy(lanes, &v, sizeof lanes);
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
    for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

struct Problem {
  const float* x;  // (rows, in)
  int64_t rows;
  const float* w;  // (out, in)
  const float* bias;  // (out) or null
  float* y;  // (rows, out)
  int64_t out, in;
};

// Outputs o..o+R-1 of N rows of x: R weight rows read together, each once for all N rows.
// The R rows lie side by side in memory, but reading them together looks to the hardware prefetchers like
// R short streams (a GPT-2 row is 3 KiB), each to be detected anew. So while this block's rows are
// summed, the next block's (the R rows after them, one contiguous span) is asked into L2 in address
// order, R cache lines for each 16 inputs: by the time it is summed, it is there.
template <int R, int N>
[[gnu::always_inline]] inline void rows_pass(const Problem& p, int64_t o) {
  v16 acc[N][R] = {};
  const int64_t whole = p.in / kLanes * kLanes;
  // A prefetch never faults: past the matrix's end (the last block) it only fetches a few lines for nothing.
  const char* next = reinterpret_cast<const char*>(p.w + (o + R) * p.in);
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int r = 0; r < R; ++r) __builtin_prefetch(next + (i * R + r * kLanes) * sizeof(float), 0, 2);
    v16 xs[N];
    for (int n = 0; n < N; ++n) xs[n] = load(p.x + n * p.in + i);
    for (int r = 0; r < R; ++r) {
      const v16 w = load(p.w + (o + r) * p.in + i);
      for (int n = 0; n < N; ++n) acc[n][r] += w * xs[n];
    }
  }
  if (const int64_t tail = p.in - whole; tail > 0) {
    for (int r = 0; r < R; ++r) {
      const v16 w = load_tail(p.w + (o + r) * p.in + whole, tail);
      for (int n = 0; n < N; ++n) acc[n][r] += w * load_tail(p.x + n * p.in + whole, tail);
    }
  }
  for (int n = 0; n < N; ++n) {
    for (int r = 0; r < R; ++r) {
      p.y[n * p.out + o + r] = sum_lanes(acc[n][r]) + (p.bias ? p.bias[o + r] : 0.0f);
    }
  }
}

// All outputs for N rows: blocks of R weight rows (R as many as the registers hold beside N rows of
// accumulators), then the rows left over one at a time.
template <int Budget, int N>
[[gnu::always_inline]] inline void all_rows(const Problem& p) {
  constexpr int R = std::max(1, Budget / N);
  int64_t o = 0;
  for (; o + R <= p.out; o += R) rows_pass<R, N>(p, o);
  for (; o < p.out; ++o) rows_pass<1, N>(p, o);
}

// Budget: the 16-float accumulators that fit in the instruction set's registers with room for the loads.
template <int Budget>
[[gnu::always_inline]] inline void run(const Problem& p) {
  switch (p.rows) {
    case 1: return all_rows<Budget, 1>(p);
    case 2: return all_rows<Budget, 2>(p);
    case 3: return all_rows<Budget, 3>(p);
    case 4: return all_rows<Budget, 4>(p);
    default: throw std::logic_error("decode_linear: more rows than kDecodeLinearMaxRows");
  }
}
static_assert(kDecodeLinearMaxRows == 4, "run() has a case per row count");

// One function per instruction set, chosen once at run time: the build targets any x86-64, and a
// CPU with AVX-512 or AVX2 streams the weights with wider loads (and fused multiply-adds). Other
// architectures (an ARM Mac) compile the baseline only, for the build's own target.
#if defined(__x86_64__) && defined(__GNUC__)
#define MYGPT_DECODE_X86_VARIANTS 1
[[gnu::target("avx512f,fma")]] void run_avx512(const Problem& p) { run<16>(p); }
[[gnu::target("avx2,fma")]] void run_avx2(const Problem& p) { run<4>(p); }
#endif
void run_baseline(const Problem& p) { run<2>(p); }

using Kernel = void (*)(const Problem&);
Kernel kernel_of(DecodeLinearIsa isa) {
  switch (isa) {
#ifdef MYGPT_DECODE_X86_VARIANTS
    case DecodeLinearIsa::avx512: return run_avx512;
    case DecodeLinearIsa::avx2: return run_avx2;
#endif
    case DecodeLinearIsa::baseline: return run_baseline;
    default: break;
  }
  throw std::logic_error("decode_linear: no code for that instruction set in this build");
}

DecodeLinearIsa best_isa() {
  for (auto isa : {DecodeLinearIsa::avx512, DecodeLinearIsa::avx2}) {
    if (decode_linear_isa_runs_here(isa)) return isa;
  }
  return DecodeLinearIsa::baseline;
}

}  // namespace

bool decode_linear_isa_runs_here(DecodeLinearIsa isa) {
  if (isa == DecodeLinearIsa::baseline) return true;
#ifdef MYGPT_DECODE_X86_VARIANTS
  __builtin_cpu_init();
  if (isa == DecodeLinearIsa::avx512) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  if (isa == DecodeLinearIsa::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return false;
}

bool decode_linear_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  auto cpu_float = [](const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat; };
  if (!cpu_float(x) || !cpu_float(weight) || weight.dim() != 2 || !weight.is_contiguous() || weight.size(1) == 0) {
    return false;
  }
  // Under autocast torch::linear would compute in bf16: the step must do what the uncached path does.
  if (at::autocast::is_autocast_enabled(at::kCPU)) return false;
  if (x.dim() == 0 || x.size(-1) != weight.size(1) || x.numel() / weight.size(1) > kDecodeLinearMaxRows) return false;
  if (bias.defined() && (!cpu_float(bias) || bias.dim() != 1 || bias.size(0) != weight.size(0))) return false;
  const bool records_gradient = torch::GradMode::is_enabled() &&
                                (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  return !records_gradient;
}

namespace {

torch::Tensor multiply(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, Kernel kernel) {
  if (!decode_linear_applies(x, weight, bias)) throw std::logic_error("decode_linear: inputs it does not handle");
  const int64_t in = weight.size(1), out = weight.size(0);
  const auto rows_in = x.reshape({-1, in}).contiguous();
  const auto bias_in = bias.defined() ? bias.contiguous() : bias;
  auto shape = x.sizes().vec();
  shape.back() = out;
  auto y = torch::empty(shape, x.options());
  if (rows_in.size(0) == 0 || out == 0) return y;
  kernel(Problem{rows_in.data_ptr<float>(), rows_in.size(0), weight.data_ptr<float>(),
                 bias_in.defined() ? bias_in.data_ptr<float>() : nullptr, y.data_ptr<float>(), out, in});
  return y;
}

}  // namespace

torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  static const Kernel best = kernel_of(best_isa());  // the CPU is asked once, not at every matrix of a step
  return multiply(x, weight, bias, best);
}

torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                            DecodeLinearIsa isa) {
  if (!decode_linear_isa_runs_here(isa)) throw std::logic_error("decode_linear: this CPU lacks the instruction set asked for");
  return multiply(x, weight, bias, kernel_of(isa));
}

torch::Tensor decoding_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              bool continues_cache) {
  if (continues_cache && decode_linear_applies(x, weight, bias)) return decode_linear(x, weight, bias);
  return torch::linear(x, weight, bias);
}

torch::Tensor row_invariant_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const bool one_row_applies =
      x.dim() > 0 && decode_linear_applies(x.narrow(0, 0, std::min<int64_t>(1, x.size(0))), weight, bias);
  if (!one_row_applies) return torch::linear(x, weight, bias);
  const auto rows = x.reshape({-1, x.size(-1)});
  if (rows.size(0) <= kDecodeLinearMaxRows) return decode_linear(x, weight, bias);
  std::vector<torch::Tensor> groups;
  for (int64_t first = 0; first < rows.size(0); first += kDecodeLinearMaxRows) {
    const int64_t count = std::min(kDecodeLinearMaxRows, rows.size(0) - first);
    groups.push_back(decode_linear(rows.narrow(0, first, count), weight, bias));
  }
  auto shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return torch::cat(groups).view(shape);
}

}  // namespace mygpt
