// The CPU loss loops (model/lm_loss_cpu_kernels.h) against the exact values they stand for, computed in
// double from the same float logits, for every variant of the loops this CPU runs (AVX-512, AVX2,
// baseline); then the chunked loss with a soft-cap against transformers' formula on ATen ops.
//
// The bounds come from the loops' arithmetic (derived in model/lm_loss_cpu_kernels.cpp), first order in
// u = 2^-24, with 5% for the second order. For a row z, c = cap * tanh(z / cap) (or z), m = max c,
// S = sum exp(c - m), p = exp(c - m) / S, h = 1 - tanh^2(z / cap) (or 1):
//  - D, the computed logits' error: 8u |c| with a cap (z / cap, tanh, * cap), 0 without.
//  - exp(c_i - m): relative (4 + |c_i - m|) u, plus 2D from the two logits' errors.
//  - S: relative 2D + sum_i (4 + |c_i - m|) u p_i (the double sum adds nothing to count).
//  - the loss m + log S - c_t: D for c_t, S's relative error, u of each of the three terms' size for the
//    final rounding.
//  - the gradient scale (p_i h_i - y_i h_i): p_i's relative error (exp's, S's, 2u for the factor and
//    product), h's absolute error 2 (7u) t^2 + 2u (t carries 7u: the division's rounding through tanh's
//    condition <= 1, and tanh's 6u), u of the result for the target's subtraction and the last product;
//    where exp flushes to 0 (c_i - m < -87), the entry itself (< 1.7e-38 of scale).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "model/chunked_lm_loss.h"
#include "model/lm_loss_cpu.h"
#include "model/lm_loss_cpu_kernels.h"

