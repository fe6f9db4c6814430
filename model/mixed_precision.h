#pragma once
// Autocast for a scope, the LibTorch counterpart of Python's `with torch.autocast(...)`: matmuls and
// attention run in bf16 or fp16 while the weights, their gradients and AdamW's state stay fp32.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <optional>
#include <string>

namespace mygpt {

// The arithmetic of matmuls and attention. Weights, gradients and optimizer state stay fp32 whatever it is.
// fp16 has bf16's precision and more, but a range ending at 65504 and small gradients flushed to zero:
// it trains with a dynamic loss scale (trainer/loss_scaler.h).
enum class Precision { automatic, fp32, bf16, fp16 };

// automatic resolved for a device: bf16 on a CUDA GPU that computes in it (compute capability 8.0 and up),
// fp16 on older CUDA GPUs (V100, T4, RTX 20xx), fp32 elsewhere. Explicit choices stay as they are.
inline Precision resolve_precision(Precision precision, const torch::Device& device, bool gpu_has_bf16) {
  if (precision != Precision::automatic) return precision;
  if (!device.is_cuda()) return Precision::fp32;
  return gpu_has_bf16 ? Precision::bf16 : Precision::fp16;
}

// A resolved precision the MPS device cannot compute in: the one-line reason, else "". LibTorch's MPS
// backend has bfloat16 only from macOS 14 on ("MPS BFloat16 is only supported on MacOS 14 or newer").
inline std::string mps_precision_refusal(Precision precision, bool mps_has_bf16) {
  if (precision == Precision::bf16 && !mps_has_bf16) {
    return "--precision bf16: MPS computes in bfloat16 from macOS 14 on, and this Mac's is older: use --precision "
           "fp16 or fp32";
  }
  return "";
}

// The autocast dtype of a (resolved) precision; none for fp32.
inline std::optional<at::ScalarType> autocast_dtype(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return at::kBFloat16;
    case Precision::fp16:
      return at::kHalf;
    default:
      return std::nullopt;
  }
}

inline const char* precision_description(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return "bf16 autocast";
    case Precision::fp16:
      return "fp16 autocast with dynamic loss scaling";
    case Precision::fp32:
      return "fp32";
    default:
      return "precision not resolved";
  }
}

class AutocastScope {
 public:
  // Autocast to the precision's dtype for the scope; nothing for fp32.
  AutocastScope(const torch::Device& device, Precision precision)
      : type_(device.type()), dtype_(autocast_dtype(precision)) {
    if (!dtype_) return;
    was_enabled_ = at::autocast::is_autocast_enabled(type_);
    previous_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::set_autocast_dtype(type_, *dtype_);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!dtype_) return;
    // Casted weight copies are cached while autocast is active; drop them when the outermost scope ends.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, previous_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType type_;
  std::optional<at::ScalarType> dtype_;
  bool was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kBFloat16;
};

}  // namespace mygpt
