#include "model/lm_loss_cpu_kernels.h"

#include <cmath>
#include <limits>

// How the loops are compiled (three x86-64 variants, -fno-trapping-math): see model/cpu_exp.h.

namespace mygpt::lm_loss_kernels {
namespace {

using cpu_math::exp_nonpositive;

// Reductions (max, sum) keep one accumulator per lane, combined in a fixed order at the end: GCC
// vectorizes them without reassociating anything, so every variant sums in the same order, and the
// sum of exps is kept in double, so its rounding (a vocabulary of 50,000 terms) is negligible.
constexpr int kLanes = 16;

// tanh(x), Cephes' tanhf scheme. For |x| < 0.625 the odd polynomial x + x^3 P(x^2): Cephes gives its
// peak relative error as 2.06e-7 (3.5u) over its test range, and the tests measure it (every 97th
// float below 0.625). For |x| >= 0.625, (1 - t) / (1 + t) with t = exp(-2|x|) <= exp(-1.25) = 0.287:
// -2|x| is exact, t carries kExpErrorUnits = 4u relative, i.e. <= 1.15u absolute; 1 - t >= 0.713 then
// carries 1.6u + u, 1 + t 1.15u + u, the division u: <= 5.8u. Both within kTanhErrorUnits = 6.
// Where exp flushes (|x| > 43.5) t = 0 and the result is +-1, as tanh is in float there.
[[gnu::always_inline]] inline float tanh_one(float x) {
  const float ax = std::fabs(x);
  const float s = x * x;
  float p = -5.70498872745e-3f;
  p = p * s + 2.06390887954e-2f;
  p = p * s - 5.37397155531e-2f;
  p = p * s + 1.33314422036e-1f;
  p = p * s - 3.33332819422e-1f;
  const float small = (p * s) * x + x;
  const float t = exp_nonpositive(-2.0f * ax);
  const float large = std::copysign((1.0f - t) / (1.0f + t), x);
  return ax < 0.625f ? small : large;
}

// One row. kCapped: pass 1 turns the row into t = tanh(z / cap) in place (the capped logit is cap * t,
// rounded as transformers' `tanh(z / cap) * cap` rounds it) and finds the largest; pass 2 sums
// exp(logit - max); pass 3 (with a gradient) writes (exp(logit - max) * (scale / sum)) * (1 - t^2) over
// the row, and the target's entry with scale subtracted before the last product.
//
// Errors against the exact values from the same float z (the tests check these):
//  - the capped logit: z / cap and * cap round once each, tanh 6u, and tanh's condition
//    |x tanh'(x) / tanh(x)| <= 1 carries the first rounding: <= 8u of |logit|, i.e. <= 8u cap.
//  - exp(logit - max): the subtraction rounds by u |logit - max|, exp by 4u.
//  - the sum: each term as above, and the double sum adds nothing to count in float terms.
//  - the loss max + log(sum) - logit[target], in double, rounded to float once.
//  - the gradient: scale / sum rounds once, the product with exp once, 1 - t^2 carries 2 x (t's error)
//    + 2u absolute (it cancels where |t| nears 1, as ATen's 1 - tanh^2 does).
template <bool kCapped>
[[gnu::always_inline]] inline void one_row(float* __restrict z, int64_t vocab, int64_t target, float cap, float scale,
                                           bool want_grad, float* loss) {
  float lane_max[kLanes];
  for (int j = 0; j < kLanes; ++j) lane_max[j] = -std::numeric_limits<float>::infinity();
  const int64_t whole = vocab - vocab % kLanes;
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      float v = z[i + j];
      if constexpr (kCapped) {
        v = tanh_one(v / cap);
        z[i + j] = v;
      }
      lane_max[j] = v > lane_max[j] ? v : lane_max[j];
    }
  }
  for (int64_t i = whole; i < vocab; ++i) {
    float v = z[i];
    if constexpr (kCapped) {
      v = tanh_one(v / cap);
      z[i] = v;
    }
    lane_max[0] = v > lane_max[0] ? v : lane_max[0];
  }
  float row_max = lane_max[0];
  for (int j = 1; j < kLanes; ++j) row_max = lane_max[j] > row_max ? lane_max[j] : row_max;
  // Rounding is monotone, so cap * (largest t) is the largest capped logit.
  const float max_logit = kCapped ? cap * row_max : row_max;
  auto logit = [cap](float v) { return kCapped ? cap * v : v; };

