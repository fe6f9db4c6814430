#pragma once
// Watches every NCCL collective of one communicator from a thread of its own, as PyTorch's NCCL process
// group does. The training thread only enqueues collectives and stream waits and never spins on the
// host; the watchdog polls the events recorded after each collective. A collective unfinished after the
// timeout, or an error NCCL reports asynchronously (a peer gone), aborts the communicator and then the
// whole job through on_failure. Built only with NCCL (CUDA code).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace mygpt {

// An event without timing, destroyed with its last owner (the waiting stream may still use it then).
class CudaEvent {
 public:
  CudaEvent();
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Owns an NCCL communicator: an aborted one is never destroyed (abort frees it), and a healthy one is
// destroyed only when nothing is pending, since a destroy waits for peers that may be gone.
class NcclComm {
 public:
  explicit NcclComm(ncclComm_t comm) : comm_(comm) {}
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ncclComm_t get() const { return comm_; }
  void abort();  // idempotent, from any thread
  bool aborted() const { return aborted_; }
  // The destructor aborts instead of destroying: set when work may be pending or a peer may be gone.
  void abort_on_close() { abort_on_close_ = true; }

 private:
  ncclComm_t comm_;
  std::mutex mutex_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> abort_on_close_{false};
};

class NcclWatchdog {
 public:
  // timeout_seconds 0 waits forever (errors are still watched).
  NcclWatchdog(NcclComm& comm, double timeout_seconds, std::function<void(const std::string&)> on_failure);
  ~NcclWatchdog();
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // Watches the collective whose completion `done` marks (recorded right after it on its stream).
  void watch(std::shared_ptr<CudaEvent> done, std::string what);
  // Collectives not finished yet.
  size_t pending() const;
  bool failed() const { return failed_; }

 private:
  struct Watched {
    std::shared_ptr<CudaEvent> done;
    std::string what;
    std::chrono::steady_clock::time_point since;
  };
  void run();
  void fail(const std::string& message);

  NcclComm& comm_;
  double timeout_seconds_;
  std::function<void(const std::string&)> on_failure_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Watched> queue_;
  bool stopping_ = false;
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

}  // namespace mygpt
