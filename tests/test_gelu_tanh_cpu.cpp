// The CPU tanh-GELU kernel (model/gelu_tanh_cpu.h) against what it replaces, ATen's gelu(x, "tanh") and
// gelu_backward(grad, x, "tanh"), over a dense sweep of every float binade, zero, subnormals, the
// largest floats, infinities and NaN; each variant of the loops this CPU runs (AVX-512, AVX2, baseline);
// then the MLP's gradients end to end against the MLP on ATen's op.
//
// The tolerance is not a number seen on one machine: each side's error against the exact function
// (evaluated in double, whose own error, ~1e-16 relative, is negligible here) is bounded from its
// arithmetic, and the two may differ by at most the sum of the two bounds. In u = 2^-24 (float's unit
// roundoff), first order, for z = sqrt(2/pi) (x + 0.044715 x^3), s = sigmoid(2z), th = tanh(z):
//  - z itself rounds by <= 7u relative on both sides (5 operations and 2 rounded constants, no
//    cancellation since x and x^3 share a sign); that moves s by 2 (1 - s) |z| 7u relative, tanh's
//    1 - th^2 by 2 |th| |z| 7u, s (1 - s) by 2 |1 - 2s| |z| 7u.
//  - ours (derived in model/gelu_tanh_cpu_kernels.cpp, E = kExpErrorUnits for its exp):
//      forward  |y| (1.5E + 4)
//      backward |s| (1.5E + 3) + |2x s (1 - s) z'| (2E + 15) + 2 |y'|
//    and where its exp flushes to 0 (2|z| > 87), the flushed part itself (< 2e-37).
//  - ATen: SLEEF's tanh is within 1 ulp (<= 2u relative); 1 + th then has an absolute error of
//    2u |th| + u (1 + th) (the cancellation that makes its negative tail coarse), 1 - th*th one of
//    5u th^2 + u (1 - th^2):
//      forward  u |x| |th| + 2u |y|
//      backward u |th| + 0.5u (1 + th) + |0.5 x z'| (5 th^2 + 1 - th^2) u + |2x s (1 - s) z'| 9u + 2u |y'|
// Second-order terms (products of two of these, each < 1e-3 relative) are covered by a 1% margin, and
// one subnormal rounding (2^-149) is allowed on every value.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "model/gelu_tanh_cpu.h"
#include "model/gelu_tanh_cpu_kernels.h"
#include "model/gpt.h"
#include "tests/test_support.h"

namespace mygpt::gelu_tanh_cpu_test {
namespace {

using gelu_tanh_kernels::kExpErrorUnits;
using gelu_tanh_kernels::Loops;
using gelu_tanh_kernels::loops_this_cpu_runs;

constexpr double kU = 0x1p-24;
constexpr double kSubnormalRounding = 0x1p-149;
constexpr double kSecondOrderMargin = 1.01;
constexpr double kFloatMax = std::numeric_limits<float>::max();

// The exact function at a float input, with each side's error bound (grad = 1 for the derivative).
struct Exact {
  double y = 0, dy = 0;
  double forward_ours = 0, forward_aten = 0, backward_ours = 0, backward_aten = 0;
};

Exact exact(float xf) {
  const double x = xf;
  const double beta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi, kappa = 0.044715;
  const double z = beta * (x + kappa * x * x * x);
  const double az = std::fabs(z);
  // sigmoid(2z) and sigmoid(-2z) without cancellation: t = exp(-2|z|) <= 1.
  const double t = std::exp(-2.0 * az);
  const double big = 1.0 / (1.0 + t), small = t / (1.0 + t);
  const double s = z < 0 ? small : big, one_minus_s = z < 0 ? big : small;
  const double th = std::tanh(z);
  const double dz = beta * (1.0 + 3.0 * kappa * x * x);
  const double tail = 2.0 * x * (s * one_minus_s) * dz;  // the derivative's second term
  Exact e;
  e.y = x * s;
  e.dy = s + tail;
  const double E = kExpErrorUnits;
  const double z_on_s = 14.0 * one_minus_s * az, z_on_tail = 14.0 * std::fabs(1.0 - 2.0 * s) * az;
  const double z_on_sech2 = 14.0 * std::fabs(th) * az;
  e.forward_ours = std::fabs(e.y) * (1.5 * E + 4.0 + z_on_s) * kU;
  e.backward_ours = (s * (1.5 * E + 3.0 + z_on_s) + std::fabs(tail) * (2.0 * E + 15.0 + z_on_tail) +
                     2.0 * std::fabs(e.dy)) * kU;
  // Where our exp flushes (its argument -2|z| rounds below -87; z carries <= 7u), the flushed terms.
  if (2.0 * az > 87.0 * (1.0 - 8.0 * kU)) {
    e.backward_ours += std::fabs(tail);
    if (z < 0) {
      e.forward_ours += std::fabs(e.y);
      e.backward_ours += s;
    }
  }
  e.forward_aten = (std::fabs(x) * std::fabs(th) + std::fabs(e.y) * (2.0 + z_on_s)) * kU;
  e.backward_aten = (std::fabs(th) + 0.5 * (2.0 * s) + s * z_on_s +
                     std::fabs(0.5 * x * dz) * (5.0 * th * th + 4.0 * s * one_minus_s) +
                     std::fabs(tail) * (9.0 + z_on_sech2) + 2.0 * std::fabs(e.dy)) * kU;
  for (double* b : {&e.forward_ours, &e.forward_aten, &e.backward_ours, &e.backward_aten}) {
    *b = *b * kSecondOrderMargin + kSubnormalRounding;
  }
  return e;
}

torch::Tensor from_floats(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())}, torch::kFloat).clone();
}

