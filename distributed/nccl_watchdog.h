#pragma once
// The collective watchdog (collective_watchdog.h) over CUDA events and an NCCL communicator. Built only
// with NCCL (CUDA code).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "distributed/collective_watchdog.h"

namespace mygpt {

// An event without timing, destroyed with its last owner (the waiting stream may still use it then).
class CudaEvent final : public DeviceEvent {
 public:
  CudaEvent();
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  bool reached() override;

 private:
  cudaEvent_t event_ = nullptr;
};

// Owns an NCCL communicator: an aborted one is never destroyed (abort frees it), and a healthy one is
// destroyed only when nothing is pending, since a destroy waits for peers that may be gone. Even then the
// close is non-blocking (finalize, polled to close_timeout_seconds, then destroy): a peer that died after
// its last collective must not hang this rank at its exit; on expiry one line says so and it is aborted.
class NcclComm {
 public:
  NcclComm(ncclComm_t comm, double close_timeout_seconds) : comm_(comm), close_timeout_seconds_(close_timeout_seconds) {}
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ncclComm_t get() const { return comm_; }
  void abort();  // idempotent, from any thread
  bool aborted() const { return aborted_; }
  // ncclCommGetAsyncError, one thread at a time: the main thread polls it while a non-blocking call is in
  // progress and the watchdog's thread polls it for errors; an aborted communicator reads as failed.
  ncclResult_t async_error();
  // The destructor aborts instead of destroying: set when work may be pending or a peer may be gone.
  void abort_on_close() { abort_on_close_ = true; }

 private:
  ncclComm_t comm_;
  double close_timeout_seconds_;
  std::mutex mutex_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> abort_on_close_{false};
};

// The communicator and GPU the watchdog's thread works with.
class NcclWatchedDevice final : public WatchedDevice {
 public:
  NcclWatchedDevice(NcclComm& comm, int device_index) : comm_(comm), device_index_(device_index) {}
  void bind_thread() override;
  std::string async_error() override;
  void abort() override { comm_.abort(); }

 private:
  NcclComm& comm_;
  int device_index_;
};

class NcclWatchdog {
 public:
  NcclWatchdog(NcclComm& comm, int device_index, double timeout_seconds,
               std::function<void(const std::string&)> on_failure)
      : device_(comm, device_index), comm_(comm), watchdog_(device_, timeout_seconds, std::move(on_failure)) {}
  ~NcclWatchdog() {
    if (watchdog_.pending() > 0) comm_.abort_on_close();  // the communicator must not wait for these
  }
  void watch(std::shared_ptr<CudaEvent> ready, std::shared_ptr<CudaEvent> done, std::string what) {
    watchdog_.watch(std::move(ready), std::move(done), std::move(what));
  }
  size_t pending() const { return watchdog_.pending(); }
  bool failed() const { return watchdog_.failed(); }

 private:
  NcclWatchedDevice device_;
  NcclComm& comm_;
  CollectiveWatchdog watchdog_;  // last: its thread uses device_
};

}  // namespace mygpt
