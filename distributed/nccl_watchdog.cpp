#include "distributed/nccl_watchdog.h"

#include <exception>
#include <iostream>
#include <stdexcept>

#include "distributed/deadline_poll.h"

namespace mygpt {

CudaEvent::CudaEvent() {
  if (cudaEventCreateWithFlags(&event_, cudaEventDisableTiming) != cudaSuccess) {
    throw std::runtime_error("cudaEventCreate failed");
  }
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

bool CudaEvent::reached() {
  const cudaError_t state = cudaEventQuery(event_);
  if (state == cudaSuccess) return true;
  if (state == cudaErrorNotReady) return false;
  throw std::runtime_error(std::string("CUDA error in a collective's stream: ") + cudaGetErrorString(state));
}

NcclComm::~NcclComm() {
  // While an exception unwinds (this rank failed) peers may still be waiting in a collective with us,
  // or may be gone: a destroy could block forever, an abort cannot.
  if (std::uncaught_exceptions() > 0) abort_on_close_ = true;
  if (abort_on_close_) {
    abort();
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) return;
  // The communicator is non-blocking: finalize answers ncclInProgress while it flushes, and the async
  // error says when that is over (nothing else polls it now: the watchdog's thread has ended).
  const auto finished = [&](ncclResult_t result) {
    if (result == ncclSuccess) return true;
    if (result == ncclInProgress) return false;
    throw std::runtime_error(std::string("ncclCommFinalize failed: ") + ncclGetErrorString(result));
  };
  close_within_deadline(
      {.finalize = [&] { return finished(ncclCommFinalize(comm_)); },
       .done =
           [&] {
             ncclResult_t state = ncclSuccess;
             const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
             return finished(queried != ncclSuccess ? queried : state);
           },
       .destroy = [&] { ncclCommDestroy(comm_); },
       .abort =
           [&] {
             aborted_ = true;
             ncclCommAbort(comm_);
           }},
      close_timeout_seconds_, "closing the NCCL communicator (ncclCommFinalize)",
      [](const std::string& line) { std::cerr << "mygpt-ddp: warning: " + line + "\n" << std::flush; });
}

void NcclComm::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.exchange(true)) return;
  ncclCommAbort(comm_);
}

ncclResult_t NcclComm::async_error() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) return ncclInvalidUsage;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
  return queried != ncclSuccess ? queried : state;
}

void NcclWatchedDevice::bind_thread() {
  // A new thread's current device is 0: without this, every rank would open a context on GPU 0 at the
  // first event query (about 0.5 GiB each), and fail where GPUs are in exclusive-process mode.
  const cudaError_t result = cudaSetDevice(device_index_);
  if (result != cudaSuccess) throw std::runtime_error(cudaGetErrorString(result));
}

std::string NcclWatchedDevice::async_error() {
  if (comm_.aborted()) return "";  // the watchdog aborted it itself, and has said why
  const ncclResult_t error = comm_.async_error();
  if (error == ncclSuccess || error == ncclInProgress) return "";
  return ncclGetErrorString(error);
}

}  // namespace mygpt
