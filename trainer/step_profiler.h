#pragma once
// `train --profile FILE`: PyTorch's profiler (Kineto: CPU operators, and CUDA kernels and copies where the
// device is a GPU) around a few steps, written as a Chrome/Perfetto trace (ui.perfetto.dev opens it;
// scripts/profile_summary.py sums its kernels by kind and the gaps between them). The profiled steps come
// after the first 10 (where cuBLAS, cuDNN and the caching allocator warm up), or as late as a shorter run
// allows. The trace is written to FILE.tmp and renamed, so FILE is whole or absent.
#include <cstdint>
#include <string>

namespace mygpt {

class StepProfiler {
 public:
  // Off when path is empty. Steps [first, first + count) of a run of steps [start_step, steps).
  StepProfiler(std::string path, int64_t count, int64_t start_step, int64_t steps);
  ~StepProfiler();  // a run that ends inside the window still writes what it profiled
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void before_step(int64_t step);
  // Returns a line for the log once the trace is written (empty otherwise).
  std::string after_step(int64_t step);

  int64_t last_step() const { return first_ + count_ - 1; }

 private:
  std::string finish();

  std::string path_;
  int64_t count_{};
  int64_t first_{};
  int64_t end_{};        // the run's last step + 1: a window past it ends with the run
  int64_t last_run_{-1};  // the last step traced so far
  bool active_ = false;
};

// The first profiled step: 10 when the run has room for `count` steps after it, else as late as it allows
// (never before start_step).
int64_t first_profiled_step(int64_t count, int64_t start_step, int64_t steps);

}  // namespace mygpt
