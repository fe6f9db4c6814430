// cuDNN's attention kernel against flash (CTest label `cuda`; skips with one line without a GPU), on the
// model's own q/k/v: views of one c_attn output, split and transposed (non-contiguous), bf16, causal.
// Forward and the gradient reaching that output (q's, k's and v's gradients at once).
//
// Bounds from bf16 arithmetic (unit roundoff u = 2^-8); both kernels accumulate in fp32. The output
// rounds twice to bf16 on its way (the probabilities before the second product, the output), a gradient
// three times (probabilities, dS, the gradient): each kernel is within 2u (output) and 3u (gradient) of
// an fp32 reference, norm-wise, so the two within 4u and 6u of each other.
#include <ATen/SDPBackend.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>

#include "model/attention_backend.h"

namespace mygpt::cuda_attention_test {
namespace {

struct Attention {
  torch::Tensor out, grad;  // fp32 copies
  at::SDPBackend backend;
};

Attention attend(const torch::Tensor& qkv_values, const torch::Tensor& grad_out, int64_t heads_count,
                 AttentionBackend preferred) {
  prefer_attention_backend(preferred, qkv_values.device());
  const int64_t B = qkv_values.size(0), T = qkv_values.size(1), C = qkv_values.size(2) / 3;
  auto qkv = qkv_values.clone().requires_grad_();
  const auto parts = qkv.split(C, /*dim=*/2);
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, heads_count, C / heads_count}).transpose(1, 2); };
  const auto q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
  const auto backend = static_cast<at::SDPBackend>(at::_fused_sdp_choice(q, k, v, {}, 0.0, /*is_causal=*/true));
  auto out = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  out.backward(grad_out.to(out.scalar_type()));
  prefer_attention_backend(AttentionBackend::automatic, qkv_values.device());
  return {out.detach().to(torch::kFloat), qkv.grad().to(torch::kFloat), backend};
}

double relative(const torch::Tensor& a, const torch::Tensor& reference) {
  return (a - reference).norm().item<double>() / reference.norm().item<double>();
}

TEST(CudaAttention, CudnnEqualsFlashForwardAndQkvGradientsOnTheModelsViews) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible: CUDA test skipped";
  const torch::Device cuda(torch::kCUDA, 0);
  const int64_t B = 4, T = 256, heads = 12, C = 768;  // GPT-2's head size 64
  torch::manual_seed(0);
  const auto qkv = torch::randn({B, T, 3 * C}, torch::TensorOptions().dtype(torch::kBFloat16).device(cuda));
  const auto grad_out = torch::randn({B, heads, T, C / heads}, torch::TensorOptions().device(cuda));
  const Attention flash = attend(qkv, grad_out, heads, AttentionBackend::flash);
  const Attention cudnn = attend(qkv, grad_out, heads, AttentionBackend::cudnn);
  const Attention reference = attend(qkv.to(torch::kFloat), grad_out, heads, AttentionBackend::math);
  ASSERT_EQ(flash.backend, at::SDPBackend::flash_attention);
  if (cudnn.backend != at::SDPBackend::cudnn_attention) {
    GTEST_SKIP() << "SDPA does not run cuDNN attention on this GPU/cuDNN (chose backend "
                 << static_cast<int>(cudnn.backend) << ")";
  }
  const double u = std::ldexp(1.0, -8);
  EXPECT_LE(relative(flash.out, reference.out), 2 * u);
  EXPECT_LE(relative(cudnn.out, reference.out), 2 * u);
  EXPECT_LE(relative(cudnn.out, flash.out), 4 * u);
  EXPECT_LE(relative(flash.grad, reference.grad), 3 * u);
  EXPECT_LE(relative(cudnn.grad, reference.grad), 3 * u);
  EXPECT_LE(relative(cudnn.grad, flash.grad), 6 * u);
}

}  // namespace
}  // namespace mygpt::cuda_attention_test