// Every 1021st float of one sign (a prime stride: ~8200 values in every binade, all mantissa patterns
// alike), both signs, then a fine grid over [-12, 12] where the function bends, and the edges.
std::vector<float> finite_sweep() {
  std::vector<float> xs;
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 1021) {
    xs.push_back(std::bit_cast<float>(bits));
    xs.push_back(-std::bit_cast<float>(bits));
  }
  for (double x = -12.0; x <= 12.0; x += 0x1p-12) xs.push_back(static_cast<float>(x));
  const float edges[] = {0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                         1e-20f, 0.5f, 1.0f, 3.0f, 10.0f, 1e10f, 1e15f, 1e19f, 1e30f, std::numeric_limits<float>::max()};
  for (float e : edges) {
    xs.push_back(e);
    xs.push_back(-e);
  }
  return xs;
}

struct Mismatch {
  int64_t count = 0;
  std::string first;
  void add(const char* what, float x, double got, double want, double bound) {
    if (count++ == 0) {
      std::ostringstream line;
      line << std::setprecision(9) << what << " at x=" << x << ": " << got << " vs " << want << ", bound " << bound;
      first = line.str();
    }
  }
};

// One variant's forward and backward over the sweep: ours within its bound of the exact values, and
// within the sum of both bounds of ATen's float results.
void check_variant_against_exact_and_aten(const Loops& loops) {
  const std::vector<float> xs = finite_sweep();
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> ones(xs.size(), 1.0f), y(xs.size()), dy(xs.size());
  loops.forward(xs.data(), y.data(), n);
  loops.backward(ones.data(), xs.data(), dy.data(), n);
  const torch::Tensor x = from_floats(xs);
  const torch::Tensor aten_y = torch::gelu(x, "tanh");
  const torch::Tensor aten_dy = at::gelu_backward(torch::ones_like(x), x, "tanh");
  const float* ay = aten_y.data_ptr<float>();
  const float* ady = aten_dy.data_ptr<float>();
  Mismatch forward_exact, backward_exact, forward_aten, backward_aten, aten_forward_exact, aten_backward_exact;
  for (int64_t i = 0; i < n; ++i) {
    const float xi = xs[i];
    const Exact e = exact(xi);
    // ATen within its own bound: the model of the reference that the comparison below relies on.
    if (!(std::fabs(ay[i] - e.y) <= e.forward_aten)) aten_forward_exact.add("ATen forward", xi, ay[i], e.y, e.forward_aten);
    if (static_cast<double>(xi) * xi <= kFloatMax && !(std::fabs(ady[i] - e.dy) <= e.backward_aten)) {
      aten_backward_exact.add("ATen backward", xi, ady[i], e.dy, e.backward_aten);
    }
    if (!(std::fabs(y[i] - e.y) <= e.forward_ours)) forward_exact.add("forward", xi, y[i], e.y, e.forward_ours);
    if (!(std::fabs(dy[i] - e.dy) <= e.backward_ours)) {
      backward_exact.add("backward", xi, dy[i], e.dy, e.backward_ours);
    }
    const double fb = e.forward_ours + e.forward_aten;
    if (!(std::fabs(static_cast<double>(y[i]) - ay[i]) <= fb)) forward_aten.add("forward vs ATen", xi, y[i], ay[i], fb);
    // ATen's gelu_backward is NaN from |x| ~ 1.8e19 on (its x^2 overflows and multiplies a 0): compared
    // where its x^2 is finite; the limits beyond are checked in their own test.
    if (static_cast<double>(xi) * xi <= kFloatMax) {
      const double bb = e.backward_ours + e.backward_aten;
      if (!(std::fabs(static_cast<double>(dy[i]) - ady[i]) <= bb)) {
        backward_aten.add("backward vs ATen", xi, dy[i], ady[i], bb);
      }
    }
  }
  EXPECT_EQ(forward_exact.count, 0) << loops.isa << ": " << forward_exact.first;
  EXPECT_EQ(backward_exact.count, 0) << loops.isa << ": " << backward_exact.first;
  EXPECT_EQ(forward_aten.count, 0) << loops.isa << ": " << forward_aten.first;
  EXPECT_EQ(backward_aten.count, 0) << loops.isa << ": " << backward_aten.first;
  EXPECT_EQ(aten_forward_exact.count, 0) << aten_forward_exact.first;
  EXPECT_EQ(aten_backward_exact.count, 0) << aten_backward_exact.first;
}

