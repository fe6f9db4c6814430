#pragma once
// AdamW with two parameter groups (decayed / not decayed) that updates all tensors of a group in one
// fused kernel (ATen's _fused_adamw_, on CPU, CUDA and MPS) instead of LibTorch's per-tensor loop of small
// ops. A device without the fused kernel takes the same update written with ordinary tensor ops.
#include <torch/torch.h>

#include <optional>
#include <vector>

#include "trainer/stateful.h"

namespace mygpt {

// Whether ATen has a fused AdamW kernel for the device's kind: CPU, CUDA and MPS (MPS's since torch 2.4,
// with the tensor-lr overload; the kernel torch.optim.AdamW(fused=True) runs there).
bool has_fused_adamw(const torch::Device& device);

// The dtype of the learning rate kept on the parameters' device for the fused kernel's tensor-lr overload:
// double on the CPU (its kernel reads it back with item<double>(), so the update is bit-identical to the
// double overload's), float elsewhere: CUDA's kernel reads a float, and MPS has no float64 tensors at all.
torch::ScalarType lr_tensor_type(const torch::Device& device);

struct AdamWOptions {
  double lr = 0;
  double beta1 = 0, beta2 = 0, eps = 0;
  double weight_decay = 0;  // applied to the decay group only
};

// Its state (moments and step counts) is the same on every rank and carries to any number of ranks.
class AdamW final : public StatefulPart {
 public:
  AdamW(std::vector<torch::Tensor> decay_params, std::vector<torch::Tensor> no_decay_params,
        const AdamWOptions& options, bool use_fused = true);

  // Also writes the device's copy of the rate that the fused kernel reads (outside any graph capture:
  // a captured step replays with whatever that tensor holds at replay).
  void set_lr(double lr);
  double lr() const { return options_.lr; }
  void zero_grad();
  // One update of every parameter that has a gradient. found_inf (a float 0/1 tensor on the parameters'
  // device, as AMP's GradScaler makes it) skips the whole update when 1, decided on the device so the
  // host never waits; a skipped step does not count in the step numbers either.
  void step(const std::optional<torch::Tensor>& found_inf = std::nullopt);
  // The host's count of steps taken excludes one that found_inf skipped (known only after a sync).
  void forget_skipped_step() { --steps_taken_; }
  // A step replayed from a CUDA graph (--cuda-graph) updated the parameters without running step()'s host code.
  void count_replayed_step() { ++steps_taken_; }

  std::vector<torch::Tensor> parameters() const;
  int64_t steps_taken() const { return steps_taken_; }

  // Moments and step counts ("exp_avg.<group>.<index>", ...). Loading checks every name and shape.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return false; }
  OnOtherWorldSize on_other_world_size() const override { return OnOtherWorldSize::load; }

 private:
  struct Group {
    std::vector<torch::Tensor> params, exp_avg, exp_avg_sq, steps;
    double weight_decay;
  };
  void step_group(Group& group, const std::optional<torch::Tensor>& found_inf);
  void step_group_unfused(Group& group);

  std::vector<Group> groups_;
  AdamWOptions options_;
  bool use_fused_;
  // The learning rate on the parameters' device, for the fused kernel's tensor-lr overload, so a step
  // captured in a CUDA graph reads the current rate instead of one baked in at capture; its dtype is
  // lr_tensor_type's.
  torch::Tensor lr_on_device_;
  int64_t steps_taken_ = 0;
};

}  // namespace mygpt
