#include "model/attention_backend.h"

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>

#include <algorithm>
#include <cstdint>

namespace mygpt {
namespace {

// PyTorch's default priority order (ATen/Context.h).
const std::vector<at::SDPBackend> kDefaultOrder = {at::SDPBackend::flash_attention, at::SDPBackend::efficient_attention,
                                                   at::SDPBackend::math, at::SDPBackend::cudnn_attention,
                                                   at::SDPBackend::overrideable};

void set_order(at::SDPBackend first) {
  std::vector<int64_t> order{static_cast<int64_t>(first)};
  for (const auto backend : kDefaultOrder) {
    if (backend != first) order.push_back(static_cast<int64_t>(backend));
  }
  at::globalContext().setSDPPriorityOrder(order);
}

}  // namespace

std::vector<std::pair<std::string, AttentionBackend>> attention_backend_names() {
  return {{"auto", AttentionBackend::automatic},
          {"flash", AttentionBackend::flash},
          {"efficient", AttentionBackend::efficient},
          {"cudnn", AttentionBackend::cudnn},
          {"math", AttentionBackend::math}};
}

void prefer_attention_backend(AttentionBackend backend) {
  auto& context = at::globalContext();
  const bool only_math = backend == AttentionBackend::math;
  context.setSDPUseFlash(!only_math);
  context.setSDPUseMemEfficient(!only_math);
  context.setSDPUseCuDNN(!only_math);
  context.setSDPUseMath(true);
  // automatic and math keep PyTorch's order (math then has no other kernel to prefer).
  at::SDPBackend first = at::SDPBackend::flash_attention;
  if (backend == AttentionBackend::efficient) first = at::SDPBackend::efficient_attention;
  if (backend == AttentionBackend::cudnn) first = at::SDPBackend::cudnn_attention;
  set_order(first);
}

}  // namespace mygpt
