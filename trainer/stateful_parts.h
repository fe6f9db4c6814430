#pragma once
// The StatefulPart faces of what a run holds besides the optimizer (which is one itself): the model's
// weights, a batch loader's position, and this process's random generators.
#include <torch/torch.h>

#include <optional>
#include <string>

#include "dataloader/batch_loader.h"
#include "model/gpt.h"
#include "trainer/stateful.h"

namespace mygpt {

// Parameters and buffers by their module names ("h.0.attn.c_attn.weight", ...). Identical on all ranks.
class ModelState final : public StatefulPart {
 public:
  explicit ModelState(Gpt model) : model_(std::move(model)) {}
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return false; }
  OnOtherWorldSize on_other_world_size() const override { return OnOtherWorldSize::load; }

 private:
  Gpt model_;
};

class LoaderState final : public StatefulPart {
 public:
  explicit LoaderState(BatchLoader& loader) : loader_(loader) {}
  StateDict state_dict() const override { return {{"position", loader_.state()}}; }
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return !loader_.state_shared_by_all_ranks(); }
  OnOtherWorldSize on_other_world_size() const override {
    return loader_.state_shared_by_all_ranks() ? OnOtherWorldSize::load : OnOtherWorldSize::refuse;
  }

 private:
  BatchLoader& loader_;
};

// The default CPU generator and the training device's (dropout draws from them).
// The entry that holds a device kind's generator state ("device_cuda", "device_mps"). A state goes back
// only onto the kind that wrote it: CUDA's Philox seed and offset mean nothing to MPS's generator (which
// would refuse or misread them). Checkpoints from before the kind was named hold "device", always written
// on CUDA (no MPS run got as far as a checkpoint then).
std::string device_random_key(c10::DeviceType type);
// The entry of `state` that restores the generator of `type`, or none: then the device's stream starts
// afresh from the seed (a checkpoint of another device kind, or of the CPU).
std::optional<std::string> device_random_entry(const StateDict& state, c10::DeviceType type);

class RandomState final : public StatefulPart {
 public:
  explicit RandomState(torch::Device device) : device_(device) {}
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return true; }
  OnOtherWorldSize on_other_world_size() const override { return OnOtherWorldSize::reseed; }
  void reseed(uint64_t seed) override { torch::manual_seed(seed); }

 private:
  torch::Device device_;
};

}  // namespace mygpt
