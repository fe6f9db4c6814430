// LayerNorm's CUDA kernels (model/layer_norm_cuda.h, label `cuda`) against LayerNorm computed in double:
// the 16-bit output, and the input, weight and bias gradients, each within a bound derived from the
// kernels' fp32 arithmetic (and, for the output, the 16-bit rounding). Skips with one line where no CUDA
// GPU is visible.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "model/attention_backend.h"
#include "model/gpt.h"
#include "model/layer_norm_cuda.h"

namespace mygpt::cuda_layer_norm_test {
namespace {

#define REQUIRE_CUDA_NORM_KERNEL()                                                                       \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible: CUDA LayerNorm test skipped";  \
  if (!layer_norm_cuda_kernel_built()) GTEST_SKIP() << "this build has no CUDA LayerNorm kernel (no nvcc)"

const torch::Device kCuda(torch::kCUDA, 0);
constexpr double kU = 1.0 / (1 << 24);  // fp32's unit roundoff

// Every element of |got - want| within bound (all double, same shape); names the worst element.
void expect_within(const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& bound,
                   const std::string& what) {
  const auto excess = (got.to(torch::kDouble) - want).abs() - bound;
  const auto worst = excess.flatten().argmax().item<int64_t>();
  EXPECT_LE(excess.flatten()[worst].item<double>(), 0.0)
      << what << ": element " << worst << " is " << got.to(torch::kDouble).flatten()[worst].item<double>()
      << ", double gives " << want.flatten()[worst].item<double>() << ", bound "
      << bound.flatten()[worst].item<double>();
}

struct Case {
  std::vector<int64_t> shape;  // the last size is the width
  at::ScalarType type;
  bool misaligned = false;  // x starts 4 bytes into its allocation: the kernels' one-element accesses
  // The branch and both incoming gradients (dy, and the sum's) start one element into theirs, x aligned:
  // the kernels' alignment checks on arrays other than x (the plain backward sees only dy misaligned).
  bool misaligned_others = false;
};

// A copy of t on the GPU that starts one element into its allocation (a view with a storage offset).
torch::Tensor offset_copy(const torch::Tensor& t) {
  auto storage = torch::empty({t.numel() + 1}, t.options().device(kCuda));
  auto view = storage.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t);
  return view;
}

std::string name(const Case& c) {
  std::string s = c.type == at::kBFloat16 ? "bf16" : "fp16";
  for (auto n : c.shape) s += " " + std::to_string(n);
  if (c.misaligned) s += " misaligned";
  return c.misaligned_others ? s + " misaligned branch and gradients" : s;
}

// fused: the residual add fused in (add_layer_norm_cuda_lowp), with a gradient for the sum too.
void check(const Case& c, bool fused) {
  SCOPED_TRACE(name(c) + (fused ? " with the residual add" : ""));
  const int64_t width = c.shape.back();
  torch::manual_seed(7);
  // A mean away from zero and a spread unlike one, so that neither hides an error in the moments.
  const auto x0 = (torch::randn(c.shape, torch::kDouble) * 1.7 + 0.4).to(torch::kFloat);
  const auto w0 = (torch::randn({width}, torch::kDouble) * 0.5 + 1.0).to(torch::kFloat);
  const auto b0 = (torch::randn({width}, torch::kDouble) * 0.1).to(torch::kFloat);
  const auto dy = torch::randn(c.shape, torch::kDouble).to(c.type);
  const auto branch0 = (torch::randn(c.shape, torch::kDouble) * 0.8).to(c.type);
  const auto dsum = torch::randn(c.shape, torch::kDouble).to(torch::kFloat);
  // What the norm normalizes: the fp32 sum is one IEEE addition, the same on the CPU and the GPU.
  const auto normalized = fused ? x0 + branch0.to(torch::kFloat) : x0;

  auto x = c.misaligned ? offset_copy(x0) : x0.to(kCuda);
  x.requires_grad_();
  auto w = w0.to(kCuda).requires_grad_();
  auto b = b0.to(kCuda).requires_grad_();
  auto branch = c.misaligned_others ? offset_copy(branch0) : branch0.to(kCuda);
  branch.requires_grad_();
  const auto gpu_dy = c.misaligned_others ? offset_copy(dy) : dy.to(kCuda);
  const auto gpu_dsum = c.misaligned_others ? offset_copy(dsum) : dsum.to(kCuda);
  ASSERT_TRUE(layer_norm_cuda_applies(x, w, b, c.type));
  torch::Tensor y;
  if (fused) {
    torch::Tensor sum;
    std::tie(sum, y) = add_layer_norm_cuda_lowp(x, branch, w, b, 1e-5, c.type);
    ASSERT_EQ(sum.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::equal(sum.detach().cpu(), normalized)) << "x + branch";
    torch::autograd::backward({sum, y}, {gpu_dsum, gpu_dy});
  } else {
    y = layer_norm_cuda_lowp(x, w, b, 1e-5, c.type);
    y.backward(gpu_dy);
  }
  ASSERT_EQ(y.scalar_type(), c.type);
  ASSERT_EQ(y.sizes(), x.sizes());

  // The reference: the same values in double.
  auto x64 = normalized.to(torch::kDouble).requires_grad_();
  auto w64 = w0.to(torch::kDouble).requires_grad_();
  auto b64 = b0.to(torch::kDouble).requires_grad_();
  const auto y64 = torch::layer_norm(x64, {width}, w64, b64, 1e-5);
  y64.backward(dy.to(torch::kDouble));

  torch::NoGradGuard no_grad;
  const auto xd = normalized.to(torch::kDouble);
  const auto mean = xd.mean(-1, true);
  const auto rstd = 1.0 / torch::sqrt(xd.var(-1, /*unbiased=*/false, /*keepdim=*/true) + 1e-5);
  const auto xhat = (xd - mean) * rstd;
  const auto wd = w0.to(torch::kDouble), bd = b0.to(torch::kDouble), dyd = dy.to(torch::kDouble);
  // xhat in fp32: the mean and the variance are sums of `width` terms, the rest a few roundings: a
  // relative error of about (width + 8) u of |xhat| + |mean| * rstd (the mean's error is of |x|'s size).
  const double chain = 2.0 * (width + 16) * kU;
  const auto xhat_error = chain * (xhat.abs() + mean.abs() * rstd);
  // Output: that error through the weight, then one rounding to 16 bits (half a unit in the last place:
  // 2^-9 relative for bf16, 2^-12 for fp16; twice that, as the fp32 value may sit on the other side).
  const double lowp_ulp = c.type == at::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
  const auto y_error = xhat_error * wd.abs() + chain * (xhat * wd).abs();
  expect_within(y.cpu(), y64.detach(), lowp_ulp * (y64.detach().abs() + y_error) + y_error, "output");

  // dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w: the two means are sums of `width` terms
  // (and rstd carries the variance's error); xhat's own error enters through both xhat terms.
  const auto g = dyd * wd;
  const auto g_xhat = (g * xhat).mean(-1, true);
  const auto dx_scale = rstd * (g.abs() + g.abs().mean(-1, true) + xhat.abs() * (g * xhat).abs().mean(-1, true));
  const auto dx_bound = 2.0 * chain * dx_scale +
                        rstd * (xhat_error * g_xhat.abs() + xhat.abs() * (g.abs() * xhat_error).mean(-1, true));
  if (fused) {
    // x's gradient adds the sum's own (one more rounding); the branch gets it rounded to 16 bits.
    const auto want = x64.grad() + dsum.to(torch::kDouble);
    const auto bound = dx_bound + kU * want.abs();
    expect_within(x.grad().cpu(), want, bound, "input gradient (with the sum's)");
    expect_within(branch.grad().cpu(), want, lowp_ulp * (want.abs() + bound) + bound, "branch gradient");
  } else {
    expect_within(x.grad().cpu(), x64.grad(), dx_bound, "input gradient");
  }
  // dw = sum over rows of dy xhat, db = sum over rows of dy: each a sum of `rows` terms.
  const int64_t rows = x0.numel() / width;
  const auto rows_dims = [&] {
    std::vector<int64_t> d;
    for (int64_t i = 0; i + 1 < x0.dim(); ++i) d.push_back(i);
    return d;
  }();
  const double sum_error = 2.0 * (rows + 16) * kU;
  const auto dw_bound = sum_error * (dyd * xhat).abs().sum(rows_dims) + (dyd.abs() * xhat_error).sum(rows_dims);
  expect_within(w.grad().cpu(), w64.grad(), dw_bound, "weight gradient");
  expect_within(b.grad().cpu(), b64.grad(), sum_error * dyd.abs().sum(rows_dims), "bias gradient");
}

// Widths of whole fours with aligned arrays take the kernels' four-wide accesses (33 x 100 included);
// width 1, width 770 (also with several rows per warp: 5000 rows) and the misaligned arrays take the
// one-element ones.
TEST(CudaLayerNormKernel, MatchesDoublePrecisionForwardAndBackward) {
  REQUIRE_CUDA_NORM_KERNEL();
  for (const Case& c : {Case{{4100, 768}, at::kBFloat16}, Case{{4100, 768}, at::kHalf}, Case{{4, 7, 96}, at::kBFloat16},
                        Case{{33, 100}, at::kBFloat16}, Case{{5, 1}, at::kBFloat16}, Case{{1500, 2048}, at::kBFloat16},
                        Case{{3, 6144}, at::kHalf}, Case{{40000, 64}, at::kBFloat16}, Case{{65, 770}, at::kBFloat16},
                        Case{{5000, 770}, at::kHalf}, Case{{300, 768}, at::kHalf, /*misaligned=*/true},
                        Case{{300, 768}, at::kBFloat16, /*misaligned=*/false, /*misaligned_others=*/true}}) {
    check(c, /*fused=*/false);
    check(c, /*fused=*/true);
  }
}

TEST(CudaLayerNormKernel, IsTakenOnlyWhereItApplies) {
  REQUIRE_CUDA_NORM_KERNEL();
  const auto x = torch::randn({4, 8}, torch::TensorOptions(kCuda));
  const auto w = torch::ones({8}, x.options()), b = torch::zeros({8}, x.options());
  EXPECT_TRUE(layer_norm_cuda_applies(x, w, b, at::kBFloat16));
  EXPECT_FALSE(layer_norm_cuda_applies(x, w, b, at::kFloat));       // no 16-bit output asked for
  EXPECT_FALSE(layer_norm_cuda_applies(x.cpu(), w, b, at::kBFloat16));
  EXPECT_FALSE(layer_norm_cuda_applies(x.to(torch::kBFloat16), w, b, at::kBFloat16));
  EXPECT_FALSE(layer_norm_cuda_applies(x, w, torch::Tensor(), at::kBFloat16));  // no bias: ATen's
  const auto wide = torch::randn({2, 6145}, x.options());
  EXPECT_FALSE(layer_norm_cuda_applies(wide, torch::ones({6145}, x.options()), torch::zeros({6145}, x.options()),
                                       at::kBFloat16));
}

GptConfig small_gpt2(int64_t n_embd, int64_t n_head, double dropout) {
  GptConfig config;
  config.n_layer = 2;
  config.n_head = n_head;
  config.n_embd = n_embd;
  config.block_size = 64;
  config.vocab_size = 512;
  config.dropout = dropout;
  return config;
}

// One forward and backward under 16-bit autocast; returns the loss.
double autocast_loss_backward(Gpt& m, at::ScalarType type, const torch::Tensor& idx, const torch::Tensor& targets) {
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, type);
  auto loss = m->loss(idx, targets);
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  loss.backward();
  return loss.item<double>();
}

