#include "model/layer_norm_cuda.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/cuda/layer_norm_kernel.h"

namespace mygpt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

cuda_kernels::LowpType lowp_type(at::ScalarType type) {
  return type == at::kHalf ? cuda_kernels::LowpType::float16 : cuda_kernels::LowpType::bfloat16;
}

void check_launch(int status, const char* what) {
  TORCH_CHECK(status == 0, "layer_norm_cuda_lowp: ", what, " kernel launch failed (cudaError ", status, ")");
}

struct Gradients {
  torch::Tensor dx, dweight, dbias;
};

// saved: (x, weight, mean, rstd) of the forward. dresidual (optional): x's gradient from its other uses,
// added to dx; dbranch (optional): receives dx in the 16-bit type too.
Gradients backward_pass(const torch::autograd::variable_list& saved, const torch::Tensor& grad_y,
                        const torch::Tensor& dresidual, at::ScalarType type, torch::Tensor* dbranch) {
  const torch::Tensor& x = saved[0];
  const torch::Tensor weight = saved[1].contiguous();
  // The gradient of a 16-bit output is 16-bit; one that arrives otherwise is brought to it.
  const torch::Tensor dy = grad_y.to(type).contiguous();
  const torch::Tensor residual = dresidual.defined() ? dresidual.to(torch::kFloat).contiguous() : torch::Tensor();
  const int64_t width = x.size(-1);
  const int64_t rows = x.numel() / width;
  auto dx = torch::empty_like(x);
  auto partials = torch::empty({cuda_kernels::layer_norm_backward_partial_rows(rows, width), 2, width}, x.options());
  const c10::cuda::CUDAGuard device_guard(x.device());
  check_launch(cuda_kernels::launch_layer_norm_backward(
                   dy.data_ptr(), lowp_type(type), x.data_ptr<float>(), weight.data_ptr<float>(),
                   saved[2].data_ptr<float>(), saved[3].data_ptr<float>(),
                   residual.defined() ? residual.data_ptr<float>() : nullptr, dx.data_ptr<float>(),
                   dbranch != nullptr ? dbranch->data_ptr() : nullptr, partials.data_ptr<float>(), rows, width,
                   c10::cuda::getCurrentCUDAStream().stream()),
               "backward");
  const torch::Tensor sums = partials.sum(0);  // (2, width): ATen's reduction, the same order every run
  return {dx, sums[0], sums[1]};
}

struct Normalized {
  torch::Tensor input;  // what the kernel normalized, which backward reads: x (contiguous), or x + branch
  torch::Tensor sum, y, mean, rstd;  // sum: x + branch, undefined without a branch
};

// The forward of both Functions: y = LayerNorm(x [+ branch]) in `type`, with the row statistics.
Normalized forward_pass(const torch::Tensor& x_in, const torch::Tensor& branch_in, const torch::Tensor& weight,
                        const torch::Tensor& bias, double eps, at::ScalarType type) {
  const torch::Tensor x = x_in.contiguous();
  const torch::Tensor branch = branch_in.defined() ? branch_in.contiguous() : torch::Tensor();
  const int64_t width = x.size(-1);
  const int64_t rows = x.numel() / width;
  Normalized out;
  if (branch.defined()) out.sum = torch::empty_like(x);
  out.input = branch.defined() ? out.sum : x;
  out.y = torch::empty(x.sizes(), x.options().dtype(type));
  out.mean = torch::empty({rows}, x.options());
  out.rstd = torch::empty({rows}, x.options());
  const c10::cuda::CUDAGuard device_guard(x.device());
  check_launch(cuda_kernels::launch_layer_norm_forward(
                   x.data_ptr<float>(), branch.defined() ? branch.data_ptr() : nullptr,
                   branch.defined() ? out.sum.data_ptr<float>() : nullptr, weight.contiguous().data_ptr<float>(),
                   bias.contiguous().data_ptr<float>(), out.y.data_ptr(), lowp_type(type), out.mean.data_ptr<float>(),
                   out.rstd.data_ptr<float>(), rows, width, static_cast<float>(eps),
                   c10::cuda::getCurrentCUDAStream().stream()),
               branch.defined() ? "forward (with the residual add)" : "forward");
  return out;
}

