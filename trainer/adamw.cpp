#include "trainer/adamw.h"

#include <cmath>
#include <stdexcept>

namespace mygpt {

bool has_fused_adamw(const torch::Device& device) {
  return device.is_cpu() || device.is_cuda() || device.is_mps();
}

torch::ScalarType lr_tensor_type(const torch::Device& device) {
  return device.is_cpu() ? torch::kDouble : torch::kFloat;
}

AdamW::AdamW(std::vector<torch::Tensor> decay_params, std::vector<torch::Tensor> no_decay_params,
             const AdamWOptions& options, bool use_fused)
    : options_(options), use_fused_(use_fused) {
  auto make_group = [](std::vector<torch::Tensor> params, double weight_decay) {
    Group g;
    g.weight_decay = weight_decay;
    for (const auto& p : params) {
      g.exp_avg.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      g.exp_avg_sq.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      // The fused kernel reads the step count from a float tensor on the parameter's device.
      g.steps.push_back(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(p.device())));
    }
    g.params = std::move(params);
    return g;
  };
  groups_.push_back(make_group(std::move(decay_params), options.weight_decay));
  groups_.push_back(make_group(std::move(no_decay_params), 0.0));
  for (const auto& g : groups_) {
    for (const auto& p : g.params) {
      if (!has_fused_adamw(p.device())) use_fused_ = false;
      if (!lr_on_device_.defined()) {
        lr_on_device_ = torch::empty({}, torch::TensorOptions().device(p.device()).dtype(lr_tensor_type(p.device())));
      }
    }
  }
  set_lr(options.lr);
}

void AdamW::set_lr(double lr) {
  options_.lr = lr;
  if (lr_on_device_.defined()) lr_on_device_.fill_(lr);
}

void AdamW::zero_grad() {
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      // Dropping the gradient (instead of zeroing it) saves a memset and lets backward write it fresh.
      p.mutable_grad() = torch::Tensor();
    }
  }
}

void AdamW::step(const std::optional<torch::Tensor>& found_inf) {
  torch::NoGradGuard no_grad;
  ++steps_taken_;
  // The unfused update has no found_inf input: it asks the device (a device without the fused kernel).
  if (!use_fused_ && found_inf && found_inf->item<float>() != 0) return;
  for (auto& g : groups_) {
    if (g.params.empty()) continue;
    if (use_fused_) {
      step_group(g, found_inf);
    } else {
      step_group_unfused(g);
    }
  }
}

void AdamW::step_group(Group& g, const std::optional<torch::Tensor>& found_inf) {
  std::vector<torch::Tensor> params, grads, exp_avg, exp_avg_sq, steps;
  for (size_t i = 0; i < g.params.size(); ++i) {
    if (!g.params[i].grad().defined()) continue;  // a parameter the loss did not reach
    params.push_back(g.params[i]);
    grads.push_back(g.params[i].grad());
    exp_avg.push_back(g.exp_avg[i]);
    exp_avg_sq.push_back(g.exp_avg_sq[i]);
    steps.push_back(g.steps[i]);
  }
  if (params.empty()) return;
  torch::_foreach_add_(steps, 1);
  at::_fused_adamw_(params, grads, exp_avg, exp_avg_sq, /*max_exp_avg_sqs=*/{}, steps, lr_on_device_, options_.beta1,
                    options_.beta2, g.weight_decay, options_.eps, /*amsgrad=*/false, /*maximize=*/false,
                    /*grad_scale=*/std::nullopt, found_inf);
  // The kernel skipped the update; the step counts must not advance either (as torch.optim does).
  if (found_inf) torch::_foreach_add_(steps, *found_inf, -1);
}

void AdamW::step_group_unfused(Group& g) {
  const double b1 = options_.beta1, b2 = options_.beta2;
  for (size_t i = 0; i < g.params.size(); ++i) {
    auto& p = g.params[i];
    if (!p.grad().defined()) continue;
    g.steps[i].add_(1);
    const double t = g.steps[i].item<double>();
    p.mul_(1.0 - options_.lr * g.weight_decay);  // decoupled weight decay (Loshchilov & Hutter)
    g.exp_avg[i].lerp_(p.grad(), 1.0 - b1);
    g.exp_avg_sq[i].mul_(b2).addcmul_(p.grad(), p.grad(), 1.0 - b2);
    const double bias1 = 1.0 - std::pow(b1, t), bias2 = 1.0 - std::pow(b2, t);
    auto denom = (g.exp_avg_sq[i].sqrt() / std::sqrt(bias2)).add_(options_.eps);
    p.addcdiv_(g.exp_avg[i], denom, -options_.lr / bias1);
  }
}

std::vector<torch::Tensor> AdamW::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

StateDict AdamW::state_dict() const {
  StateDict state;
  state["steps_taken"] = torch::tensor({steps_taken_}, torch::kLong);
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& g = groups_[gi];
    for (size_t i = 0; i < g.params.size(); ++i) {
      const std::string key = std::to_string(gi) + "." + std::to_string(i);
      state["exp_avg." + key] = g.exp_avg[i];
      state["exp_avg_sq." + key] = g.exp_avg_sq[i];
      state["step." + key] = g.steps[i];
    }
  }
  return state;
}

void AdamW::load_state_dict(const StateDict& state) {
  torch::NoGradGuard no_grad;
  auto saved = [&](const std::string& name) -> const torch::Tensor& {
    const auto it = state.find(name);
    if (it == state.end()) throw std::invalid_argument("optimizer state lacks '" + name + "'");
    return it->second;
  };
  const torch::Tensor& steps_taken = saved("steps_taken");
  if (steps_taken.numel() != 1 || steps_taken.scalar_type() != torch::kLong) {
    throw std::invalid_argument("optimizer state 'steps_taken' is not one integer");
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    for (size_t i = 0; i < g.params.size(); ++i) {
      const std::string key = std::to_string(gi) + "." + std::to_string(i);
      auto restore = [&](const std::string& name, torch::Tensor& into) {
        const torch::Tensor& from = saved(name + "." + key);
        if (!from.sizes().equals(into.sizes()) || from.scalar_type() != into.scalar_type()) {
          throw std::invalid_argument("optimizer state " + name + "." + key + " does not match the model's shapes");
        }
        into.copy_(from);
      };
      restore("exp_avg", g.exp_avg[i]);
      restore("exp_avg_sq", g.exp_avg_sq[i]);
      restore("step", g.steps[i]);
    }
  }
  steps_taken_ = steps_taken.item<int64_t>();
}

}  // namespace mygpt
