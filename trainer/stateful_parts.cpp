#include "trainer/stateful_parts.h"

#include <stdexcept>

namespace mygpt {
namespace {

const torch::Tensor& entry(const StateDict& state, const std::string& part, const std::string& name) {
  const auto it = state.find(name);
  if (it == state.end()) throw std::invalid_argument(part + " state lacks '" + name + "'");
  return it->second;
}

at::Generator device_generator(const torch::Device& device) { return at::globalContext().defaultGenerator(device); }

}  // namespace

std::string device_random_key(c10::DeviceType type) {
  return "device_" + c10::DeviceTypeName(type, /*lower_case=*/true);
}

std::optional<std::string> device_random_entry(const StateDict& state, c10::DeviceType type) {
  if (type == c10::DeviceType::CPU) return std::nullopt;  // the CPU's own entry is "cpu"
  const std::string key = device_random_key(type);
  if (state.count(key)) return key;
  if (type == c10::DeviceType::CUDA && state.count("device")) return "device";
  return std::nullopt;
}

StateDict ModelState::state_dict() const {
  StateDict state;
  for (const auto& item : model_->named_parameters()) state[item.key()] = item.value();
  for (const auto& item : model_->named_buffers()) state[item.key()] = item.value();
  return state;
}

void ModelState::load_state_dict(const StateDict& state) {
  torch::NoGradGuard no_grad;
  size_t used = 0;
  auto restore = [&](const std::string& name, torch::Tensor& into) {
    const torch::Tensor& from = entry(state, "model", name);
    if (!from.sizes().equals(into.sizes()) || from.scalar_type() != into.scalar_type()) {
      throw std::invalid_argument("model tensor '" + name + "' has the wrong shape or type");
    }
    into.copy_(from);
    ++used;
  };
  for (auto& item : model_->named_parameters()) restore(item.key(), item.value());
  for (auto& item : model_->named_buffers()) restore(item.key(), item.value());
  if (used != state.size()) throw std::invalid_argument("model state holds tensors this model does not have");
}

void LoaderState::load_state_dict(const StateDict& state) {
  loader_.load_state(entry(state, "data loader", "position"));
}

StateDict RandomState::state_dict() const {
  StateDict state{{"cpu", at::detail::getDefaultCPUGenerator().get_state()}};
  if (!device_.is_cpu()) state[device_random_key(device_.type())] = device_generator(device_).get_state();
  return state;
}

void RandomState::load_state_dict(const StateDict& state) {
  const torch::Tensor& cpu = entry(state, "random generator", "cpu");
  if (cpu.scalar_type() != torch::kByte) throw std::invalid_argument("random generator state is not a byte tensor");
  at::Generator(at::detail::getDefaultCPUGenerator()).set_state(cpu.clone());
  // A checkpoint written on the CPU (or another device kind) resumes with a fresh device stream.
  const std::optional<std::string> device_entry = device_random_entry(state, device_.type());
  if (device_entry) device_generator(device_).set_state(state.at(*device_entry).clone());
}

}  // namespace mygpt
