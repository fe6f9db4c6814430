#include "eval/bits_per_byte.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace mygpt {

BitsPerByte::BitsPerByte(const std::vector<int64_t>& byte_counts, int64_t rows, const torch::Device& device) {
  if (static_cast<int64_t>(byte_counts.size()) > rows) {
    throw std::invalid_argument("the tokenizer has more ids than the model has rows");
  }
  auto table = torch::zeros({rows}, torch::kLong);
  auto* out = table.data_ptr<int64_t>();
  for (size_t i = 0; i < byte_counts.size(); ++i) out[i] = byte_counts[i];
  byte_table_ = table.to(device);
  sums_ = torch::zeros({2}, torch::TensorOptions().dtype(device.is_mps() ? torch::kFloat : torch::kDouble).device(device));
}

void BitsPerByte::reset() { sums_.zero_(); }

void BitsPerByte::add(const torch::Tensor& token_losses, const torch::Tensor& targets) {
  const auto flat = targets.reshape({-1});
  // A negative target is not scored (masked), as in nanochat: no bytes, no nats.
  const auto valid = flat.ge(0);
  const auto bytes = torch::where(valid, byte_table_.index_select(0, flat.clamp_min(0)), torch::zeros_like(flat));
  const auto counted = bytes.gt(0);
  const auto nats = torch::where(counted, token_losses.reshape({-1}).to(torch::kFloat), torch::zeros({}, token_losses.options().dtype(torch::kFloat)));
  sums_[0] += nats.sum().to(sums_.scalar_type());
  sums_[1] += bytes.sum().to(sums_.scalar_type());
}

double BitsPerByte::combine(Communicator& comm) {
  auto sums = sums_.clone();
  comm.all_reduce(sums, ReduceOp::Sum);
  sums = sums.to(torch::kCPU).to(torch::kDouble);
  nats_ = sums[0].item<double>();
  bytes_ = sums[1].item<double>();
  return bits_per_byte(nats_, bytes_);
}

double bits_per_byte(double nats, double bytes) {
  if (bytes <= 0) return std::numeric_limits<double>::infinity();
  return nats / (std::log(2.0) * bytes);
}

}  // namespace mygpt
