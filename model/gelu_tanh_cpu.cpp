#include "model/gelu_tanh_cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/gelu_tanh_cpu_kernels.h"

namespace mygpt {
namespace {

void check_cpu_float(const torch::Tensor& t, const char* what) {
  if (!t.device().is_cpu() || t.scalar_type() != torch::kFloat) {
    throw std::invalid_argument(std::string("gelu_tanh_cpu: ") + what + " must be a float32 CPU tensor");
  }
}

// Elements per task of a multi-threaded call, as ATen's GELU splits them: one task up to 16384
// elements (threads cost more than they save there), else one even share per thread.
int64_t grain_size(int64_t n) {
  const int64_t threads = at::get_num_threads();
  return n > 16384 ? (n + threads - 1) / threads : std::max<int64_t>(n, 1);
}

// The backward saves the input, as ATen's gelu does, so the activation memory is the same.
class GeluTanhCpuFunction : public torch::autograd::Function<GeluTanhCpuFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    ctx->save_for_backward({x});
    return gelu_tanh_cpu_forward(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    // A graph of the backward is being recorded (create_graph): ATen's op, which has its own derivative.
    if (torch::GradMode::is_enabled()) return {at::gelu_backward(grad_outputs[0], x, "tanh")};
    return {gelu_tanh_cpu_backward(grad_outputs[0], x)};
  }
};

}  // namespace

torch::Tensor gelu_tanh(const torch::Tensor& x) {
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat) return torch::gelu(x, "tanh");
  return GeluTanhCpuFunction::apply(x);
}

torch::Tensor gelu_tanh_cpu_forward(const torch::Tensor& x) {
  check_cpu_float(x, "x");
  const torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in, torch::MemoryFormat::Contiguous);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, in.numel(), grain_size(in.numel()), [&](int64_t begin, int64_t end) {
    gelu_tanh_kernels::forward(src + begin, dst + begin, end - begin);
  });
  return out;
}

torch::Tensor gelu_tanh_cpu_backward(const torch::Tensor& grad, const torch::Tensor& x) {
  check_cpu_float(grad, "grad");
  check_cpu_float(x, "x");
  if (grad.sizes() != x.sizes()) throw std::invalid_argument("gelu_tanh_cpu: grad and x differ in shape");
  const torch::Tensor g = grad.contiguous(), in = x.contiguous();
  torch::Tensor out = torch::empty_like(in, torch::MemoryFormat::Contiguous);
  const float* gp = g.data_ptr<float>();
  const float* xp = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, in.numel(), grain_size(in.numel()), [&](int64_t begin, int64_t end) {
    gelu_tanh_kernels::backward(gp + begin, xp + begin, dst + begin, end - begin);
  });
  return out;
}

}  // namespace mygpt
