#pragma once
// The loops of the chunked LM loss on a CPU (model/lm_loss_cpu.h), on plain float arrays and without
// LibTorch's headers: compiled apart, three times on x86-64 (model/cpu_exp.h says how).
//
// One row of logits is worked on while it sits in the core's cache: its soft-cap, max, softmax sum, loss
// and gradient take one read and one write of the row from memory, where the ATen ops take about ten
// passes over the whole chunk (divide, tanh, multiply, max, subtract, exp, sum, divide, scale, and
// 1 - tanh^2 with a soft-cap). Error bounds: see the .cpp.
#include <cstdint>
#include <vector>

#include "model/cpu_exp.h"

namespace mygpt::lm_loss_kernels {

// Relative error of the tanh inside the loops, in u = 2^-24, for every finite float (derived in the
// .cpp); tanh(+-inf) = +-1 and NaN stays NaN.
inline constexpr double kTanhErrorUnits = 6.0;

// One row-major block of logits and what the loops do with it.
struct Rows {
  float* logits;           // (rows, vocab), row-major; overwritten (see below)
  int64_t rows;
  int64_t vocab;
  const int64_t* targets;  // (rows), each in [0, vocab): the caller checks
  float* losses;           // (rows), written
  float softcap;           // > 0: the logits are softcap * tanh(z / softcap) first; 0: none
  float grad_scale;        // the gradient's factor (1/N for the mean of N rows)
  bool want_grad;          // write the gradient into `logits`
};

// For each row z: c = softcap * tanh(z / softcap) (or z), losses[r] = logsumexp(c) - c[target], and with
// want_grad the row becomes d(grad_scale * loss)/dz = (softmax(c) - onehot(target)) * grad_scale, times
// 1 - tanh^2 with a soft-cap. Without want_grad the row holds intermediate values afterwards.
void cross_entropy_rows(const Rows& rows);

// The loops compiled for one instruction set.
struct Loops {
  const char* isa;
  void (*cross_entropy_rows)(const Rows& rows);
  // out[i] = tanh(x[i]): the tanh inside the soft-cap, for its own test.
  void (*tanh)(const float* x, float* out, int64_t n);
};

// Every variant this CPU can run, best first (the tests run them all).
const std::vector<Loops>& loops_this_cpu_runs();

}  // namespace mygpt::lm_loss_kernels
