// model/decode_linear against the reference it replaces in a decoding step (torch::linear), computed in
// double precision, for every instruction set's code this CPU can run; and when it declines to apply.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/decode_linear.h"

namespace mygpt::decode_linear_test {
namespace {

const std::vector<DecodeLinearIsa> kIsas = {DecodeLinearIsa::avx512, DecodeLinearIsa::avx2, DecodeLinearIsa::baseline};

std::string name_of(DecodeLinearIsa isa) {
  switch (isa) {
    case DecodeLinearIsa::avx512: return "avx512";
    case DecodeLinearIsa::avx2: return "avx2";
    case DecodeLinearIsa::baseline: return "baseline";
  }
  return "?";
}

// The forward error bound of a float sum of products (Higham, Accuracy and Stability of Numerical
// Algorithms, 3.1): each lane is an inner product of m = ceil(in / 16) terms (the zero padding of the
// tail is exact), within gamma_m of its exact value with or without FMA; then 4 levels of the lane tree
// and the bias add a rounding each, so |computed - exact| <= gamma_k * (sum |w_i x_i| + |b|) with
// k = m + 5 and gamma_k = k u / (1 - k u), u = 2^-24. The reference is the same sum in double (its own
// error, below 1e-15 relative, is negligible beside fp32's).
void expect_within_fp32_bound(const torch::Tensor& got, const torch::Tensor& x, const torch::Tensor& w,
                              const torch::Tensor& b, const std::string& what) {
  const auto xd = x.to(torch::kDouble), wd = w.to(torch::kDouble);
  auto exact = torch::linear(xd, wd, b.defined() ? b.to(torch::kDouble) : torch::Tensor{});
  auto magnitude = torch::linear(xd.abs(), wd.abs(), b.defined() ? b.to(torch::kDouble).abs() : torch::Tensor{});
  const double u = std::ldexp(1.0, -24);
  const double k = std::ceil(static_cast<double>(w.size(1)) / 16.0) + 5.0;
  const double gamma = k * u / (1.0 - k * u);
  const auto excess = (got.to(torch::kDouble) - exact).abs() - gamma * magnitude;
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": an output outside fp32's error bound (gamma_" << k << ")";
}

TEST(DecodeLinear, MatchesTheDoublePrecisionLinearWithinFp32sBoundOnEveryInstructionSetHere) {
  torch::manual_seed(3);
  // Widths with and without a 16-input tail, output counts that leave rows after the blocks of 16, 8, 4.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{768, 2304}, {37, 19}, {16, 1}, {5, 33}, {3072, 768}, {64, 101}};
  int ran = 0;
  for (const auto isa : kIsas) {
    if (!decode_linear_isa_runs_here(isa)) {
      std::cout << "decode_linear " << name_of(isa) << ": this CPU lacks it, not tested here\n";
      continue;
    }
    ++ran;
    for (const auto& [in, out] : shapes) {
      for (int64_t rows = 1; rows <= kDecodeLinearMaxRows; ++rows) {
        for (const bool with_bias : {true, false}) {
          const auto x = torch::randn({rows, 1, in});  // (B, T=1, C) as a decoding step has it
          const auto w = torch::randn({out, in}) * 0.05;
          const auto b = with_bias ? torch::randn({out}) : torch::Tensor{};
          ASSERT_TRUE(decode_linear_applies(x, w, b));
          const auto y = decode_linear(x, w, b, isa);
          ASSERT_EQ(y.sizes(), torch::IntArrayRef({rows, 1, out}));
          expect_within_fp32_bound(y, x, w, b,
                                   name_of(isa) + " " + std::to_string(rows) + "x" + std::to_string(in) + " -> " +
                                       std::to_string(out) + (with_bias ? " with bias" : ""));
        }
      }
    }
  }
  EXPECT_GT(ran, 0);
}

TEST(DecodeLinear, RowsAreIndependentOfTheirCompany) {
  // A row's outputs do not depend on which other rows share its pass (the sampled rows of a batch).
  torch::manual_seed(4);
  const auto w = torch::randn({45, 70}), b = torch::randn({45}), x = torch::randn({4, 70});
  const auto together = decode_linear(x, w, b);
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_TRUE(torch::equal(decode_linear(x.narrow(0, r, 1), w, b), together.narrow(0, r, 1))) << "row " << r;
  }
}

TEST(DecodeLinear, FusedMultiplyAddCodeAgreesBitForBitAcrossVectorWidths) {
  // AVX-512 and AVX2 run the same 16 lanes in the same order, both with FMA: the header promises the
  // same numbers, so a CPU of either kind decodes the same tokens.
  if (!decode_linear_isa_runs_here(DecodeLinearIsa::avx512) || !decode_linear_isa_runs_here(DecodeLinearIsa::avx2)) {
    GTEST_SKIP() << "this CPU lacks AVX-512 or AVX2: nothing to compare";
  }
  torch::manual_seed(5);
  const auto w = torch::randn({300, 777}), b = torch::randn({300});
  for (int64_t rows = 1; rows <= kDecodeLinearMaxRows; ++rows) {
    const auto x = torch::randn({rows, 777});
    EXPECT_TRUE(torch::equal(decode_linear(x, w, b, DecodeLinearIsa::avx512), decode_linear(x, w, b, DecodeLinearIsa::avx2)))
        << rows << " rows";
  }
}

TEST(DecodeLinear, DeclinesWhatItDoesNotCompute) {
  const auto w = torch::randn({8, 32}), b = torch::randn({8}), x = torch::randn({1, 32});
  EXPECT_FALSE(decode_linear_applies(torch::randn({kDecodeLinearMaxRows + 1, 32}), w, b)) << "more rows than a step";
  EXPECT_FALSE(decode_linear_applies(x.to(torch::kBFloat16), w, b)) << "bf16 input";
  EXPECT_FALSE(decode_linear_applies(x, w.to(torch::kDouble), b)) << "double weight";
  EXPECT_FALSE(decode_linear_applies(x, torch::randn({32, 8}).t(), b)) << "a column-major weight";
  EXPECT_FALSE(decode_linear_applies(torch::randn({1, 31}), w, b)) << "widths that differ";
  EXPECT_FALSE(decode_linear_applies(x, w, torch::randn({7}))) << "a bias of another length";
  EXPECT_FALSE(decode_linear_applies(x, torch::randn({8, 32}).requires_grad_(), b)) << "a gradient to record";
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(decode_linear_applies(x, torch::randn({8, 32}).requires_grad_(), b)) << "no gradient recorded";
  }
  {
    at::autocast::set_autocast_enabled(at::kCPU, true);
    const bool applies = decode_linear_applies(x, w, b);
    at::autocast::set_autocast_enabled(at::kCPU, false);
    EXPECT_FALSE(applies) << "under autocast, where torch::linear computes in bf16";
  }
  EXPECT_THROW(decode_linear(torch::randn({kDecodeLinearMaxRows + 1, 32}), w, b), std::logic_error);
}

}  // namespace
}  // namespace mygpt::decode_linear_test
