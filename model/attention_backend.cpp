#include "model/attention_backend.h"

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>

namespace mygpt {
namespace {

// PyTorch's default priority order (ATen/Context.h).
const std::vector<at::SDPBackend> kDefaultOrder = {at::SDPBackend::flash_attention, at::SDPBackend::efficient_attention,
                                                   at::SDPBackend::math, at::SDPBackend::cudnn_attention,
                                                   at::SDPBackend::overrideable};

std::vector<int64_t> as_ints(const std::vector<at::SDPBackend>& order) {
  std::vector<int64_t> ints;
  for (const auto backend : order) ints.push_back(static_cast<int64_t>(backend));
  return ints;
}

std::vector<at::SDPBackend> current_order() {
  const auto order = at::globalContext().sDPPriorityOrder();
  return {order.begin(), order.end()};
}

// PyTorch's order once it has settled it on CUDA (see the header); until then its static default.
std::vector<at::SDPBackend>& pytorch_order() {
  static std::vector<at::SDPBackend> order = kDefaultOrder;
  return order;
}

void settle_pytorch_order_on(const torch::Device& device) {
  static bool settled = false;
  if (settled || !device.is_cuda()) return;
  settled = true;
  // Its lazy choice, if still to come, starts from the default order and may rewrite it.
  at::globalContext().setSDPPriorityOrder(as_ints(kDefaultOrder));
  const auto q = torch::zeros({1, 1, 8, 64}, torch::TensorOptions().dtype(torch::kBFloat16).device(device));
  (void)at::_fused_sdp_choice(q, q, q, {}, 0.0, /*is_causal=*/true);
  pytorch_order() = current_order();
}

void set_order(at::SDPBackend first) {
  std::vector<at::SDPBackend> order{first};
  for (const auto backend : pytorch_order()) {
    if (backend != first) order.push_back(backend);
  }
  at::globalContext().setSDPPriorityOrder(as_ints(order));
}

}  // namespace

std::vector<std::pair<std::string, AttentionBackend>> attention_backend_names() {
  return {{"auto", AttentionBackend::automatic},
          {"flash", AttentionBackend::flash},
          {"efficient", AttentionBackend::efficient},
          {"cudnn", AttentionBackend::cudnn},
          {"math", AttentionBackend::math}};
}

void prefer_attention_backend(AttentionBackend backend, const torch::Device& device) {
  settle_pytorch_order_on(device);
  auto& context = at::globalContext();
  const bool only_math = backend == AttentionBackend::math;
  context.setSDPUseFlash(!only_math);
  context.setSDPUseMemEfficient(!only_math);
  context.setSDPUseCuDNN(!only_math);
  context.setSDPUseMath(true);
  // automatic and math keep PyTorch's order (math then has no other kernel to prefer).
  if (backend == AttentionBackend::automatic || backend == AttentionBackend::math) {
    context.setSDPPriorityOrder(as_ints(pytorch_order()));
    return;
  }
  at::SDPBackend first = at::SDPBackend::flash_attention;
  if (backend == AttentionBackend::efficient) first = at::SDPBackend::efficient_attention;
  if (backend == AttentionBackend::cudnn) first = at::SDPBackend::cudnn_attention;
  set_order(first);
}

}  // namespace mygpt