TEST(GeluTanhCpu, EveryVariantIsWithinItsBoundOfTheExactFunctionAndOfAten) {
  ASSERT_FALSE(loops_this_cpu_runs().empty());
  for (const Loops& loops : loops_this_cpu_runs()) check_variant_against_exact_and_aten(loops);
}

TEST(GeluTanhCpu, EveryVariantsExpIsWithinItsDocumentedError) {
  // Every 257th float in [-87, 0], against exp in double: relative error <= kExpErrorUnits u.
  std::vector<float> as;
  const uint32_t lowest = std::bit_cast<uint32_t>(gelu_tanh_kernels::kExpFlushBelow);
  for (uint32_t bits = 0x80000000u; bits <= lowest; bits += 257) as.push_back(std::bit_cast<float>(bits));
  as.push_back(gelu_tanh_kernels::kExpFlushBelow);
  // Below the flush point 0, and the specials.
  const float below[] = {std::nextafter(-87.0f, -100.0f), -87.5f, -100.0f, -1e30f, -std::numeric_limits<float>::infinity()};
  for (const Loops& loops : loops_this_cpu_runs()) {
    std::vector<float> out(as.size());
    loops.exp_nonpositive(as.data(), out.data(), static_cast<int64_t>(as.size()));
    int64_t bad = 0;
    std::string first;
    for (size_t i = 0; i < as.size(); ++i) {
      const double want = std::exp(static_cast<double>(as[i]));
      if (!(std::fabs(out[i] - want) <= kExpErrorUnits * kU * want)) {
        if (bad++ == 0) first = "exp(" + std::to_string(as[i]) + ") = " + std::to_string(out[i]);
      }
    }
    EXPECT_EQ(bad, 0) << loops.isa << ": " << first;
    float flushed[std::size(below)];
    loops.exp_nonpositive(below, flushed, static_cast<int64_t>(std::size(below)));
    for (size_t i = 0; i < std::size(below); ++i) EXPECT_EQ(flushed[i], 0.0f) << loops.isa << " at " << below[i];
    const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN()};
    float special_out[3];
    loops.exp_nonpositive(specials, special_out, 3);
    EXPECT_EQ(special_out[0], 1.0f) << loops.isa;
    EXPECT_EQ(special_out[1], 1.0f) << loops.isa;
    EXPECT_TRUE(std::isnan(special_out[2])) << loops.isa;
  }
}

