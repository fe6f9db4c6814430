#pragma once
// exp(a) for a <= 0 in plain float code that GCC vectorizes, shared by the CPU kernels compiled apart
// from LibTorch (model/gelu_tanh_cpu_kernels.cpp, model/lm_loss_cpu_kernels.cpp), with its error bound.
//
// How those kernel files become vector code on any x86-64 without -march=native: each loop is compiled
// three times, with GCC's target attribute for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and the
// baseline (SSE2), and the first call picks the best one the CPU supports (__builtin_cpu_supports).
// The loops are plain float code: no intrinsics and no -ffast-math, so every operation is an IEEE one
// and the bounds hold for every variant (FMA contraction only removes roundings). The files are
// compiled with -fno-trapping-math (as ATen is): without it GCC may not compute both sides of a select
// in a vector (a side could raise an FP exception the scalar code would not), and the AVX2 and baseline
// loops stay scalar, at a branch per element. The flag changes no value. Other compilers and
// architectures compile the loops once, for the build's target.
#include <bit>
#include <cstdint>
#include <numbers>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MYGPT_CPU_X86_VARIANTS 1
#endif

namespace mygpt::cpu_math {

// Relative error of exp_nonpositive on [-87, 0], in units of u = 2^-24 (float's unit roundoff), as
// derived below. Below kExpFlushBelow it returns 0, an absolute error under exp(-87) < 1.7e-38.
inline constexpr double kExpErrorUnits = 4.0;
inline constexpr float kExpFlushBelow = -87.0f;

// Cephes' expf scheme: a = n ln2 + r with |r| <= ln2/2, exp(r) by the polynomial 1 + r + r^2 Q(r) (Q of
// degree 5), 2^n put into the exponent bits. Its error, in u = 2^-24:
//  - r: n*C1 is exact (C1 has 9 significant bits, |n| <= 126 has 7); a - n*C1, n*C2 and the second
//    subtraction round by at most u times 0.347, 0.027 and 0.347; C1 + C2 differs from ln2 by 1.6e-12,
//    times |n| <= 126 that is 2e-10. An absolute error d in r is a relative one in exp(r): <= 0.73u.
//  - the polynomial 1 + r + r^2 Q(r): Cephes' coefficients (as floats) differ from exp on |r| <= ln2/2
//    by at most 2.7e-9 relative (0.05u; max over a 2e6-point grid in double). Evaluating Q by Horner
//    (5 steps of a multiply and an add, terms of one sign) and r^2 Q: <= 12u of |r^2 Q| <= 0.068, i.e.
//    0.82u absolute; + r rounds by <= 0.415u absolute; against exp(r) >= 0.707 that is <= 1.75u
//    relative, and the final + 1 rounds by u: <= 2.75u.
//  - times 2^n is exact: a >= -87 gives n >= -126 and then r > 0.33, so the result is a normal float.
// In all <= 3.53u, to first order; kExpErrorUnits = 4 leaves room for the second order.
// Below -87 the result is 0 (exp(-87) = 1.6e-38): no subnormal results. NaN stays NaN.
[[gnu::always_inline]] inline float exp_nonpositive(float a) {
  const bool flushed = a < kExpFlushBelow;
  const float clamped = flushed ? kExpFlushBelow : a;
  // Round a*log2(e) to an integer n by adding 1.5*2^23: n sits in the low mantissa bits of `shifted`.
  constexpr float kShifter = 12582912.0f;
  const float shifted = clamped * std::numbers::log2e_v<float> + kShifter;
  const float n = shifted - kShifter;
  const float r = (clamped - n * 0.693359375f) - n * -2.12194440e-4f;
  float q = 1.9875691500e-4f;
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  const float poly = q * (r * r) + r + 1.0f;
  const std::uint32_t scale_bits =
      (std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(kShifter) + 127u) << 23;
  const float e = poly * std::bit_cast<float>(scale_bits);
  return flushed ? 0.0f : e;
}

}  // namespace mygpt::cpu_math
