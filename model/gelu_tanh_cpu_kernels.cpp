#include "model/gelu_tanh_cpu_kernels.h"

#include <cmath>
#include <numbers>

#include "model/cpu_exp.h"

// How the loops are compiled (three x86-64 variants, -fno-trapping-math): see model/cpu_exp.h.

namespace mygpt::gelu_tanh_kernels {
namespace {

// GPT-2's constants as ATen's CPU kernel rounds them to float: sqrt(2/pi) and the cubic's coefficient.
constexpr float kBeta = static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
constexpr float kKappa = 0.044715f;
// The derivative's x^2 overflows beyond |x| ~ 1.8e19, and inf * 0 = NaN where the sigmoid's tail is 0
// (ATen's gelu_backward is NaN there). Clamping x^2 at 1e30 (|x| = 1e15, where exp(-2|z|) is long 0)
// changes no result.
constexpr float kSquareClamp = 1e30f;

using cpu_math::exp_nonpositive;

// sigmoid(2z) and its parts, without overflow for any z: t = exp(-2|z|) is in [0, 1], p = 1 / (1 + t) is
// sigmoid(2|z|), and sigmoid(-2|z|) = t p. Taking the small side as t p (not as 1 - p) keeps the
// negative tail accurate to a few u relative, where ATen's 1 + tanh(z) loses it to cancellation.
struct Sigmoid2z {
  float s;     // sigmoid(2z)
  float tail;  // t p^2 = sigmoid(2z) sigmoid(-2z), for the derivative
};

[[gnu::always_inline]] inline Sigmoid2z sigmoid_2z(float z) {
  const float t = exp_nonpositive(-2.0f * std::fabs(z));
  const float p = 1.0f / (1.0f + t);
  const float tp = t * p;
  return {z < 0.0f ? tp : p, tp * p};
}

// Error of gelu = x * sigmoid(2z) (for the bound the tests check), in u, to first order: z rounds by
// <= 7u relative (5 operations, 2 rounded constants; x and 0.044715 x^3 have one sign, so no
// cancellation), which moves sigmoid(2z) by 2 (1 - s) |z| 7u relative. Given z: t carries E =
// kExpErrorUnits, p = 1/(1+t) then E t/(1+t) + 2u <= E/2 + 2u, t p (z < 0) 1.5E + 3u, times x one
// more u: |error| <= |gelu| (1.5E + 4u + 14u (1 - s) |z|). Where exp flushes (2|z| > 87) the
// negative side returns 0, an absolute error of at most |gelu| there (< 2e-37 for any x).
//
// The derivative gelu' = s + 2x s (1 - s) z', z' = sqrt(2/pi) (1 + 3 * 0.044715 x^2), with
// s (1 - s) = t p^2 for either sign of z: s as above; t p^2 carries 2E + 6u, z' 7u, the two products 2u,
// z moves s (1 - s) by 2 |1 - 2s| |z| 7u; the sum and the product with grad one u each.
[[gnu::always_inline]] inline float gelu_one(float v) {
  const float z = kBeta * (v + kKappa * (v * v * v));
  return v * sigmoid_2z(z).s;
}

[[gnu::always_inline]] inline float gelu_grad_one(float grad, float v) {
  const float v2 = v * v;
  const float z = kBeta * (v + kKappa * (v2 * v));
  const Sigmoid2z sig = sigmoid_2z(z);
  const float dz = kBeta * (1.0f + (3.0f * kKappa) * (v2 < kSquareClamp ? v2 : kSquareClamp));
  // (tail * v) first: 0 for any finite v where the tail is 0 (2v could overflow), NaN for v = +-inf
  // as in ATen's gelu_backward.
  return grad * (sig.s + (sig.tail * v) * (2.0f * dz));
}

// The three loops for one instruction set (`attribute` is its target attribute, or nothing).
#define MYGPT_GELU_LOOPS(name, attribute)                                                                   \
  attribute void forward_##name(const float* __restrict x, float* __restrict y, int64_t n) {                \
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_one(x[i]);                                                 \
  }                                                                                                         \
  attribute void backward_##name(const float* __restrict grad, const float* __restrict x,                  \
                                 float* __restrict dx, int64_t n) {                                        \
    for (int64_t i = 0; i < n; ++i) dx[i] = gelu_grad_one(grad[i], x[i]);                                  \
  }                                                                                                         \
  attribute void exp_##name(const float* __restrict a, float* __restrict out, int64_t n) {                  \
    for (int64_t i = 0; i < n; ++i) out[i] = exp_nonpositive(a[i]);                                    \
  }

MYGPT_GELU_LOOPS(baseline, )
#ifdef MYGPT_CPU_X86_VARIANTS
MYGPT_GELU_LOOPS(x86_64_v3, [[gnu::target("arch=x86-64-v3")]])
MYGPT_GELU_LOOPS(x86_64_v4, [[gnu::target("arch=x86-64-v4")]])
#endif

std::vector<Loops> supported_loops() {
  std::vector<Loops> loops;
#ifdef MYGPT_CPU_X86_VARIANTS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) {
    loops.push_back({"x86-64-v4 (AVX-512)", forward_x86_64_v4, backward_x86_64_v4, exp_x86_64_v4});
  }
  if (__builtin_cpu_supports("x86-64-v3")) {
    loops.push_back({"x86-64-v3 (AVX2, FMA)", forward_x86_64_v3, backward_x86_64_v3, exp_x86_64_v3});
  }
#endif
  loops.push_back({"baseline", forward_baseline, backward_baseline, exp_baseline});
  return loops;
}

}  // namespace

const std::vector<Loops>& loops_this_cpu_runs() {
  static const std::vector<Loops> loops = supported_loops();
  return loops;
}

void forward(const float* x, float* y, int64_t n) { loops_this_cpu_runs().front().forward(x, y, n); }
void backward(const float* grad, const float* x, float* dx, int64_t n) {
  loops_this_cpu_runs().front().backward(grad, x, dx, n);
}

}  // namespace mygpt::gelu_tanh_kernels
