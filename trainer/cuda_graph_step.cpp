// --cuda-graph in a binary built against a CUDA LibTorch: at::cuda::CUDAGraph around the step's device work
// (trainer/cuda_graph_step.h), warmed up and captured on a side stream as PyTorch's whole-network capture is.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>

#include "trainer/cuda_graph_step.h"

namespace mygpt {

bool cuda_graph_built() { return true; }

struct CudaGraphStep::Graph {
  explicit Graph(int64_t warmup) : warmup_steps(warmup) {}
  int64_t warmup_steps;
  int64_t steps = 0;
  std::optional<c10::cuda::CUDAStream> side;  // the warm-up's and the capture's stream
  std::unique_ptr<at::cuda::CUDAGraph> graph;  // null until captured
};

namespace {

// `waiter` waits, on the device, for the work queued on `waited` so far.
void wait_for(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& waited) {
  at::cuda::CUDAEvent queued;
  queued.record(waited);
  queued.block(waiter);
}

}  // namespace

CudaGraphStep::CudaGraphStep(int64_t warmup_steps) : graph_(std::make_unique<Graph>(warmup_steps)) {}
CudaGraphStep::~CudaGraphStep() = default;

bool CudaGraphStep::captured() const { return graph_->graph != nullptr; }

std::vector<torch::Tensor> CudaGraphStep::run(const std::function<std::vector<torch::Tensor>()>& body) {
  ++graph_->steps;
  const c10::cuda::CUDAStream ambient = c10::cuda::getCurrentCUDAStream();
  if (captured()) {
    graph_->graph->replay();  // on the ambient stream, after this step's inputs were copied there
    replayed_only_ = true;
    return outputs_;
  }
  replayed_only_ = false;
  if (!graph_->side) graph_->side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, ambient.device_index());
  const c10::cuda::CUDAStream side = *graph_->side;
  const bool capture = graph_->steps > graph_->warmup_steps;
  if (capture) {
    // The warm-up's cached blocks back to the device: the graph keeps a pool of its own for the step's
    // activations, which would otherwise sit beside them (about twice the step's memory).
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
  wait_for(side, ambient);  // the inputs copied on the ambient stream
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    if (!capture) {
      outputs_ = body();
    } else {
      auto graph = std::make_unique<at::cuda::CUDAGraph>();
      graph->capture_begin();
      try {
        outputs_ = body();
      } catch (...) {
        // End the capture so that the stream is usable for the error's report; that graph is discarded.
        try {
          graph->capture_end();
        } catch (...) {
        }
        throw;
      }
      graph->capture_end();
      graph_->graph = std::move(graph);
    }
  }
  wait_for(ambient, side);
  // Capture only records: this step's work runs now, as every later step's will.
  if (captured()) graph_->graph->replay();
  return outputs_;
}

}  // namespace mygpt
