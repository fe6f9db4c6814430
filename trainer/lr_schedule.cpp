#include "trainer/lr_schedule.h"

#include <cmath>
#include <numbers>

namespace mygpt {

double LrSchedule::at(int64_t step) const {
  // step + 1 so that the very first step already trains (a zero learning rate would waste it).
  if (step < warmup_steps) return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (step >= decay_steps) return min_lr;
  const double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return min_lr + cosine * (max_lr - min_lr);
}

double LrSchedule::at_fraction(double progress) const {
  // A time-budget run's first step comes a few milliseconds into it: a learning rate that small but not zero.
  if (progress < warmup_fraction) return max_lr * progress / warmup_fraction;
  if (progress >= 1) return min_lr;
  const double decayed = (progress - warmup_fraction) / (1 - warmup_fraction);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * decayed));
  return min_lr + cosine * (max_lr - min_lr);
}

}  // namespace mygpt
