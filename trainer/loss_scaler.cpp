#include "trainer/loss_scaler.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace mygpt {
namespace {

// GradScaler keeps its scale in an fp32 tensor; a scale fp32 cannot hold is never taken.
bool fits_fp32(double value) {
  return std::isfinite(value) && value > 0 && value <= static_cast<double>(std::numeric_limits<float>::max());
}

}  // namespace

LossScaler::LossScaler(const LossScalerOptions& options) : options_(options), scale_(options.init_scale) {
  if (!fits_fp32(options.init_scale) || options.growth_interval < 1 || !(options.growth_factor > 1) ||
      !(options.backoff_factor > 0 && options.backoff_factor < 1)) {
    throw std::logic_error("loss scaler options out of range");
  }
}

// The rule of torch._amp_update_scale_: an overflow multiplies the scale by the backoff factor and
// restarts the count; the growth_interval-th good step in a row multiplies it by the growth factor
// (unless that leaves fp32's range) and restarts the count.
void LossScaler::update(bool overflow) {
  if (overflow) {
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ < options_.growth_interval) return;
  const double grown = scale_ * options_.growth_factor;
  if (fits_fp32(grown)) scale_ = grown;
  good_steps_ = 0;
}

StateDict LossScaler::state_dict() const {
  return {{"scale", torch::tensor({scale_}, torch::kDouble)},
          {"good_steps", torch::tensor({good_steps_}, torch::kLong)}};
}

void LossScaler::load_state_dict(const StateDict& state) {
  const auto scale = state.find("scale");
  const auto good = state.find("good_steps");
  if (scale == state.end() || good == state.end() || state.size() != 2) {
    throw std::invalid_argument("the fp16 loss scale state needs exactly 'scale' and 'good_steps'");
  }
  if (scale->second.numel() != 1 || scale->second.scalar_type() != torch::kDouble || good->second.numel() != 1 ||
      good->second.scalar_type() != torch::kLong) {
    throw std::invalid_argument("the fp16 loss scale state has the wrong shape or type");
  }
  const double loaded_scale = scale->second.item<double>();
  const int64_t loaded_good = good->second.item<int64_t>();
  // Below fp32's range the scale would be 0 and every gradient would vanish. A count at or past this run's
  // --loss-scale-growth-interval (a run resumed with a shorter one) grows the scale at the next good step.
  if (!fits_fp32(loaded_scale) || loaded_scale < static_cast<double>(std::numeric_limits<float>::min()) ||
      loaded_good < 0) {
    throw std::invalid_argument("the fp16 loss scale state is out of range (scale " + std::to_string(loaded_scale) +
                                ", good steps " + std::to_string(loaded_good) + ")");
  }
  scale_ = loaded_scale;
  good_steps_ = loaded_good;
}

}  // namespace mygpt