class LayerNormLowp : public torch::autograd::Function<LayerNormLowp> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps, int64_t out_type) {
    Normalized n = forward_pass(x, torch::Tensor(), weight, bias, eps, static_cast<at::ScalarType>(out_type));
    ctx->save_for_backward({n.input, weight, n.mean, n.rstd});
    ctx->saved_data["out_type"] = out_type;
    return n.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto type = static_cast<at::ScalarType>(ctx->saved_data["out_type"].toInt());
    auto [dx, dweight, dbias] = backward_pass(saved, grad_outputs[0], torch::Tensor(), type, /*dbranch=*/nullptr);
    return {dx, dweight, dbias, torch::Tensor(), torch::Tensor()};
  }
};

// x + branch and its LayerNorm, the residual add fused into the norm: outputs (x + branch, y).
class AddLayerNormLowp : public torch::autograd::Function<AddLayerNormLowp> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& branch,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps, int64_t out_type) {
    Normalized n = forward_pass(x, branch, weight, bias, eps, static_cast<at::ScalarType>(out_type));
    ctx->save_for_backward({n.input, weight, n.mean, n.rstd});
    ctx->saved_data["out_type"] = out_type;
    // An output nobody differentiates arrives as an undefined gradient, not a tensor of zeros.
    ctx->set_materialize_grads(false);
    return {n.sum, n.y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto type = static_cast<at::ScalarType>(ctx->saved_data["out_type"].toInt());
    const torch::Tensor& dsum = grad_outputs[0];
    torch::Tensor dy = grad_outputs[1];
    const torch::Tensor& x = saved[0];
    if (!dy.defined()) dy = torch::zeros(x.sizes(), x.options().dtype(type));
    auto dbranch = torch::empty(x.sizes(), x.options().dtype(type));
    auto [dx, dweight, dbias] = backward_pass(saved, dy, dsum, type, &dbranch);
    return {dx, dbranch, dweight, dbias, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool layer_norm_cuda_kernel_built() { return true; }

bool layer_norm_cuda_applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             at::ScalarType out_type) {
  if (!x.defined() || !weight.defined() || !bias.defined() || x.dim() < 1) return false;
  const int64_t width = x.size(-1);
  return x.is_cuda() && x.scalar_type() == at::kFloat && width >= 1 && width <= cuda_kernels::kLayerNormMaxWidth &&
         weight.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat && weight.numel() == width &&
         bias.numel() == width && weight.device() == x.device() && bias.device() == x.device() &&
         (out_type == at::kBFloat16 || out_type == at::kHalf);
}

std::pair<torch::Tensor, torch::Tensor> add_layer_norm_cuda_lowp(const torch::Tensor& x, const torch::Tensor& branch,
                                                                 const torch::Tensor& weight, const torch::Tensor& bias,
                                                                 double eps, at::ScalarType out_type) {
  TORCH_CHECK(layer_norm_cuda_applies(x, weight, bias, out_type) && branch.defined() &&
                  branch.scalar_type() == out_type && branch.sizes() == x.sizes() && branch.device() == x.device(),
              "add_layer_norm_cuda_lowp: fp32 CUDA input, a branch of its shape in the 16-bit output type, and "
              "fp32 weight and bias of its width expected");
  auto outputs = AddLayerNormLowp::apply(x, branch, weight, bias, eps, static_cast<int64_t>(out_type));
  return {outputs[0], outputs[1]};
}

torch::Tensor layer_norm_cuda_lowp(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                   double eps, at::ScalarType out_type) {
  TORCH_CHECK(layer_norm_cuda_applies(x, weight, bias, out_type),
              "layer_norm_cuda_lowp: fp32 CUDA input with fp32 weight and bias of its width (at most ",
              cuda_kernels::kLayerNormMaxWidth, ") and a bf16 or fp16 output expected");
  return LayerNormLowp::apply(x, weight, bias, eps, static_cast<int64_t>(out_type));
}

}  // namespace mygpt
