#pragma once
// How far two fp32 training runs of the same model, data and steps may drift apart when they differ only
// in how their arithmetic is rounded (a CPU and a GPU; another summation order, another exp/log): a bound
// from fp32's unit roundoff and the run itself, not from one machine's result.
//
// The derivation (first order in u = 2^-24, fp32's unit roundoff):
//  - A sum of n terms in any order (a dot product, a blocked GEMM, a tree reduction on a GPU) is off by at
//    most about n*u times the sum of the terms' magnitudes; exp and log (CPU: Sleef, 1 ulp; CUDA: 2 ulp)
//    add a few u. Through the network errors add along the longest chain of reductions: per layer the
//    layer norm (C), the QKV projection (C), the attention scores (head width <= C), the softmax's sum
//    and the weighted values (T each), the output projection (C), the second layer norm (C), the MLP's
//    two matmuls (C and 4C); then the final norm (C), the head (C), the logsumexp (V) and the mean over
//    the B*T rows. Layer norms keep activations near unit size, so relative errors do not grow between
//    layers. The backward runs the same chain the other way, and each weight gradient is a sum over the
//    B*T rows: kappa = 2 * forward + B*T. Step 0 (identical weights): |dL| <= kappa*u*|L|.
//  - After t steps the weights differ. A weight whose gradient is real gets AdamW steps of about
//    lr * g/|g| on both sides, which a relative gradient error of kappa*u changes by about kappa*u of that
//    step, so its effect on the loss is at most kappa*u times the step's own first-order change of the
//    loss, which is the loss's change |L(t+1) - L(t)| to first order. A weight whose gradient is only
//    rounding noise may get AdamW steps of opposite signs (up to lr), but the loss is flat in it (its
//    gradient is that noise), so it moves the loss only at second order.
//  - Hence, for a short run that does not amplify its errors (20 steps at a small lr, no divergence):
//      |L_a(s) - L_b(s)| <= kappa * u * (|L(s)| + sum_{t<s} |L(t+1) - L(t)|),
//    L the losses of the reference run. No fixed tolerance holds for every model and run length; this
//    one grows with the width, depth, batch and steps as the rounding does.
#include <cmath>
#include <cstdint>
#include <vector>

namespace mygpt::testing {

inline constexpr double kFp32UnitRoundoff = 1.0 / (1 << 24);

struct Fp32RunShape {
  int64_t n_layer, n_embd, seq_len, vocab, rows;  // rows: B*T per step (all micro-batches)
};

// kappa of the comment above: the longest chain of reductions of one forward and backward step.
inline double fp32_reduction_chain(const Fp32RunShape& m) {
  const double per_layer = 9.0 * m.n_embd + 2.0 * m.seq_len;
  const double forward = m.n_layer * per_layer + 2.0 * m.n_embd + m.vocab + m.rows;
  return 2.0 * forward + m.rows;
}

// The largest |L_a(s) - L_b(s)| allowed at each step s, from the reference run's losses.
inline std::vector<double> fp32_loss_bounds(const Fp32RunShape& m, const std::vector<double>& reference_losses) {
  const double per_unit = fp32_reduction_chain(m) * kFp32UnitRoundoff;
  std::vector<double> bounds;
  double travelled = 0;  // sum over earlier steps of |L(t+1) - L(t)|
  for (size_t s = 0; s < reference_losses.size(); ++s) {
    if (s > 0) travelled += std::abs(reference_losses[s] - reference_losses[s - 1]);
    bounds.push_back(per_unit * (std::abs(reference_losses[s]) + travelled));
  }
  return bounds;
}

}  // namespace mygpt::testing
