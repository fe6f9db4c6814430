#pragma once
// The chunked LM loss's CUDA fast path (model/cuda/lm_loss_kernel.cu): one fused kernel for a chunk's
// softmax, loss and gradient. Built only where CMake found nvcc beside a CUDA LibTorch; elsewhere
// lm_loss_cuda_kernel_built() is false and the loss uses ATen ops.
#include <torch/torch.h>

namespace mygpt {

bool lm_loss_cuda_kernel_built();

// logits (rows, V) contiguous CUDA fp32/bf16/fp16; targets (rows) int64; row_losses (rows) fp32, written.
// With write_grad, logits become (softmax - onehot(target)) * grad_scale in place, in their own dtype.
void lm_loss_rows_cuda_(torch::Tensor& logits, const torch::Tensor& targets, torch::Tensor& row_losses,
                        double grad_scale, bool write_grad);

}  // namespace mygpt