TEST(GeluTanhCpu, InfinitiesAndNanGiveWhatAtenGives) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const torch::Tensor x = from_floats({inf, -inf, nan, -nan});
  const torch::Tensor aten_y = torch::gelu(x, "tanh");
  const torch::Tensor aten_dy = at::gelu_backward(torch::ones_like(x), x, "tanh");
  for (const Loops& loops : loops_this_cpu_runs()) {
    torch::Tensor y = torch::empty_like(x), dy = torch::empty_like(x);
    const torch::Tensor ones = torch::ones_like(x);
    loops.forward(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    loops.backward(ones.data_ptr<float>(), x.data_ptr<float>(), dy.data_ptr<float>(), x.numel());
    // equal_nan: NaN where ATen has NaN, the same infinity where it has one.
    EXPECT_TRUE(torch::allclose(y, aten_y, 0.0, 0.0, /*equal_nan=*/true)) << loops.isa << ": " << y << " vs " << aten_y;
    EXPECT_TRUE(torch::allclose(dy, aten_dy, 0.0, 0.0, /*equal_nan=*/true)) << loops.isa << ": " << dy << " vs " << aten_dy;
  }
}

TEST(GeluTanhCpu, HugeFiniteInputsGiveTheLimitsNotNan) {
  // Beyond |x| ~ 1.8e19 ATen's backward is NaN (0 * an overflowed x^2); the derivative is 1 on the
  // right and 0 on the left, and the forward x and -0, which ours gives exactly.
  const float big[] = {1e19f, 1e20f, 1e30f, std::numeric_limits<float>::max()};
  for (const Loops& loops : loops_this_cpu_runs()) {
    for (float b : big) {
      for (float x : {b, -b}) {
        float y = 0, dy = 0;
        const float one = 1.0f;
        loops.forward(&x, &y, 1);
        loops.backward(&one, &x, &dy, 1);
        EXPECT_EQ(y, x > 0 ? x : 0.0f) << loops.isa << " at " << x;
        EXPECT_EQ(dy, x > 0 ? 1.0f : 0.0f) << loops.isa << " at " << x;
      }
    }
  }
}

TEST(GeluTanhCpu, TensorsOfAnyShapeAndLayoutAndBothThreadCounts) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({37, 129}) * 4;  // odd sizes: the loops' vector remainders
  const torch::Tensor grad = torch::randn({37, 129});
  const torch::Tensor y = gelu_tanh_cpu_forward(x), dx = gelu_tanh_cpu_backward(grad, x);
  EXPECT_EQ(y.sizes(), x.sizes());
  // A transposed (non-contiguous) view gives the transposed result.
  EXPECT_TRUE(torch::equal(gelu_tanh_cpu_forward(x.t()), y.t()));
  EXPECT_TRUE(torch::equal(gelu_tanh_cpu_backward(grad.t(), x.t()), dx.t()));
  // Split across threads, each element is computed alone: the same bits.
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  const torch::Tensor big = torch::randn({4, 16384});
  const torch::Tensor two_threads = gelu_tanh_cpu_forward(big), two_threads_grad = gelu_tanh_cpu_backward(big, big);
  at::set_num_threads(1);
  EXPECT_TRUE(torch::equal(gelu_tanh_cpu_forward(big), two_threads));
  EXPECT_TRUE(torch::equal(gelu_tanh_cpu_backward(big, big), two_threads_grad));
  at::set_num_threads(threads);
  EXPECT_THROW(gelu_tanh_cpu_forward(x.to(torch::kDouble)), std::invalid_argument);
  EXPECT_THROW(gelu_tanh_cpu_backward(grad.narrow(0, 0, 3), x), std::invalid_argument);
}

