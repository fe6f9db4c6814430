#pragma once
// --cuda-graph: the device's part of a training step (forward and backward of every micro-batch, gradient
// clipping, the non-finite check, AdamW) captured once into a CUDA graph and replayed at every step after,
// so that the GPU runs the step's thousands of kernels back to back instead of waiting for the host to
// launch each one (the gaps between kernels that a profile of a GPT-2 step shows).
//
// A graph replays fixed kernels on fixed addresses with fixed shapes. What changes between steps is read
// from device tensors written before each replay (Trainer: the micro-batches copied into fixed input
// tensors, the learning rate in AdamW's device scalar, fp16's loss scale, the stop flag), and nothing in
// the captured part waits for the host: the step's one wait comes after the replay. cuda_graph_refusal
// names the runs where that does not hold.
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/train_options.h"

namespace mygpt {

// What decides whether a run's step can be captured (launcher/run_builder.cpp fills it in).
struct CudaGraphSetting {
  torch::Device device = torch::kCPU;
  bool communicates = false;  // a job of ranks (one rank under torchrun or mpirun included)
  bool sft = false;           // train --sft
  OptimizerKind optimizer = OptimizerKind::adamw;
  int64_t zero = 0;
  Recompute recompute = Recompute::none;
};

// Whether this binary can capture CUDA graphs: built against a CUDA LibTorch.
bool cuda_graph_built();

// The one-line reason --cuda-graph cannot apply to a run, naming the device or the option; "" where it can.
std::string cuda_graph_refusal(const CudaGraphSetting& setting);

class CudaGraphStep {
 public:
  // The first warmup_steps steps run eagerly on a side stream (capture needs the lazy first-use work of
  // cuBLAS, cuDNN, autograd and the allocator done before it, and a stream other than the default); the
  // next one is captured.
  explicit CudaGraphStep(int64_t warmup_steps = 3);
  ~CudaGraphStep();
  CudaGraphStep(const CudaGraphStep&) = delete;
  CudaGraphStep& operator=(const CudaGraphStep&) = delete;

  // One step's device work: `body` run eagerly while warming up; then captured, and the capture replayed
  // (capture records kernels without running them); from then on only the replay, `body` not called.
  // Returns body's outputs (from the capture on: the graph's own tensors, which every replay rewrites).
  std::vector<torch::Tensor> run(const std::function<std::vector<torch::Tensor>()>& body);
  // The last run() replayed without calling body: host-side effects of body (counters) did not happen.
  bool replayed_only() const { return replayed_only_; }
  bool captured() const;

 private:
  struct Graph;  // the steps counted, the side stream and the graph (a CUDA build's own types)
  std::unique_ptr<Graph> graph_;
  bool replayed_only_ = false;
  std::vector<torch::Tensor> outputs_;
};

}  // namespace mygpt
