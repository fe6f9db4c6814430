#pragma once
// The dynamic loss scale of fp16 training, as PyTorch's GradScaler keeps it. fp16 flushes gradients
// below ~6e-8 to zero, so the loss is multiplied by a large power of two before backward and the
// gradients are divided by it after. A scale too large overflows some gradient to inf/NaN: that step is
// skipped (the Trainer's skip path, on every rank alike) and the scale halves; after `growth_interval`
// good steps in a row it doubles again, so it stays near the largest scale that does not overflow.
// The scale is a power of two, so scaling and unscaling are exact in fp32.
#include <cstdint>

#include "trainer/stateful.h"

namespace mygpt {

struct LossScalerOptions {
  double init_scale = 65536.0;     // 2^16, GradScaler's default
  int64_t growth_interval = 2000;  // good steps in a row before the scale doubles
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
};

class LossScaler final : public StatefulPart {
 public:
  explicit LossScaler(const LossScalerOptions& options);

  // What this step's loss is multiplied by before backward.
  double scale() const { return scale_; }
  // Good steps since the last overflow or growth.
  int64_t good_steps() const { return good_steps_; }
  // After each optimizer step, with the same `overflow` on every rank (gradients were averaged first).
  void update(bool overflow);

  // The scale and the count of good steps: a resumed run grows and backs off exactly as it would have.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  bool per_rank() const override { return false; }
  OnOtherWorldSize on_other_world_size() const override { return OnOtherWorldSize::load; }

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
};

}  // namespace mygpt
