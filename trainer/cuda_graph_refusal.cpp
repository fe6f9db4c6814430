// Where --cuda-graph applies (trainer/cuda_graph_step.h), decided from the run's settings alone, so that
// the refusals are the same, and tested, on a machine without a GPU.
#include "trainer/cuda_graph_step.h"

namespace mygpt {

std::string cuda_graph_refusal(const CudaGraphSetting& s) {
  const std::string flag = "--cuda-graph: ";
  if (!cuda_graph_built()) return flag + "this binary was built against a CPU LibTorch, which has no CUDA graphs";
  if (!s.device.is_cuda()) {
    return flag + "CUDA graphs are a CUDA GPU's, and this run is on --device " + s.device.str() + ": leave it out";
  }
  // Each rank's step waits on the host for its gradient buckets' all-reduces (and a watchdog bounds them),
  // and all-reduces the loss and the stop flag; those waits cannot be inside a graph, and a graph of the
  // parts between them would not remove the gaps the option is for.
  if (s.communicates) {
    return flag + "runs in one process started without a launcher; this is a job of ranks (torchrun, mpirun, "
                  "srun or RANK/WORLD_SIZE), whose gradient all-reduces wait on the host inside the step";
  }
  if (s.zero > 0) {
    return flag + "not with --zero " + std::to_string(s.zero) +
           ": the sharded optimizer's gathers are collectives between ranks";
  }
  // Muon's learning rate is a host number in its update (AdamW's is a device scalar the graph reads).
  if (s.optimizer == OptimizerKind::muon) {
    return flag + "not with --optimizer muon: Muon's learning rate is a host number baked into its kernels at "
                  "capture (AdamW reads its rate from the device)";
  }
  // Recomputation saves the random generator's state on the host in forward and restores it in backward,
  // which CUDA refuses during a capture.
  if (s.recompute != Recompute::none) {
    return flag + "not with --recompute: recomputing saves and restores the random generator's state on the "
                  "host, which a CUDA graph capture refuses";
  }
  // SFT reads a step's micro-batches as new tensors ahead of the step and divides by their trained-token
  // count: not the fixed input tensors a graph replays.
  if (s.sft) {
    return flag + "not with --sft: a step's conversations come as new tensors and their trained-token count "
                  "changes, where a graph replays fixed ones";
  }
  return "";
}

}  // namespace mygpt
