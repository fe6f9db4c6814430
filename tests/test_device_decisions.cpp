// The decisions that make a Mac train, each as the plain function that takes it, checked here on any
// machine: which device a rank trains on, the dtype of the scalars AdamW keeps on the device, which
// checkpoint entry restores a device's random stream, which communicator a one-rank MPS job gets, the
// refusal of CUDA-only flags on MPS, and the host memory figures of the memory check.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "common/host_memory.h"
#include "distributed/job_communicators.h"
#include "launcher/device.h"
#include "tests/test_support.h"
#include "trainer/adamw.h"
#include "model/mixed_precision.h"
#include "trainer/stateful_parts.h"

namespace mygpt::device_decisions_test {
namespace {

using testing::invalid_argument_message;

const torch::Device kCpu(torch::kCPU), kCuda(torch::kCUDA, 0), kMps(torch::kMPS);

TEST(DeviceChoice, AutoPrefersCudaThenMpsThenCpu) {
  EXPECT_EQ(choose_device_kind("auto", 1, true, true).kind, "cuda");
  EXPECT_EQ(choose_device_kind("auto", 4, true, false).kind, "cuda");
  EXPECT_EQ(choose_device_kind("auto", 1, false, true).kind, "mps");
  EXPECT_EQ(choose_device_kind("auto", 1, false, false).kind, "cpu");
  EXPECT_EQ(choose_device_kind("auto", 1, false, true).note, "");
}

TEST(DeviceChoice, SeveralRanksOnAMacTrainOnCpuWithANote) {
  // scripts/demo.sh's 2 ranks on Apple Silicon: MPS serves one process.
  const DeviceChoice choice = choose_device_kind("auto", 2, false, true);
  EXPECT_EQ(choice.kind, "cpu");
  EXPECT_NE(choice.note.find("2 ranks"), std::string::npos) << choice.note;
  EXPECT_NE(choice.note.find("MPS"), std::string::npos) << choice.note;
  // Without MPS there is nothing to explain.
  EXPECT_EQ(choose_device_kind("auto", 2, false, false).note, "");
}

TEST(DeviceChoice, ExplicitKindsAreHonouredOrRefused) {
  EXPECT_EQ(choose_device_kind("cpu", 3, true, true).kind, "cpu");
  EXPECT_EQ(choose_device_kind("mps", 1, false, true).kind, "mps");
  const std::string two_on_mps = invalid_argument_message([] { choose_device_kind("mps", 2, false, true); });
  EXPECT_NE(two_on_mps.find("--device mps"), std::string::npos) << two_on_mps;
  EXPECT_NE(two_on_mps.find("2 ranks"), std::string::npos) << two_on_mps;
  EXPECT_THROW(choose_device_kind("mps", 1, true, false), std::invalid_argument);
  EXPECT_THROW(choose_device_kind("cuda", 1, false, true), std::invalid_argument);
  EXPECT_THROW(choose_device_kind("tpu", 1, true, true), std::invalid_argument);
}

TEST(DeviceChoice, CudaOnlyFlagsAreRefusedOnMpsOnly) {
  const std::string message = invalid_argument_message([] { refuse_cuda_only_flags(kMps, {"--attention flash"}); });
  EXPECT_NE(message.find("--attention flash"), std::string::npos) << message;
  EXPECT_NE(message.find("--device mps"), std::string::npos) << message;
  EXPECT_NO_THROW(refuse_cuda_only_flags(kMps, {}));
  EXPECT_NO_THROW(refuse_cuda_only_flags(kCpu, {"--attention flash"}));
  EXPECT_NO_THROW(refuse_cuda_only_flags(kCuda, {"--cuda-loss-kernel"}));
}

TEST(DeviceScalars, LearningRateIsFloatOffTheCpu) {
  // MPS has no float64 tensors: a double learning rate there ends every run before step 0.
  EXPECT_EQ(lr_tensor_type(kMps), torch::kFloat);
  EXPECT_EQ(lr_tensor_type(kCuda), torch::kFloat);
  // The CPU kernel reads it back as a double: bit-identical to the double overload.
  EXPECT_EQ(lr_tensor_type(kCpu), torch::kDouble);
  EXPECT_TRUE(has_fused_adamw(kMps));
  EXPECT_TRUE(has_fused_adamw(kCuda));
  EXPECT_TRUE(has_fused_adamw(kCpu));
}

TEST(DeviceRandomState, RestoredOnlyOntoTheKindThatWroteIt) {
  const torch::Tensor bytes = torch::zeros({16}, torch::kByte);
  EXPECT_EQ(device_random_key(c10::DeviceType::CUDA), "device_cuda");
  EXPECT_EQ(device_random_key(c10::DeviceType::MPS), "device_mps");
  const StateDict from_cuda{{"cpu", bytes}, {"device_cuda", bytes}};
  const StateDict from_mps{{"cpu", bytes}, {"device_mps", bytes}};
  const StateDict from_old_cuda{{"cpu", bytes}, {"device", bytes}};
  EXPECT_EQ(device_random_entry(from_cuda, c10::DeviceType::CUDA), std::optional<std::string>("device_cuda"));
  EXPECT_EQ(device_random_entry(from_mps, c10::DeviceType::MPS), std::optional<std::string>("device_mps"));
  // A CUDA checkpoint resumed on MPS (or the reverse) starts the device's stream afresh.
  EXPECT_EQ(device_random_entry(from_cuda, c10::DeviceType::MPS), std::nullopt);
  EXPECT_EQ(device_random_entry(from_mps, c10::DeviceType::CUDA), std::nullopt);
  // Checkpoints from before the kind was named were written on CUDA.
  EXPECT_EQ(device_random_entry(from_old_cuda, c10::DeviceType::CUDA), std::optional<std::string>("device"));
  EXPECT_EQ(device_random_entry(from_old_cuda, c10::DeviceType::MPS), std::nullopt);
  EXPECT_EQ(device_random_entry(from_cuda, c10::DeviceType::CPU), std::nullopt);
}

TEST(DeviceRandomState, ACpuRunSavesNoDeviceEntryAndIgnoresOthers) {
  RandomState state(kCpu);
  torch::manual_seed(3);
  StateDict saved = state.state_dict();
  EXPECT_EQ(saved.size(), 1u);
  EXPECT_TRUE(saved.count("cpu"));
  const auto a = torch::rand({8});
  saved["device_mps"] = torch::zeros({16}, torch::kByte);  // another kind's entry: not this run's business
  EXPECT_NO_THROW(state.load_state_dict(saved));
  EXPECT_TRUE(torch::equal(torch::rand({8}), a));
}

TEST(DeviceCommunicator, OneRankOnMpsTrainsAloneWhateverLaunchedIt) {
  EXPECT_TRUE(trains_alone_on_device(1, kMps));
  EXPECT_FALSE(trains_alone_on_device(1, kCpu));
  EXPECT_FALSE(trains_alone_on_device(2, kCpu));
  EXPECT_FALSE(trains_alone_on_device(8, kCuda));
  const std::string message = invalid_argument_message([] { trains_alone_on_device(2, kMps); });
  EXPECT_NE(message.find("--device mps"), std::string::npos) << message;
}

TEST(DevicePrecision, Bf16OnMpsNeedsMacos14) {
  const std::string refusal = mps_precision_refusal(Precision::bf16, /*mps_has_bf16=*/false);
  EXPECT_NE(refusal.find("--precision bf16"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("macOS 14"), std::string::npos) << refusal;
  EXPECT_EQ(mps_precision_refusal(Precision::bf16, true), "");
  EXPECT_EQ(mps_precision_refusal(Precision::fp16, false), "");
  EXPECT_EQ(mps_precision_refusal(Precision::fp32, false), "");
}

TEST(HostMemory, TheSystemsOwnFigures) {
  const HostMemoryFigure available = host_available_memory();
  EXPECT_GT(available.bytes, 0) << "the system gave no figure of available memory";
  EXPECT_FALSE(available.source.empty());
  const int64_t now = resident_set_bytes(), peak = peak_resident_set_bytes();
  EXPECT_GT(now, 1 << 20);  // LibTorch alone is far more than a MiB
  EXPECT_GE(peak, now);
}

}  // namespace
}  // namespace mygpt::device_decisions_test
