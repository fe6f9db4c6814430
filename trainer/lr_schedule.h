#pragma once
#include <cstdint>

namespace mygpt {

// Linear warmup to max_lr over warmup_steps, then cosine decay to min_lr at decay_steps; min_lr after.
// A run with a time budget (train --time-budget) has the same shape over the fraction of its budget spent:
// warmup over warmup_fraction of it, the decay ending at min_lr when it is all spent (at_fraction).
struct LrSchedule {
  double max_lr = 6e-4;
  double min_lr = 6e-5;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;
  double warmup_fraction = 0;  // in [0, 1)

  double at(int64_t step) const;
  // progress: the run's fraction done, 0 at its start and 1 at its end (more: min_lr).
  double at_fraction(double progress) const;
};

}  // namespace mygpt
