#include "model/lm_loss_cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "model/lm_loss_cpu_kernels.h"

namespace mygpt {

void lm_loss_rows_cpu_(torch::Tensor& logits, const torch::Tensor& targets, torch::Tensor& row_losses,
                       double grad_scale, bool write_grad, double logit_softcap) {
  TORCH_CHECK(logits.is_cpu() && logits.scalar_type() == torch::kFloat && logits.dim() == 2 && logits.is_contiguous(),
              "CPU LM loss: contiguous fp32 (rows, V) logits expected");
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  TORCH_CHECK(targets.scalar_type() == torch::kLong && targets.is_contiguous() && targets.numel() == rows &&
                  row_losses.scalar_type() == torch::kFloat && row_losses.is_contiguous() && row_losses.numel() == rows,
              "CPU LM loss: int64 targets and fp32 losses of ", rows, " rows expected");
  if (rows == 0) return;
  // The loops index the row by its target: one out of range would read and write outside it.
  const auto [lowest, highest] = at::aminmax(targets);
  TORCH_CHECK(lowest.item<int64_t>() >= 0 && highest.item<int64_t>() < vocab, "CPU LM loss: a target is outside [0, ",
              vocab, ")");
  float* z = logits.data_ptr<float>();
  const int64_t* t = targets.data_ptr<int64_t>();
  float* losses = row_losses.data_ptr<float>();
  // Whole rows per task, at least ~16k elements each (threads cost more than they save below that).
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(vocab, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    lm_loss_kernels::cross_entropy_rows({.logits = z + begin * vocab,
                                         .rows = end - begin,
                                         .vocab = vocab,
                                         .targets = t + begin,
                                         .losses = losses + begin,
                                         .softcap = static_cast<float>(logit_softcap),
                                         .grad_scale = static_cast<float>(grad_scale),
                                         .want_grad = write_grad});
  });
}

}  // namespace mygpt