// A GPT-2 block stack with the kernel against the same model on ATen's LayerNorm, under 16-bit autocast:
// the LayerNorm outputs are the same 16-bit values except where fp32 rounding sits on a 16-bit boundary
// (there they differ by one unit: 2^-8 relative in bf16, 2^-11 in fp16), so the loss and every
// gradient's norm agree to a few such units (8 allowed: two layers, each adding its flips), and every
// gradient is finite. Width 128 takes the four-wide accesses, width 38 the one-element ones; the model
// has two blocks, so one ln_1 takes the deferred MLP add (add_then_forward) and ln_f the last one's.
class CudaLayerNormModel : public ::testing::TestWithParam<std::tuple<int64_t, at::ScalarType>> {};

TEST_P(CudaLayerNormModel, TrainsAsAtensLayerNormDoes) {
  REQUIRE_CUDA_NORM_KERNEL();
  const auto [width, type] = GetParam();
  const GptConfig config = small_gpt2(width, 2, 0.0);
  torch::manual_seed(3);
  Gpt a(config), b(config, GptRuntime{.cuda_norm_kernel = true});
  {
    torch::NoGradGuard no_grad;
    auto pa = a->parameters(), pb = b->parameters();
    for (size_t i = 0; i < pa.size(); ++i) pb[i].copy_(pa[i]);
  }
  a->to(kCuda);
  b->to(kCuda);
  const auto idx = torch::randint(0, config.vocab_size, {4, 64}, torch::TensorOptions(kCuda).dtype(torch::kLong));
  const auto targets = torch::randint(0, config.vocab_size, {4, 64}, idx.options());
  const double unit = type == at::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
  const double la = autocast_loss_backward(a, type, idx, targets), lb = autocast_loss_backward(b, type, idx, targets);
  EXPECT_NEAR(la, lb, 8.0 * unit * std::abs(la)) << "losses with ATen's LayerNorm and with the kernel";
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& item : pa) {
    const auto ga = item.value().grad(), gb = pb[item.key()].grad();
    ASSERT_TRUE(gb.defined()) << item.key();
    EXPECT_TRUE(torch::isfinite(gb).all().item<bool>()) << item.key();
    const double na = ga.norm().item<double>(), nb = gb.norm().item<double>();
    EXPECT_NEAR(na, nb, 8.0 * unit * na + 1e-6) << item.key() << ": gradient norms";
  }
}