  double lane_sum[kLanes] = {};
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane_sum[j] += exp_nonpositive(logit(z[i + j]) - max_logit);
  }
  for (int64_t i = whole; i < vocab; ++i) lane_sum[0] += exp_nonpositive(logit(z[i]) - max_logit);
  double sum = 0.0;
  for (int j = 0; j < kLanes; ++j) sum += lane_sum[j];
  const float target_value = z[target];
  const float target_logit = logit(target_value);
  *loss = static_cast<float>(static_cast<double>(max_logit) + std::log(sum) - static_cast<double>(target_logit));
  if (!want_grad) return;

  const float factor = static_cast<float>(static_cast<double>(scale) / sum);
  for (int64_t i = 0; i < vocab; ++i) {
    const float v = z[i];
    float g = exp_nonpositive(logit(v) - max_logit) * factor;
    if constexpr (kCapped) g *= 1.0f - v * v;
    z[i] = g;
  }
  float g_target = exp_nonpositive(target_logit - max_logit) * factor - scale;
  if constexpr (kCapped) g_target *= 1.0f - target_value * target_value;
  z[target] = g_target;
}

[[gnu::always_inline]] inline void all_rows(const Rows& r) {
  for (int64_t row = 0; row < r.rows; ++row) {
    float* z = r.logits + row * r.vocab;
    if (r.softcap > 0.0f) {
      one_row<true>(z, r.vocab, r.targets[row], r.softcap, r.grad_scale, r.want_grad, r.losses + row);
    } else {
      one_row<false>(z, r.vocab, r.targets[row], 0.0f, r.grad_scale, r.want_grad, r.losses + row);
    }
  }
}

// The loops for one instruction set (`attribute` is its target attribute, or nothing).
#define MYGPT_LM_LOSS_LOOPS(name, attribute)                                                    \
  attribute void rows_##name(const Rows& r) { all_rows(r); }                                    \
  attribute void tanh_##name(const float* __restrict x, float* __restrict out, int64_t n) {     \
    for (int64_t i = 0; i < n; ++i) out[i] = tanh_one(x[i]);                                    \
  }

MYGPT_LM_LOSS_LOOPS(baseline, )
#ifdef MYGPT_CPU_X86_VARIANTS
MYGPT_LM_LOSS_LOOPS(x86_64_v3, [[gnu::target("arch=x86-64-v3")]])
MYGPT_LM_LOSS_LOOPS(x86_64_v4, [[gnu::target("arch=x86-64-v4")]])
#endif

std::vector<Loops> supported_loops() {
  std::vector<Loops> loops;
#ifdef MYGPT_CPU_X86_VARIANTS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) loops.push_back({"x86-64-v4 (AVX-512)", rows_x86_64_v4, tanh_x86_64_v4});
  if (__builtin_cpu_supports("x86-64-v3")) loops.push_back({"x86-64-v3 (AVX2, FMA)", rows_x86_64_v3, tanh_x86_64_v3});
#endif
  loops.push_back({"baseline", rows_baseline, tanh_baseline});
  return loops;
}

}  // namespace

const std::vector<Loops>& loops_this_cpu_runs() {
  static const std::vector<Loops> loops = supported_loops();
  return loops;
}

void cross_entropy_rows(const Rows& rows) { loops_this_cpu_runs().front().cross_entropy_rows(rows); }

}  // namespace mygpt::lm_loss_kernels
