#pragma once
// The chunked LM loss's CPU path (model/lm_loss_cpu_kernels.h): one chunk's soft-cap, softmax, loss and
// gradient row by row while each row sits in the cache, instead of ATen's ~10 passes over the chunk.
#include <torch/torch.h>

namespace mygpt {

// logits (rows, V) contiguous CPU fp32; targets (rows) int64 in [0, V) (checked); row_losses (rows) fp32,
// written. logit_softcap > 0: the logits are cap * tanh(logits / cap) first. With write_grad, logits
// become d(grad_scale * loss)/d(logits) in place: (softmax - onehot(target)) * grad_scale, times
// 1 - tanh^2 with a cap. Without it they hold intermediate values afterwards.
void lm_loss_rows_cpu_(torch::Tensor& logits, const torch::Tensor& targets, torch::Tensor& row_losses,
                       double grad_scale, bool write_grad, double logit_softcap);

}  // namespace mygpt