INSTANTIATE_TEST_SUITE_P(WidthsAndTypes, CudaLayerNormModel,
                         ::testing::Values(std::make_tuple(int64_t{128}, at::kBFloat16),
                                           std::make_tuple(int64_t{128}, at::kHalf),
                                           std::make_tuple(int64_t{38}, at::kBFloat16),
                                           std::make_tuple(int64_t{38}, at::kHalf)),
                         [](const auto& info) {
                           return "Width" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == at::kBFloat16 ? "Bf16" : "Fp16");
                         });

// The attention kernel for a scope, back to PyTorch's order after it.
struct AttentionFor {
  explicit AttentionFor(AttentionBackend backend) { prefer_attention_backend(backend, kCuda); }
  ~AttentionFor() { prefer_attention_backend(AttentionBackend::automatic, kCuda); }
};

// --recompute with the kernel: backward reruns a block (or its MLP) on autograd's thread under the
// first run's autocast and random state, and a recomputed block gets the whole stream (x + the previous
// block's MLP output) where the plain path fuses that add into ln_1. The fused sum is one IEEE addition
// either way and each kernel's arithmetic is fixed, so loss and gradients are the plain path's bit for
// bit, dropout included, as on the CPU (tests/test_recompute.cpp). Attention runs PyTorch's math kernel
// (matmuls, softmax, dropout: a fixed order of operations): cuDNN's attention, PyTorch's first choice on
// Hopper, accumulates its backward with atomics in whatever order the blocks finish, so two identical
// runs of it differ in the last bits (seen on an H100, 2026-11-26), which would fail this comparison
// for no fault of recomputation or of the kernel.
TEST(CudaLayerNormKernel, RecomputeGivesThePlainPathsGradientsBitForBit) {
  REQUIRE_CUDA_NORM_KERNEL();
  const AttentionFor deterministic(AttentionBackend::math);
  const GptConfig config = small_gpt2(128, 4, 0.1);
  auto run = [&](Recompute mode, std::vector<torch::Tensor>& grads) {
    torch::manual_seed(5);
    Gpt m(config, GptRuntime{.recompute = mode, .cuda_norm_kernel = true});
    m->to(kCuda);
    m->train();
    const auto idx = torch::randint(0, config.vocab_size, {4, 64}, torch::TensorOptions(kCuda).dtype(torch::kLong));
    const auto targets = torch::randint(0, config.vocab_size, {4, 64}, idx.options());
    const double loss = autocast_loss_backward(m, at::kBFloat16, idx, targets);
    for (const auto& p : m->parameters()) grads.push_back(p.grad().cpu());
    return loss;
  };
  std::vector<torch::Tensor> plain;
  const double plain_loss = run(Recompute::none, plain);
  for (Recompute mode : {Recompute::mlp, Recompute::block}) {
    SCOPED_TRACE(mode == Recompute::mlp ? "--recompute mlp" : "--recompute block");
    std::vector<torch::Tensor> recomputed;
    EXPECT_EQ(plain_loss, run(mode, recomputed));
    ASSERT_EQ(plain.size(), recomputed.size());
    for (size_t k = 0; k < plain.size(); ++k) {
      EXPECT_TRUE(torch::equal(plain[k], recomputed[k])) << "parameter " << k;
      EXPECT_GT(plain[k].abs().max().item<double>(), 0) << "parameter " << k;
    }
  }
}

}  // namespace
}  // namespace mygpt::cuda_layer_norm_test
