#pragma once
// AdamW with two parameter groups (decayed / not decayed) that updates all tensors of a group in one
// fused kernel (ATen's _fused_adamw_, on CPU and CUDA) instead of LibTorch's per-tensor loop of small
// ops. Devices without the fused kernel (MPS) take the same update written with ordinary tensor ops.
#include <torch/torch.h>

#include <vector>

namespace mygpt {

struct AdamWOptions {
  double lr = 6e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to the decay group only
};

class AdamW {
 public:
  AdamW(std::vector<torch::Tensor> decay_params, std::vector<torch::Tensor> no_decay_params,
        const AdamWOptions& options, bool use_fused = true);

  void set_lr(double lr) { options_.lr = lr; }
  double lr() const { return options_.lr; }
  void zero_grad();
  void step();

  std::vector<torch::Tensor> parameters() const;
  int64_t steps_taken() const { return steps_taken_; }

  // Moments and step count, for checkpoints. load_state checks shapes against the parameters.
  void save_state(torch::serialize::OutputArchive& archive) const;
  void load_state(torch::serialize::InputArchive& archive);

 private:
  struct Group {
    std::vector<torch::Tensor> params, exp_avg, exp_avg_sq, steps;
    double weight_decay;
  };
  void step_group(Group& group);
  void step_group_unfused(Group& group);

  std::vector<Group> groups_;
  AdamWOptions options_;
  bool use_fused_;
  int64_t steps_taken_ = 0;
};

}  // namespace mygpt
