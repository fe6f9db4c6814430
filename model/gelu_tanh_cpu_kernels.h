#pragma once
// The loops of the CPU tanh-GELU (model/gelu_tanh_cpu.h), on plain float arrays and without LibTorch's
// headers: this file is compiled apart, with its own flags (model/CMakeLists.txt). On x86-64 each loop
// is compiled for AVX-512, for AVX2 + FMA and for plain x86-64; the best the CPU supports runs.
//
// gelu(x) = 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3), is x * sigmoid(2z): one exp and one
// division per element where ATen spends a SLEEF tanh. Error bounds: see the .cpp.
#include <cstdint>
#include <vector>

#include "model/cpu_exp.h"

namespace mygpt::gelu_tanh_kernels {

// The exp inside the loops and its error (model/cpu_exp.h).
inline constexpr double kExpErrorUnits = cpu_math::kExpErrorUnits;
inline constexpr float kExpFlushBelow = cpu_math::kExpFlushBelow;

// The loops compiled for one instruction set.
struct Loops {
  const char* isa;
  // y[i] = gelu(x[i]).
  void (*forward)(const float* x, float* y, int64_t n);
  // dx[i] = grad[i] * gelu'(x[i]).
  void (*backward)(const float* grad, const float* x, float* dx, int64_t n);
  // out[i] = exp(a[i]) for a[i] <= 0 (NaN stays NaN): the exp inside both, for its own test.
  void (*exp_nonpositive)(const float* a, float* out, int64_t n);
};

// Every variant this CPU can run, best first (the tests run them all).
const std::vector<Loops>& loops_this_cpu_runs();

// The best variant's loops.
void forward(const float* x, float* y, int64_t n);
void backward(const float* grad, const float* x, float* dx, int64_t n);

}  // namespace mygpt::gelu_tanh_kernels
