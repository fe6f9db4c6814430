// --attention: the preferred scaled-dot-product attention kernel (model/attention_backend.h).
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/attention_backend.h"
#include "model/gpt.h"

namespace mygpt::attention_backend_test {
namespace {

// Restores PyTorch's defaults after each test: the setting is process-wide.
class AttentionBackendTest : public ::testing::Test {
 protected:
  void TearDown() override { prefer_attention_backend(AttentionBackend::automatic); }
};

TEST_F(AttentionBackendTest, NamedKernelGoesFirstAndOthersStayAsFallbacks) {
  prefer_attention_backend(AttentionBackend::cudnn);
  EXPECT_EQ(at::globalContext().sDPPriorityOrder()[0], at::SDPBackend::cudnn_attention);
  EXPECT_TRUE(at::globalContext().userEnabledFlashSDP());
  prefer_attention_backend(AttentionBackend::efficient);
  EXPECT_EQ(at::globalContext().sDPPriorityOrder()[0], at::SDPBackend::efficient_attention);
  EXPECT_EQ(at::globalContext().sDPPriorityOrder()[1], at::SDPBackend::flash_attention);
  prefer_attention_backend(AttentionBackend::automatic);
  EXPECT_EQ(at::globalContext().sDPPriorityOrder()[0], at::SDPBackend::flash_attention);
}

TEST_F(AttentionBackendTest, MathAllowsOnlyTheReferenceKernelAndAgreesWithTheDefault) {
  GptConfig config = preset_config("tiny");
  config.vocab_size = 41;
  torch::manual_seed(7);
  Gpt model(config);
  const auto idx = torch::randint(41, {3, 16}, torch::kLong);
  const auto targets = torch::randint(41, {3, 16}, torch::kLong);
  const double by_default = model->loss(idx, targets).item<double>();
  prefer_attention_backend(AttentionBackend::math);
  EXPECT_FALSE(at::globalContext().userEnabledFlashSDP());
  EXPECT_FALSE(at::globalContext().userEnabledMemEfficientSDP());
  EXPECT_FALSE(at::globalContext().userEnabledCuDNNSDP());
  const double by_math = model->loss(idx, targets).item<double>();
  EXPECT_NEAR(by_math, by_default, 1e-5 * by_default);
  prefer_attention_backend(AttentionBackend::automatic);
  EXPECT_TRUE(at::globalContext().userEnabledFlashSDP());
}

}  // namespace
}  // namespace mygpt::attention_backend_test
