// The CUDA loss kernel's row arithmetic (model/cuda/lm_loss_row_math.h), compiled for the host and run
// here as the kernel runs it (every thread of a block over its packs, then the threads' pairs combined;
// only the block's shuffle-and-shared-memory reduction is the GPU's own), against the ATen cross entropy
// it replaces: on the shapes the CUDA tests use (GPT-2's padded vocabulary with 16-byte loads, a character
// vocabulary, an odd one with scalar loads, a tiny one), in fp32, bf16 and fp16, with huge, -inf and NaN
// logits and targets on the last column and outside the vocabulary.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>

#include "model/cuda/lm_loss_row_math.h"

namespace mygpt::cuda_kernels::row_math::lm_loss_row_math_test {
namespace {

constexpr int kMaxThreads = 512;  // as the kernel
constexpr int kWarp = 32;

// The host's conversions: c10's round to nearest even, as CUDA's __float2bfloat16 and __float2half do.
template <typename T>
struct HostCodec {
  static float to_float(T v) { return static_cast<float>(v); }
  static T from_float(float v) { return static_cast<T>(v); }
};

template <typename T, int kPack>
void run_rows(T* logits, const int64_t* targets, float* losses, int64_t rows, int64_t vocab, int64_t packs,
              int threads, float grad_scale, bool write_grad) {
  using Codec = HostCodec<T>;
  for (int64_t row = 0; row < rows; ++row) {
    T* row_logits = logits + row * vocab;
    const int64_t target = targets[row];
    const bool target_valid = target >= 0 && target < vocab;
    const float target_logit = target_valid ? Codec::to_float(row_logits[target]) : 0.0f;
    MaxSum total = empty_max_sum();
    for (int t = 0; t < threads; ++t) total = combine(total, thread_max_sum<T, Codec, kPack>(row_logits, packs, t, threads));
    const float lse = log_sum(total);
    losses[row] = row_loss(lse, target_valid, target_logit);
    if (!write_grad) continue;
    for (int t = 0; t < threads; ++t) write_gradient<T, Codec, kPack>(row_logits, packs, t, threads, lse, target, grad_scale);
  }
}

// The kernel on the host: the launch shape the kernel takes, then its row arithmetic. Returns whether it
// took the 16-byte loads.
template <typename T>
bool host_kernel(torch::Tensor& logits, const torch::Tensor& targets, torch::Tensor& losses, float grad_scale,
                 bool write_grad) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  auto* data = reinterpret_cast<T*>(logits.data_ptr());
  const RowLaunch shape =
      row_launch(vocab, sizeof(T), reinterpret_cast<std::uintptr_t>(data) % 16 == 0, kMaxThreads, kWarp);
  if (shape.vector) {
    run_rows<T, vector_pack<T>()>(data, targets.data_ptr<int64_t>(), losses.data_ptr<float>(), rows, vocab,
                                  shape.packs, shape.threads, grad_scale, write_grad);
  } else {
    run_rows<T, 1>(data, targets.data_ptr<int64_t>(), losses.data_ptr<float>(), rows, vocab, shape.packs,
                   shape.threads, grad_scale, write_grad);
  }
  return shape.vector;
}

bool run_kernel(torch::Tensor& logits, const torch::Tensor& targets, torch::Tensor& losses, float grad_scale,
                bool write_grad) {
  switch (logits.scalar_type()) {
    case torch::kFloat:
      return host_kernel<float>(logits, targets, losses, grad_scale, write_grad);
    case torch::kBFloat16:
      return host_kernel<c10::BFloat16>(logits, targets, losses, grad_scale, write_grad);
    case torch::kHalf:
      return host_kernel<c10::Half>(logits, targets, losses, grad_scale, write_grad);
    default:
      throw std::logic_error("unsupported logits type");
  }
}

// The ATen path the kernel replaces: losses from the logits read in fp32, and the gradient of
// grad_scale x (sum of the rows' losses), rounded once into the logits' type.
struct Reference {
  torch::Tensor losses, grad;
};
Reference aten(const torch::Tensor& logits, const torch::Tensor& targets, float grad_scale) {
  const auto x = logits.to(torch::kFloat).requires_grad_();
  const auto losses = torch::nn::functional::cross_entropy(
      x, targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  (losses.sum() * grad_scale).backward();
  return {losses.detach(), x.grad().to(logits.scalar_type())};
}

// The unit roundoff of the logits' type: the gradient is rounded into it once on each side.
double unit_roundoff(torch::ScalarType type) {
  return type == torch::kFloat ? std::ldexp(1.0, -24) : type == torch::kBFloat16 ? std::ldexp(1.0, -8)
                                                                                 : std::ldexp(1.0, -11);
}

// How far the fp32 gradient exp(x - logsumexp) may stray, relative, between the kernel and ATen: an
// absolute error e in logsumexp is a relative error e in every gradient. The sum of exp: a thread adds
// about vocab / threads terms, the block combines log2(threads) levels, each a rounding of 2^-24 of the
// sum; logsumexp itself (about max|x| + log(vocab)) is rounded a few times, each by 2^-24 of its size;
// both sides err so.
double fp32_gradient_error(int64_t vocab, int threads, double max_abs_logit) {
  const double u = std::ldexp(1.0, -24);
  const double sum_terms = std::ceil(static_cast<double>(vocab) / threads) + std::log2(threads) + 8;
  const double log_sum_size = max_abs_logit + std::log(static_cast<double>(vocab));
  return 2 * (sum_terms + 4 * log_sum_size) * u;
}

struct Shape {
  int64_t rows, vocab;
  torch::ScalarType type;
};

class RowMath : public ::testing::TestWithParam<Shape> {};

TEST_P(RowMath, LossesAndInPlaceGradientsEqualTheAtenPath) {
  const Shape s = GetParam();
  torch::manual_seed(s.rows * 7 + s.vocab);
  auto logits = (3.0 * torch::randn({s.rows, s.vocab})).to(s.type);
  auto targets = torch::randint(s.vocab, {s.rows}, torch::kLong);
  targets[0] = s.vocab - 1;  // a target on the last column (the last element of the last pack)
  const float grad_scale = 0.37f;
  const Reference ref = aten(logits, targets, grad_scale);
  auto losses = torch::empty({s.rows});
  auto work = logits.clone();
  const bool vector = run_kernel(work, targets, losses, grad_scale, /*write_grad=*/true);
  EXPECT_EQ(vector, s.vocab % (16 / work.element_size()) == 0) << "16-byte loads exactly where the row allows them";
  // The loss: both sum exp in fp32 (in other orders); a few fp32 roundings of values up to log(vocab) + 10.
  EXPECT_TRUE(torch::allclose(losses, ref.losses, 1e-5, 1e-5)) << (losses - ref.losses).abs().max();
  // The gradient: fp32 values that differ as above, each rounded once into the logits' type, which puts
  // them at most one unit in the last place apart: 2u of the value, 4u where the two straddle a power of
  // two. fp16's subnormals (below 2^-14) are spaced 2^-24 apart whatever the value.
  const int threads = row_launch(s.vocab, static_cast<int>(work.element_size()), true, kMaxThreads, kWarp).threads;
  const double max_abs_logit = logits.to(torch::kFloat).abs().max().item<double>();
  const double relative = 4 * unit_roundoff(s.type) + fp32_gradient_error(s.vocab, threads, max_abs_logit);
  const double subnormal_step = s.type == torch::kHalf ? std::ldexp(1.0, -24) : 0.0;
  const auto diff = (work.to(torch::kFloat) - ref.grad.to(torch::kFloat)).abs();
  const auto bound = ref.grad.to(torch::kFloat).abs() * relative + subnormal_step + 1e-30;
  EXPECT_TRUE((diff <= bound).all().item<bool>()) << "max gradient difference " << diff.max().item<double>();
}

INSTANTIATE_TEST_SUITE_P(KernelShapes, RowMath,
                         ::testing::Values(Shape{300, 50304, torch::kFloat}, Shape{300, 50304, torch::kBFloat16},
                                           Shape{300, 50304, torch::kHalf}, Shape{257, 65, torch::kFloat},
                                           Shape{257, 65, torch::kBFloat16}, Shape{64, 1001, torch::kFloat},
                                           Shape{64, 1001, torch::kHalf}, Shape{33, 8, torch::kFloat},
                                           Shape{33, 8, torch::kBFloat16}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           const Shape& s = info.param;
                           return "rows" + std::to_string(s.rows) + "_vocab" + std::to_string(s.vocab) + "_" +
                                  std::string(c10::toString(s.type));
                         });

TEST(RowMath, HugeMinusInfinityAndNaNLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  auto logits = torch::randn({6, 40});
  logits[0][3] = 1e30f;                        // huge: the online max keeps exp finite
  logits[1].slice(0, 0, 39).fill_(-inf);       // all but the target's column -inf
  logits[2][5] = -inf;                         // one -inf among finite values
  logits[3][7] = std::nanf("");                // NaN: the loss must be NaN (the step is skipped)
  logits[4].fill_(-inf);                       // a row of -inf only
  const auto targets = torch::tensor({3, 39, 5, 0, 2, 40}, torch::kLong);  // row 5: outside the vocabulary
  const Reference ref = aten(logits, targets.clamp_max(39), 1.0f);
  auto losses = torch::empty({6});
  auto work = logits.clone();
  run_kernel(work, targets, losses, 1.0f, /*write_grad=*/true);
  EXPECT_NEAR(losses[0].item<float>(), 0.0f, 1e-6) << "the huge logit is the target: loss 0";
  EXPECT_NEAR(losses[1].item<float>(), 0.0f, 1e-6) << "only the target is finite: loss 0";
  EXPECT_TRUE(std::isinf(losses[2].item<float>())) << "the target is -inf: an infinite loss, as ATen's";
  EXPECT_TRUE(std::isinf(ref.losses[2].item<float>()));
  EXPECT_TRUE(std::isnan(losses[3].item<float>())) << "a NaN logit gives a NaN loss";
  EXPECT_TRUE(std::isnan(losses[4].item<float>())) << "a row of -inf has no softmax: NaN";
  EXPECT_TRUE(std::isnan(losses[5].item<float>())) << "a target outside the vocabulary gives a NaN loss";
  // Finite rows' gradients: softmax - onehot (the -inf column gets exactly 0).
  for (int r : {0, 1}) {
    EXPECT_TRUE(torch::allclose(work[r], ref.grad[r], 1e-6, 1e-7)) << "row " << r;
  }
  EXPECT_EQ(work[2][5].item<float>(), -1.0f) << "the -inf target's column: softmax 0 minus one";
  EXPECT_EQ(work[1][0].item<float>(), 0.0f);
}

TEST(RowMath, WithoutWriteGradTheLogitsStayAndThreadCountsDoNotMatter) {
  torch::manual_seed(5);
  const auto logits = torch::randn({3, 1000}).to(torch::kBFloat16);
  const auto targets = torch::tensor({0, 999, 500}, torch::kLong);
  auto losses = torch::empty({3});
  auto work = logits.clone();
  run_kernel(work, targets, losses, 1.0f, /*write_grad=*/false);
  EXPECT_TRUE(torch::equal(work, logits));
  // Any split of the row among threads combines to the same loss up to fp32 rounding.
  auto* row = reinterpret_cast<const c10::BFloat16*>(logits.data_ptr());
  const float one_thread = log_sum(thread_max_sum<c10::BFloat16, HostCodec<c10::BFloat16>, 1>(row, 1000, 0, 1));
  for (int threads : {32, 96, 512}) {
    MaxSum total = empty_max_sum();
    for (int t = 0; t < threads; ++t) {
      total = combine(total, thread_max_sum<c10::BFloat16, HostCodec<c10::BFloat16>, 1>(row, 1000, t, threads));
    }
    EXPECT_NEAR(log_sum(total), one_thread, 1e-5) << threads << " threads";
  }
}

TEST(RowMath, LaunchShapes) {
  // GPT-2's padded vocabulary in bf16: 8 elements per 16-byte load, 6288 packs, the most threads.
  RowLaunch s = row_launch(50304, 2, true, kMaxThreads, kWarp);
  EXPECT_TRUE(s.vector);
  EXPECT_EQ(s.packs, 6288);
  EXPECT_EQ(s.threads, 512);
  // The unpadded vocabulary (50257, odd): scalar loads.
  s = row_launch(50257, 2, true, kMaxThreads, kWarp);
  EXPECT_FALSE(s.vector);
  EXPECT_EQ(s.packs, 50257);
  // A misaligned row: scalar loads even when the vocabulary divides.
  EXPECT_FALSE(row_launch(50304, 2, false, kMaxThreads, kWarp).vector);
  // A character vocabulary of 65 in fp32: scalar, 65 elements, three warps cover it once.
  s = row_launch(65, 4, true, kMaxThreads, kWarp);
  EXPECT_FALSE(s.vector);
  EXPECT_EQ(s.threads, 96);
  // Eight fp32 logits: two 16-byte packs, one warp.
  s = row_launch(8, 4, true, kMaxThreads, kWarp);
  EXPECT_TRUE(s.vector);
  EXPECT_EQ(s.packs, 2);
  EXPECT_EQ(s.threads, 32);
}

}  // namespace
}  // namespace mygpt::cuda_kernels::row_math::lm_loss_row_math_test
