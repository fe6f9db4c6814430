// The CUDA fast path of the chunked LM loss (label `cuda`): the fused softmax cross-entropy kernel and
// the fp32-accumulating head gradient, each against the ATen path they replace (LmLossOptions
// cuda_kernel false) on the same GPU. Skips with one line where no CUDA GPU is visible.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "model/chunked_lm_loss.h"
#include "model/gpt.h"
#include "model/lm_loss_cuda.h"

namespace mygpt::cuda_loss_test {
namespace {

#define REQUIRE_CUDA_KERNEL()                                                                        \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible: CUDA loss test skipped";   \
  if (!lm_loss_cuda_kernel_built()) GTEST_SKIP() << "this build has no CUDA loss kernel (no nvcc)"

const torch::Device kCuda(torch::kCUDA, 0);

struct Grads {
  torch::Tensor loss, grad_hidden, grad_weight;
};

Grads run(const torch::Tensor& hidden0, const torch::Tensor& weight0, const torch::Tensor& targets,
          const LmLossOptions& options, at::ScalarType autocast_dtype) {
  auto hidden = hidden0.detach().clone().requires_grad_();
  auto weight = weight0.detach().clone().requires_grad_();
  torch::Tensor loss;
  {
    // kFloat: no autocast; kBFloat16 or kHalf: autocast to it.
    at::autocast::set_autocast_enabled(at::kCUDA, autocast_dtype != at::kFloat);
    at::autocast::set_autocast_dtype(at::kCUDA, autocast_dtype == at::kFloat ? at::kBFloat16 : autocast_dtype);
    loss = chunked_lm_loss(hidden, weight, targets, options);
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
  }
  (3.0 * loss).backward();
  return {loss.detach(), hidden.grad(), weight.grad()};
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double relative, const char* what) {
  const double scale = b.abs().max().item<double>();
  const double diff = (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().max().item<double>();
  EXPECT_LE(diff, relative * scale + 1e-7) << what << ": max difference " << diff << " at scale " << scale;
}

struct Shape {
  int64_t rows, vocab, width, chunk_rows;
};

// GPT-2's padded vocabulary (16-byte loads), a character vocabulary (scalar loads, short rows), an odd
// vocabulary, and chunks that do not divide the rows.
class CudaLossKernel : public ::testing::TestWithParam<Shape> {};

// Both paths on the same random head inputs of shape `s`.
std::pair<Grads, Grads> aten_and_kernel(const Shape& s, uint64_t seed, at::ScalarType autocast_dtype) {
  torch::manual_seed(seed);
  const auto hidden = torch::randn({s.rows, s.width}, kCuda);
  const auto weight = 0.5 * torch::randn({s.vocab, s.width}, kCuda);
  const auto targets = torch::randint(s.vocab, {s.rows}, torch::TensorOptions().dtype(torch::kLong).device(kCuda));
  return {run(hidden, weight, targets, {.chunk_rows = s.chunk_rows, .cuda_kernel = false}, autocast_dtype),
          run(hidden, weight, targets, {.chunk_rows = s.chunk_rows, .cuda_kernel = true}, autocast_dtype)};
}

TEST_P(CudaLossKernel, Fp32EqualsTheAtenPath) {
  REQUIRE_CUDA_KERNEL();
  const auto [aten, kernel] = aten_and_kernel(GetParam(), 1, at::kFloat);
  EXPECT_NEAR(kernel.loss.item<double>(), aten.loss.item<double>(), 1e-5 * std::abs(aten.loss.item<double>()));
  expect_close(kernel.grad_hidden, aten.grad_hidden, 1e-5, "fp32 grad hidden");
  expect_close(kernel.grad_weight, aten.grad_weight, 1e-5, "fp32 grad weight");
}

TEST_P(CudaLossKernel, Bf16AutocastEqualsTheAtenPath) {
  REQUIRE_CUDA_KERNEL();
  const auto [aten, kernel] = aten_and_kernel(GetParam(), 2, at::kBFloat16);
  // Both read the same bf16 logits and sum in fp32: the loss agrees to fp32 rounding; the gradients were
  // rounded to bf16 on both paths, then summed (fp32 accumulation inside cuBLAS vs a bf16 product added).
  EXPECT_NEAR(kernel.loss.item<double>(), aten.loss.item<double>(), 1e-4 * std::abs(aten.loss.item<double>()));
  EXPECT_EQ(kernel.grad_weight.scalar_type(), torch::kFloat);
  expect_close(kernel.grad_hidden, aten.grad_hidden, 2e-2, "bf16 grad hidden");
  expect_close(kernel.grad_weight, aten.grad_weight, 2e-2, "bf16 grad weight");
}

TEST_P(CudaLossKernel, Fp16AutocastEqualsTheAtenPath) {
  REQUIRE_CUDA_KERNEL();
  // Under fp16 both paths hold the gradient of the SUM of the rows' losses in fp16 (entries in [-1, 1]) and
  // divide by the rows in fp32 (model/chunked_lm_loss.cpp): fp16's rounding, no flushing.
  const auto [aten, kernel] = aten_and_kernel(GetParam(), 3, at::kHalf);
  EXPECT_NEAR(kernel.loss.item<double>(), aten.loss.item<double>(), 1e-4 * std::abs(aten.loss.item<double>()));
  EXPECT_EQ(kernel.grad_weight.scalar_type(), torch::kFloat);
  expect_close(kernel.grad_hidden, aten.grad_hidden, 5e-3, "fp16 grad hidden");
  expect_close(kernel.grad_weight, aten.grad_weight, 5e-3, "fp16 grad weight");
  const auto [fp32, unused] = aten_and_kernel(GetParam(), 3, at::kFloat);
  expect_close(kernel.grad_weight, fp32.grad_weight, 2e-2, "fp16 kernel vs fp32 grad weight");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaLossKernel,
                         ::testing::Values(Shape{300, 50304, 64, 128}, Shape{257, 65, 32, 100},
                                           Shape{64, 1001, 48, 64}, Shape{33, 8, 16, 7}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           const Shape& s = info.param;
                           return "rows" + std::to_string(s.rows) + "_vocab" + std::to_string(s.vocab) + "_chunk" +
                                  std::to_string(s.chunk_rows);
                         });

TEST(CudaLossKernelRows, PerRowLossesAndNonFiniteLogits) {
  REQUIRE_CUDA_KERNEL();
  torch::manual_seed(3);
  auto logits = torch::randn({5, 40}, kCuda);
  const auto targets = torch::tensor({0, 39, 7, 3, 12}, torch::TensorOptions().dtype(torch::kLong).device(kCuda));
  logits[3][5] = std::numeric_limits<float>::quiet_NaN();
  const auto expected = torch::nn::functional::cross_entropy(
      logits, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  auto losses = torch::empty({5}, logits.options());
  auto work = logits.clone();
  lm_loss_rows_cuda_(work, targets, losses, 1.0, /*write_grad=*/false);
  EXPECT_TRUE(torch::isnan(losses[3]).item<bool>()) << "a NaN logit must give a NaN loss (the step is then skipped)";
  const auto finite = torch::tensor({0, 1, 2, 4}, targets.options());
  EXPECT_TRUE(torch::allclose(losses.index_select(0, finite), expected.index_select(0, finite), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(work, logits, 0, 0, /*equal_nan=*/true))
      << "without write_grad the logits are left as they were";
}

TEST(CudaLossKernelModel, Bf16GptLossAndGradientsEqualTheAtenPath) {
  REQUIRE_CUDA_KERNEL();
  GptConfig config = preset_config("tiny");
  config.vocab_size = 50304;
  auto grads_with = [&](bool kernel) {
    torch::manual_seed(4);
    Gpt model(config, GptRuntime{.loss = {.chunk_rows = 0, .cuda_kernel = kernel}});
    model->to(kCuda);
    const auto idx = torch::randint(50304, {4, 32}, torch::TensorOptions().dtype(torch::kLong).device(kCuda));
    const auto targets = torch::randint(50304, {4, 32}, idx.options());
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    auto loss = model->loss(idx, targets);
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    loss.backward();
    return std::make_pair(loss.item<double>(), model->wte->weight.grad().clone());
  };
  const auto [aten_loss, aten_grad] = grads_with(false);
  const auto [kernel_loss, kernel_grad] = grads_with(true);
  EXPECT_NEAR(kernel_loss, aten_loss, 1e-4 * aten_loss);
  expect_close(kernel_grad, aten_grad, 2e-2, "token embedding gradient");
}

}  // namespace
}  // namespace mygpt::cuda_loss_test
