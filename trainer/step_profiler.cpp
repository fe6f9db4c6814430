#include "trainer/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

namespace mygpt {

namespace {
constexpr int64_t kWarmupSteps = 10;
}  // namespace

int64_t first_profiled_step(int64_t count, int64_t start_step, int64_t steps) {
  return std::max(start_step, std::min(start_step + kWarmupSteps, steps - count));
}

StepProfiler::StepProfiler(std::string path, int64_t count, int64_t start_step, int64_t steps)
    : path_(std::move(path)), count_(count), first_(first_profiled_step(count, start_step, steps)), end_(steps) {}

StepProfiler::~StepProfiler() {
  if (active_) finish();
}

void StepProfiler::before_step(int64_t step) {
  if (path_.empty() || active_ || step != first_) return;
  namespace prof = torch::profiler::impl;
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (torch::cuda::is_available()) {
    activities.insert(prof::ActivityType::CUDA);
  } else {
    // Kineto probes for GPUs at start and logs each failure as an ERROR line: noise on a CPU machine.
    setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  }
  torch::autograd::profiler::prepareProfiler(prof::ProfilerConfig(prof::ProfilerState::KINETO), activities);
  torch::autograd::profiler::enableProfiler(prof::ProfilerConfig(prof::ProfilerState::KINETO), activities);
  active_ = true;
}

std::string StepProfiler::after_step(int64_t step) {
  if (!active_) return "";
  last_run_ = step;
  if (step < last_step() && step + 1 < end_) return "";
  return finish();
}

std::string StepProfiler::finish() {
  active_ = false;
  auto result = torch::autograd::profiler::disableProfiler();
  const std::string tmp = path_ + ".tmp";
  result->save(tmp);
  std::error_code error;
  std::filesystem::rename(tmp, path_, error);
  if (error) {
    std::filesystem::remove(tmp, error);
    return "profile: could not write " + path_;
  }
  return "profile: steps " + std::to_string(first_) + "-" + std::to_string(last_run_) + " traced into " + path_ +
         " (open at ui.perfetto.dev; scripts/profile_summary.py " + path_ + ")";
}

}  // namespace mygpt
