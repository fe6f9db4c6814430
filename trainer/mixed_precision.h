#pragma once
// bf16 autocast for a scope, the LibTorch counterpart of Python's `with torch.autocast(...)`: matmuls
// and attention run in bf16 while the weights, their gradients and AdamW's state stay fp32.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace mygpt {

// The arithmetic of matmuls and attention: automatic picks bf16 on CUDA and fp32 elsewhere. Weights,
// gradients and optimizer state stay fp32 either way.
enum class Precision { automatic, fp32, bf16 };

// automatic resolved for a device (fp32 and bf16 stay as they are).
inline Precision resolve_precision(Precision precision, const torch::Device& device) {
  if (precision != Precision::automatic) return precision;
  return device.is_cuda() ? Precision::bf16 : Precision::fp32;
}

class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, bool enabled) : type_(device.type()), enabled_(enabled) {
    if (!enabled_) return;
    was_enabled_ = at::autocast::is_autocast_enabled(type_);
    previous_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    // Casted weight copies are cached while autocast is active; drop them when the outermost scope ends.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, previous_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType type_;
  bool enabled_;
  bool was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kBFloat16;
};

}  // namespace mygpt
