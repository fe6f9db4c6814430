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
  switch (backend) {
    case AttentionBackend::automatic:
    case AttentionBackend::math: set_order(at::SDPBackend::flash_attention); break;
    case AttentionBackend::flash: set_order(at::SDPBackend::flash_attention); break;
    case AttentionBackend::efficient: set_order(at::SDPBackend::efficient_attention); break;
    case AttentionBackend::cudnn: set_order(at::SDPBackend::cudnn_attention); break;
  }
}

}  // namespace mygpt