TEST(GeluTanhCpu, OtherDtypesStayOnAtensOp) {
  torch::manual_seed(4);
  for (auto dtype : {torch::kBFloat16, torch::kDouble}) {
    const torch::Tensor x = (torch::randn({8, 64}) * 3).to(dtype);
    EXPECT_TRUE(torch::equal(gelu_tanh(x), torch::gelu(x, "tanh"))) << dtype;
  }
}

TEST(GeluTanhCpu, DoubleBackwardRunsOnAtensDifferentiableOp) {
  torch::manual_seed(5);
  const torch::Tensor base = torch::randn({6, 40}) * 3;
  auto first_and_second = [&](bool ours) {
    const torch::Tensor x = base.clone().requires_grad_(true);
    const torch::Tensor y = ours ? gelu_tanh(x) : torch::gelu(x, "tanh");
    const torch::Tensor g = torch::autograd::grad({y.sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    const torch::Tensor gg = torch::autograd::grad({g.sum()}, {x})[0];
    return std::make_pair(g.detach(), gg);
  };
  const auto [g_ours, gg_ours] = first_and_second(true);
  const auto [g_aten, gg_aten] = first_and_second(false);
  EXPECT_TRUE(torch::equal(g_ours, g_aten));
  EXPECT_TRUE(torch::equal(gg_ours, gg_aten));
}

// |a| @ |b| in double: the scale of a product's rounding and of an input error's effect.
torch::Tensor abs_mm(const torch::Tensor& a, const torch::Tensor& b) {
  return a.to(torch::kDouble).abs().mm(b.to(torch::kDouble).abs());
}

// gamma_k = k u / (1 - k u): a k-term float dot product's error relative to the sum of |terms|, in
// any order (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).
double gamma(int64_t k) { return static_cast<double>(k) * kU / (1.0 - static_cast<double>(k) * kU); }

void expect_within(const torch::Tensor& ours, const torch::Tensor& aten, const torch::Tensor& bound, const char* what) {
  const torch::Tensor excess = (ours.to(torch::kDouble) - aten.to(torch::kDouble)).abs() - bound;
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": max |difference| - bound";
}

TEST(GeluTanhCpu, MlpGradientsAgreeWithTheAtenMlpWithinThePropagatedBound) {
  // The MLP's forward uses the kernel; its output and every gradient agree with the same MLP on ATen's
  // op within what the GELU's per-element bound becomes through the linear layers, plus both sides'
  // matmul rounding (gamma_k of the |terms|).
  torch::manual_seed(6);
  const GptConfig config = testing::small_config(16, 16, 1, 2, 48);
  Mlp mlp(config);
  const int64_t C = config.n_embd, H = 4 * config.n_embd;
  const torch::Tensor x0 = torch::randn({3, 11, C}) * 2;  // wide enough to reach GELU's tails
  const torch::Tensor upstream = torch::randn({3, 11, C});

  struct Run {
    torch::Tensor out, dx, dfc_w, dfc_b, dproj_w, dproj_b;
  };
  auto run = [&](bool ours) {
    mlp->zero_grad();
    const torch::Tensor x = x0.clone().requires_grad_(true);
    const torch::Tensor out = ours ? mlp->forward(x) : mlp->c_proj(torch::gelu(mlp->c_fc(x), "tanh"));
    (out * upstream).sum().backward();
    return Run{out.detach(), x.grad(), mlp->c_fc->weight.grad().clone(), mlp->c_fc->bias.grad().clone(),
               mlp->c_proj->weight.grad().clone(), mlp->c_proj->bias.grad().clone()};
  };
  const Run ours = run(true), aten = run(false);

  // The forward is c_proj(gelu_tanh(c_fc(x))): the kernel, not ATen's op.
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(ours.out, mlp->c_proj(gelu_tanh(mlp->c_fc(x0)))));
  }

  // Per element of the hidden activation h = c_fc(x) (the same bits on both sides): the bounds on
  // |gelu_ours - gelu_aten| and, per unit of incoming gradient, on |gelu'_ours - gelu'_aten|.
  torch::NoGradGuard no_grad;
  const torch::Tensor h = mlp->c_fc(x0).reshape({-1, H}).contiguous();
  torch::Tensor forward_bound = torch::empty(h.sizes(), torch::kDouble);
  torch::Tensor backward_bound = torch::empty(h.sizes(), torch::kDouble);
  const float* hp = h.data_ptr<float>();
  for (int64_t i = 0; i < h.numel(); ++i) {
    const Exact e = exact(hp[i]);
    forward_bound.data_ptr<double>()[i] = e.forward_ours + e.forward_aten;
    backward_bound.data_ptr<double>()[i] = e.backward_ours + e.backward_aten;
  }
  const torch::Tensor g = torch::gelu(h, "tanh");
  const torch::Tensor W_proj = mlp->c_proj->weight, W_fc = mlp->c_fc->weight;  // (C, H), (H, C)
  const torch::Tensor R = upstream.reshape({-1, C}), X = x0.reshape({-1, C});
  const int64_t N = R.size(0);

  // out = g W_proj^T + b: the GELU's difference through |W_proj|, and each side's matmul and bias add.
  const torch::Tensor out_bound = forward_bound.mm(W_proj.to(torch::kDouble).abs().t()) +
                                  2 * gamma(H + 1) * (abs_mm(g, W_proj.t()) + mlp->c_proj->bias.to(torch::kDouble).abs());
  expect_within(ours.out.reshape({-1, C}), aten.out.reshape({-1, C}), out_bound, "MLP output");

  // d W_proj = R^T g.
  expect_within(ours.dproj_w, aten.dproj_w, abs_mm(R.t(), forward_bound) + 2 * gamma(N) * abs_mm(R.t(), g),
                "c_proj weight gradient");
  EXPECT_TRUE(torch::equal(ours.dproj_b, aten.dproj_b));  // sum of R: no GELU in it

  // dh = (R W_proj) * gelu'(h); dg = R W_proj is the same bits on both sides, the bound scales by |dg|.
  const torch::Tensor dg = R.mm(W_proj);
  const torch::Tensor dh = at::gelu_backward(dg, h, "tanh");
  const torch::Tensor dh_bound = backward_bound * dg.to(torch::kDouble).abs();
  // d W_fc = dh^T X, d b_fc = sum of dh, dx = dh W_fc.
  expect_within(ours.dfc_w, aten.dfc_w, abs_mm(dh_bound.t(), X) + 2 * gamma(N) * abs_mm(dh.t(), X),
                "c_fc weight gradient");
  expect_within(ours.dfc_b, aten.dfc_b, dh_bound.sum(0) + 2 * gamma(N) * dh.to(torch::kDouble).abs().sum(0),
                "c_fc bias gradient");
  expect_within(ours.dx.reshape({-1, C}), aten.dx.reshape({-1, C}),
                abs_mm(dh_bound, W_fc) + 2 * gamma(H) * abs_mm(dh, W_fc), "input gradient");
}

TEST(GeluTanhCpu, Bf16AutocastMlpIsTheAtenMlp) {
  // Under CPU autocast c_fc's output is bf16, which stays on ATen's op: the same bits as before.
  torch::manual_seed(7);
  Mlp mlp(testing::small_config(16, 16, 1, 2, 32));
  const torch::Tensor x = torch::randn({2, 5, 32});
  torch::Tensor ours, aten;
  {
    at::autocast::set_autocast_enabled(torch::kCPU, true);
    at::autocast::set_autocast_dtype(torch::kCPU, torch::kBFloat16);
    ours = mlp->forward(x);
    // ATen's linear, as Mlp::forward multiplies (model/gpt.cpp's linear_of), around ATen's GELU.
    aten = torch::linear(torch::gelu(torch::linear(x, mlp->c_fc->weight, mlp->c_fc->bias), "tanh"), mlp->c_proj->weight,
                         mlp->c_proj->bias);
    at::autocast::set_autocast_enabled(torch::kCPU, false);
    at::autocast::clear_cache();
  }
  EXPECT_EQ(ours.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(ours, aten));
}

}  // namespace
}  // namespace mygpt::gelu_tanh_cpu_test