namespace mygpt::lm_loss_cpu_test {
namespace {

using lm_loss_kernels::Loops;
using lm_loss_kernels::loops_this_cpu_runs;

constexpr double kU = 0x1p-24;
constexpr double kSecondOrderMargin = 1.05;

struct RowCase {
  std::vector<float> z;
  int64_t target;
};

struct Expected {
  double loss, loss_bound;
  std::vector<double> grad, grad_bound;
};

Expected exact_row(const RowCase& row, double cap, double scale) {
  const size_t v = row.z.size();
  std::vector<double> c(v), h(v, 1.0), t(v, 0.0);
  double logit_error = 0;
  for (size_t i = 0; i < v; ++i) {
    if (cap > 0) {
      t[i] = std::tanh(row.z[i] / cap);
      c[i] = cap * t[i];
      h[i] = 1.0 - t[i] * t[i];
      logit_error = std::max(logit_error, 8.0 * kU * std::fabs(c[i]));
    } else {
      c[i] = row.z[i];
    }
  }
  const double m = *std::max_element(c.begin(), c.end());
  double s = 0, weighted = 0;
  for (size_t i = 0; i < v; ++i) s += std::exp(c[i] - m);
  for (size_t i = 0; i < v; ++i) weighted += (4.0 + std::fabs(c[i] - m)) * kU * std::exp(c[i] - m) / s;
  const double sum_error = 2 * logit_error + weighted;
  Expected e;
  const size_t ti = static_cast<size_t>(row.target);
  e.loss = m + std::log(s) - c[ti];
  e.loss_bound = kSecondOrderMargin * (logit_error + sum_error + kU * (std::fabs(m) + std::fabs(std::log(s)) +
                                                                      std::fabs(c[ti]) + std::fabs(e.loss)));
  e.grad.resize(v);
  e.grad_bound.resize(v);
  for (size_t i = 0; i < v; ++i) {
    const double p = std::exp(c[i] - m) / s, y = i == ti ? 1.0 : 0.0;
    const double p_error = (4.0 + std::fabs(c[i] - m)) * kU + 2 * logit_error + sum_error + 2 * kU;
    const double h_error = cap > 0 ? 14.0 * kU * t[i] * t[i] + 2.0 * kU : 0.0;
    e.grad[i] = scale * (p - y) * h[i];
    e.grad_bound[i] = kSecondOrderMargin * (scale * (p * p_error * h[i] + std::fabs(p - y) * h_error) +
                                            2 * kU * std::fabs(e.grad[i])) +
                      0x1p-149;
    // Where exp flushes to 0 (its argument below -87, which c_i - m may round to), the value itself.
    if (c[i] - m < -86.99) e.grad_bound[i] += scale * p * h[i];
  }
  return e;
}

// Rows of realistic logits (a spread of a few units), rows with logits near and beyond the cap, the
// vocabulary sizes around the loops' 16 lanes, the target first, last and anywhere.
std::vector<RowCase> row_cases() {
  std::vector<RowCase> rows;
  torch::manual_seed(3);
  for (int64_t vocab : {1, 2, 15, 16, 17, 33, 97, 1000, 50257}) {
    for (double spread : {0.5, 4.0, 40.0}) {
      const auto z = (spread * torch::randn({vocab})).contiguous();
      for (int64_t target : {int64_t{0}, vocab - 1, vocab / 3}) {
        rows.push_back({std::vector<float>(z.data_ptr<float>(), z.data_ptr<float>() + vocab), target});
      }
    }
  }
  return rows;
}

void check_rows(const Loops& loops, double cap) {
  const double scale = 1.0 / 37.0;
  int64_t bad = 0;
  std::string first;
  for (const RowCase& row : row_cases()) {
    const Expected e = exact_row(row, cap, scale);
    std::vector<float> z = row.z;
    float loss = -1;
    for (const bool want_grad : {false, true}) {
      z = row.z;
      loops.cross_entropy_rows({.logits = z.data(), .rows = 1, .vocab = static_cast<int64_t>(z.size()),
                                .targets = &row.target, .losses = &loss, .softcap = static_cast<float>(cap),
                                .grad_scale = static_cast<float>(scale), .want_grad = want_grad});
      if (!(std::fabs(loss - e.loss) <= e.loss_bound) && bad++ == 0) {
        first = "loss " + std::to_string(loss) + " vs " + std::to_string(e.loss) + " (vocab " +
                std::to_string(z.size()) + ")";
      }
    }
    for (size_t i = 0; i < z.size(); ++i) {
      if (!(std::fabs(z[i] - e.grad[i]) <= e.grad_bound[i]) && bad++ == 0) {
        std::ostringstream line;
        line << std::setprecision(9) << "gradient[" << i << "] " << z[i] << " vs " << e.grad[i] << " (vocab "
             << z.size() << ", bound " << e.grad_bound[i] << ")";
        first = line.str();
      }
    }
  }
  EXPECT_EQ(bad, 0) << loops.isa << ", cap " << cap << ": " << first;
}

TEST(LmLossCpu, EveryVariantsLossAndGradientAreWithinTheirBoundsWithoutACap) {
  ASSERT_FALSE(loops_this_cpu_runs().empty());
  for (const Loops& loops : loops_this_cpu_runs()) check_rows(loops, 0.0);
}

TEST(LmLossCpu, EveryVariantsLossAndGradientAreWithinTheirBoundsWithACap) {
  // nanochat's cap (15), and a low one that most logits of the wide rows saturate.
  for (const Loops& loops : loops_this_cpu_runs()) {
    check_rows(loops, 15.0);
    check_rows(loops, 2.0);
  }
}

TEST(LmLossCpu, EveryVariantsTanhIsWithinItsDocumentedError) {
  // Every 97th float below the polynomial's edge 0.625, every 1021st beyond it, both signs; relative
  // error against tanh in double, where the result is not subnormal.
  std::vector<float> xs;
  const uint32_t edge = std::bit_cast<uint32_t>(0.625f);
  for (uint32_t bits = 0x00800000u; bits < edge; bits += 97) xs.push_back(std::bit_cast<float>(bits));
  for (uint32_t bits = edge; bits < 0x7f800000u; bits += 1021) xs.push_back(std::bit_cast<float>(bits));
  const size_t positives = xs.size();
  for (size_t i = 0; i < positives; ++i) xs.push_back(-xs[i]);
  for (const Loops& loops : loops_this_cpu_runs()) {
    std::vector<float> out(xs.size());
    loops.tanh(xs.data(), out.data(), static_cast<int64_t>(xs.size()));
    int64_t bad = 0;
    std::string first;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = std::tanh(static_cast<double>(xs[i]));
      if (!(std::fabs(out[i] - want) <= lm_loss_kernels::kTanhErrorUnits * kU * std::fabs(want)) && bad++ == 0) {
        first = "tanh(" + std::to_string(xs[i]) + ") = " + std::to_string(out[i]);
      }
    }
    EXPECT_EQ(bad, 0) << loops.isa << ": " << first;
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()};
    float special_out[5];
    loops.tanh(specials, special_out, 5);
    EXPECT_EQ(special_out[0], 0.0f) << loops.isa;
    EXPECT_EQ(special_out[2], 1.0f) << loops.isa;
    EXPECT_EQ(special_out[3], -1.0f) << loops.isa;
    EXPECT_TRUE(std::isnan(special_out[4])) << loops.isa;
  }
}

