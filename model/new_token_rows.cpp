#include "model/new_token_rows.h"

#include <stdexcept>
#include <string>

namespace mygpt {

void set_new_token_rows_to_mean(torch::Tensor weight, int64_t first, int64_t end) {
  const int64_t rows = weight.size(0);
  if (first < 1 || end <= first || end > rows) {
    throw std::invalid_argument("new token rows " + std::to_string(first) + ".." + std::to_string(end - 1) +
                                " are not after known rows of the model's " + std::to_string(rows));
  }
  torch::NoGradGuard no_grad;
  // The mean in fp32 whatever the weights' dtype: 50257 rows summed in bf16 would lose the low bits.
  const torch::Tensor mean = weight.slice(0, 0, first).to(torch::kFloat).mean(0, /*keepdim=*/true);
  weight.slice(0, first, end).copy_(mean.expand({end - first, weight.size(1)}));
}

void set_new_token_rows_to_mean(Gpt& model, int64_t first, int64_t end) {
  set_new_token_rows_to_mean(model->wte->weight, first, end);
  if (!model->config().tie_head) set_new_token_rows_to_mean(model->lm_head->weight, first, end);
}

}  // namespace mygpt
