#pragma once
#include <cstdint>

namespace mygpt {

// Linear warmup to max_lr over warmup_steps, then cosine decay to min_lr at decay_steps; min_lr after.
struct LrSchedule {
  double max_lr = 6e-4;
  double min_lr = 6e-5;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;

  double at(int64_t step) const;
};

}  // namespace mygpt
