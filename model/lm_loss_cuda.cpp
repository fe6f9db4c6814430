#include "model/lm_loss_cuda.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/cuda/lm_loss_kernel.h"

namespace mygpt {

bool lm_loss_cuda_kernel_built() { return true; }

void lm_loss_rows_cuda_(torch::Tensor& logits, const torch::Tensor& targets, torch::Tensor& row_losses,
                        double grad_scale, bool write_grad) {
  TORCH_CHECK(logits.is_cuda() && logits.dim() == 2 && logits.is_contiguous(),
              "lm_loss_rows_cuda_: contiguous 2-D CUDA logits expected");
  TORCH_CHECK(targets.is_cuda() && targets.is_contiguous() && targets.scalar_type() == torch::kLong &&
                  targets.numel() == logits.size(0),
              "lm_loss_rows_cuda_: contiguous int64 CUDA targets, one per row, expected");
  TORCH_CHECK(row_losses.is_cuda() && row_losses.is_contiguous() && row_losses.scalar_type() == torch::kFloat &&
                  row_losses.numel() == logits.size(0),
              "lm_loss_rows_cuda_: contiguous fp32 CUDA row losses, one per row, expected");
  using cuda_kernels::LogitsType;
  LogitsType type{};
  switch (logits.scalar_type()) {
    case torch::kFloat: type = LogitsType::float32; break;
    case torch::kBFloat16: type = LogitsType::bfloat16; break;
    case torch::kHalf: type = LogitsType::float16; break;
    default: TORCH_CHECK(false, "lm_loss_rows_cuda_: fp32, bf16 or fp16 logits expected, got ", logits.scalar_type());
  }
  const c10::cuda::CUDAGuard device_guard(logits.device());
  const int status = cuda_kernels::launch_lm_loss_rows(
      logits.data_ptr(), type, targets.data_ptr<int64_t>(), row_losses.data_ptr<float>(), logits.size(0),
      logits.size(1), static_cast<float>(grad_scale), write_grad, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "lm_loss_rows_cuda_: kernel launch failed (cudaError ", status, ")");
}

}  // namespace mygpt
