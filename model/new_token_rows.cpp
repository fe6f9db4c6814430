#include "model/new_token_rows.h"

#include <stdexcept>
#include <string>

namespace mygpt {

void set_new_token_rows_to_mean(Gpt& model, int64_t first, int64_t end) {
  const int64_t rows = model->config().vocab_size;
  if (first < 1 || end <= first || end > rows) {
    throw std::invalid_argument("new token rows " + std::to_string(first) + ".." + std::to_string(end - 1) +
                                " are not after known rows of the model's " + std::to_string(rows));
  }
  torch::NoGradGuard no_grad;
  auto set_rows = [&](torch::Tensor weight) {
    // The mean in fp32 whatever the weights' dtype: 50257 rows summed in bf16 would lose the low bits.
    const torch::Tensor mean = weight.slice(0, 0, first).to(torch::kFloat).mean(0, /*keepdim=*/true);
    weight.slice(0, first, end).copy_(mean.expand({end - first, weight.size(1)}));
  };
  set_rows(model->wte->weight);
  if (!model->config().tie_head) set_rows(model->lm_head->weight);
}

}  // namespace mygpt