TEST(LmLossCpu, NanAndInfinityGiveWhatAtenGives) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto loss_of = [](std::vector<float> z, double cap) {
    auto logits = torch::tensor(z).reshape({1, -1});
    auto losses = torch::empty({1});
    lm_loss_rows_cpu_(logits, torch::zeros({1}, torch::kLong), losses, 1.0, true, cap);
    return losses.item<float>();
  };
  // A NaN anywhere makes the loss NaN, as in ATen's cross-entropy (a diverged run must show it).
  EXPECT_TRUE(std::isnan(loss_of({1.0f, nan, 2.0f}, 0.0)));
  EXPECT_TRUE(std::isnan(loss_of({nan, 1.0f, 2.0f}, 15.0)));
  EXPECT_TRUE(std::isnan(loss_of({1.0f, inf, 2.0f}, 0.0)));
  // With a cap, an infinite logit is the cap.
  const float capped = loss_of({1.0f, inf, 2.0f}, 15.0);
  const auto expected = torch::nn::functional::cross_entropy(
      torch::tensor({15 * std::tanh(1.0 / 15), 15.0, 15 * std::tanh(2.0 / 15)}, torch::kDouble).reshape({1, 3}),
      torch::zeros({1}, torch::kLong));
  EXPECT_NEAR(capped, expected.item<double>(), 1e-5);
  // -inf logits take no probability.
  EXPECT_FLOAT_EQ(loss_of({0.0f, -inf, 0.0f}, 0.0), static_cast<float>(std::log(2.0)));
}

TEST(LmLossCpu, ATargetOutsideTheVocabularyIsRefused) {
  auto logits = torch::randn({2, 5});
  auto losses = torch::empty({2});
  for (int64_t bad : {int64_t{5}, int64_t{-1}, int64_t{-100}}) {
    EXPECT_THROW(lm_loss_rows_cpu_(logits, torch::tensor({int64_t{0}, bad}), losses, 1.0, false, 0.0), c10::Error)
        << bad;
  }
}

// The whole chunked loss with nanochat's soft-cap against transformers' formula (logits / cap, tanh,
// * cap, then cross-entropy) on ATen ops in double, and its gradients.
TEST(LmLossCpu, TheChunkedLossWithASoftCapEqualsTransformersFormula) {
  torch::manual_seed(11);
  const int64_t rows = 45, vocab = 211, width = 16;
  const auto hidden = torch::randn({rows, width}), weight = 2.0 * torch::randn({vocab, width});
  const auto targets = torch::randint(vocab, {rows}, torch::kLong);
  auto h = hidden.clone().requires_grad_(), w = weight.clone().requires_grad_();
  const auto loss = chunked_lm_loss(h, w, targets, {.chunk_rows = 8}, 15.0);
  loss.backward();
  auto hd = hidden.to(torch::kDouble).requires_grad_(), wd = weight.to(torch::kDouble).requires_grad_();
  const auto logits = torch::tanh(torch::linear(hd, wd) / 15.0) * 15.0;
  const auto reference = torch::nn::functional::cross_entropy(logits, targets);
  reference.backward();
  // The float head product (a sum of 16 terms) and the loss's own bound: a few u of the logits' size.
  const double logit_size = logits.abs().max().item<double>();
  EXPECT_NEAR(loss.item<double>(), reference.item<double>(), 64 * kU * logit_size);
  const double gh = hd.grad().abs().max().item<double>(), gw = wd.grad().abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(h.grad().to(torch::kDouble), hd.grad(), 0, 1e-5 * gh));
  EXPECT_TRUE(torch::allclose(w.grad().to(torch::kDouble), wd.grad(), 0, 1e-5 * gw));
}

}  // namespace
}  // namespace mygpt::lm_loss_cpu_test
