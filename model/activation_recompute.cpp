#include "model/activation_recompute.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <mutex>
#include <optional>

namespace mygpt {
namespace {

// The default generator of a device (the CPU's, or a GPU's), whose state can be saved and restored.
struct GeneratorState {
  mutable at::Generator generator;  // a handle: restoring changes the generator, not this record
  torch::Tensor state;

  explicit GeneratorState(const torch::Device& device)
      : generator(device.is_cpu() ? at::detail::getDefaultCPUGenerator()
                                  : at::globalContext().defaultGenerator(device)) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state();
  }
  void restore() const {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
};

// Autocast as it was at the first run, for the rerun (backward runs outside the forward's scope).
struct AutocastSetting {
  c10::DeviceType type;
  bool enabled;
  at::ScalarType dtype;

  explicit AutocastSetting(c10::DeviceType t)
      : type(t), enabled(at::autocast::is_autocast_enabled(t)), dtype(at::autocast::get_autocast_dtype(t)) {}
  void apply() const {
    at::autocast::set_autocast_enabled(type, enabled);
    at::autocast::set_autocast_dtype(type, dtype);
  }
};

class RecomputeBackward final : public torch::autograd::Node {
 public:
  RecomputeBackward(std::function<torch::Tensor(const torch::Tensor&)> fn, torch::Tensor input, bool input_needs_grad)
      : fn_(std::move(fn)),
        input_(std::move(input)),
        input_needs_grad_(input_needs_grad),
        cpu_rng_(torch::kCPU),
        device_rng_(input_.is_cpu() ? std::nullopt : std::make_optional<GeneratorState>(input_.device())),
        autocast_(input_.device().type()) {}

  std::string name() const override { return "mygpt::RecomputeBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (!fn_) throw std::runtime_error("recomputed activations: backward ran twice through the same graph");
    // Rerun under the first run's random state and autocast, then put both back.
    const GeneratorState cpu_now(torch::kCPU);
    const std::optional<GeneratorState> device_now =
        device_rng_ ? std::make_optional<GeneratorState>(input_.device()) : std::nullopt;
    const AutocastSetting autocast_now(autocast_.type);
    cpu_rng_.restore();
    if (device_rng_) device_rng_->restore();
    autocast_.apply();
    torch::Tensor x = input_.detach().requires_grad_(input_needs_grad_);
    torch::Tensor out;
    {
      torch::AutoGradMode record(true);
      out = fn_(x);
    }
    if (autocast_.enabled) at::autocast::clear_cache();
    autocast_now.apply();
    cpu_now.restore();
    if (device_now) device_now->restore();
    // A nested backward through the recomputed graph: the parameters' gradients accumulate as usual.
    torch::autograd::backward({out}, {grads[0]});
    torch::Tensor input_grad = x.requires_grad() ? x.grad() : torch::Tensor();
    release_variables();
    return {input_grad};
  }

  void release_variables() override {
    fn_ = nullptr;
    input_.reset();
  }

 private:
  std::function<torch::Tensor(const torch::Tensor&)> fn_;
  torch::Tensor input_;
  bool input_needs_grad_;
  GeneratorState cpu_rng_;
  std::optional<GeneratorState> device_rng_;
  AutocastSetting autocast_;
};

}  // namespace

torch::Tensor recompute_in_backward(std::function<torch::Tensor(const torch::Tensor&)> fn, const torch::Tensor& x) {
  if (!torch::GradMode::is_enabled()) return fn(x);
  // The generators' state before the first run: the rerun draws what it drew.
  auto node = std::shared_ptr<RecomputeBackward>(new RecomputeBackward(fn, x.detach(), x.requires_grad()),
                                                 torch::autograd::deleteNode);
  torch::Tensor out;
  {
    torch::NoGradGuard no_grad;
    out = fn(x);
  }
  node->set_next_edges(torch::autograd::collect_next_edges(x));
  torch::autograd::create_gradient_edge(out, node);
  return out;
}

}  // namespace mygpt
