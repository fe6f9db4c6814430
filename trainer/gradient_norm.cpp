#include "trainer/gradient_norm.h"

#include "distributed/gradient_sync.h"

namespace mygpt {

int64_t gradient_norm_pieces(int64_t numel) { return (numel + kShardAlignment - 1) / kShardAlignment; }

torch::Tensor piece_norms(const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  const int64_t whole = flat.numel() / kShardAlignment * kShardAlignment;
  std::vector<torch::Tensor> parts;
  // One row-wise norm for the whole pieces (row by row, each exactly as a 1-D norm of its piece).
  if (whole > 0) parts.push_back(torch::linalg_vector_norm(flat.slice(0, 0, whole).view({-1, kShardAlignment}), 2, 1));
  if (whole < flat.numel()) parts.push_back(torch::linalg_vector_norm(flat.slice(0, whole), 2).reshape({1}));
  if (parts.empty()) return torch::empty({0}, flat.options());
  return parts.size() == 1 ? parts[0] : torch::cat(parts);
}

torch::Tensor global_gradient_norm(const std::vector<torch::Tensor>& gradients) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& g : gradients) norms.push_back(piece_norms(g.reshape({-1})));
  return torch::linalg_vector_norm(torch::cat(norms), 2);
}

}  // namespace mygpt
