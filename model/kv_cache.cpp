#include "model/kv_cache.h"

#include <stdexcept>
#include <string>

namespace mygpt {

KvCache::KvCache(int64_t layers, int64_t capacity)
    : capacity_(capacity), keys_(static_cast<size_t>(layers)), values_(static_cast<size_t>(layers)) {
  if (layers <= 0 || capacity <= 0) throw std::logic_error("KvCache: layers and capacity must be positive");
}

std::pair<torch::Tensor, torch::Tensor> KvCache::append(int64_t layer, const torch::Tensor& keys,
                                                        const torch::Tensor& values) {
  if (layer < 0 || layer >= static_cast<int64_t>(keys_.size())) throw std::logic_error("KvCache: no such layer");
  const int64_t T = keys.size(2);
  if (length_ + T > capacity_) {
    throw std::logic_error("KvCache: " + std::to_string(length_ + T) + " positions exceed its capacity " +
                           std::to_string(capacity_));
  }
  auto& k = keys_[static_cast<size_t>(layer)];
  auto& v = values_[static_cast<size_t>(layer)];
  const bool fits = k.defined() && k.size(0) == keys.size(0) && k.size(1) == keys.size(1) &&
                    k.size(3) == keys.size(3) && k.dtype() == keys.dtype() && k.device() == keys.device();
  if (!fits) {
    if (length_ > 0) throw std::logic_error("KvCache: keys of another batch, shape or dtype than those it holds");
    k = torch::empty({keys.size(0), keys.size(1), capacity_, keys.size(3)}, keys.options());
    v = torch::empty_like(k);
  }
  k.narrow(2, length_, T).copy_(keys);
  v.narrow(2, length_, T).copy_(values);
  return {k.narrow(2, 0, length_ + T), v.narrow(2, 0, length_ + T)};
}

void KvCache::advance(int64_t positions) {
  if (positions < 0 || length_ + positions > capacity_) throw std::logic_error("KvCache: advance past its capacity");
  length_ += positions;
}

}  // namespace mygpt
