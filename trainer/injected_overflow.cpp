#include "trainer/injected_overflow.h"

#include <limits>
#include <memory>
#include <utility>

namespace mygpt {

void inject_overflows(Gpt& model, std::function<bool(int64_t step)> at_step, int64_t first_step, int64_t grad_accum) {
  auto backward_passes = std::make_shared<int64_t>(0);
  model->wte->weight.register_hook(
      [at_step = std::move(at_step), first_step, grad_accum, backward_passes](const torch::Tensor& grad) {
        const int64_t k = (*backward_passes)++;
        const bool last_micro_step = k % grad_accum == grad_accum - 1;
        if (!last_micro_step || !at_step(first_step + k / grad_accum)) return grad;
        // 0 x inf: the NaN the CPU's (or GPU's) invalid operation makes, as in a backward that overflowed.
        return grad * 0.0 * std::numeric_limits<double>::infinity();
      });
}

}  // namespace mygpt
