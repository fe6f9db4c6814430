// --cuda-graph in a binary built against a CPU LibTorch: refused (cuda_graph_refusal), so never constructed.
#include <stdexcept>

#include "trainer/cuda_graph_step.h"

namespace mygpt {

bool cuda_graph_built() { return false; }

struct CudaGraphStep::Graph {};

CudaGraphStep::CudaGraphStep(int64_t) {
  throw std::logic_error("CudaGraphStep in a build without CUDA (cuda_graph_refusal refuses the run first)");
}
CudaGraphStep::~CudaGraphStep() = default;
bool CudaGraphStep::captured() const { return false; }
std::vector<torch::Tensor> CudaGraphStep::run(const std::function<std::vector<torch::Tensor>()>&) {
  throw std::logic_error("CudaGraphStep in a build without CUDA");
}

}  // namespace mygpt
