#include "distributed/nccl_watchdog.h"

#include <exception>

namespace mygpt {

CudaEvent::CudaEvent() {
  if (cudaEventCreateWithFlags(&event_, cudaEventDisableTiming) != cudaSuccess) {
    throw std::runtime_error("cudaEventCreate failed");
  }
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
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
  if (!aborted_) ncclCommDestroy(comm_);
}

void NcclComm::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.exchange(true)) return;
  ncclCommAbort(comm_);
}

NcclWatchdog::NcclWatchdog(NcclComm& comm, double timeout_seconds, std::function<void(const std::string&)> on_failure)
    : comm_(comm), timeout_seconds_(timeout_seconds), on_failure_(std::move(on_failure)), thread_([this] { run(); }) {}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (!queue_.empty()) comm_.abort_on_close();  // the communicator must not wait for these
  }
  wake_.notify_one();
  thread_.join();
}

void NcclWatchdog::watch(std::shared_ptr<CudaEvent> done, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(done), std::move(what), std::chrono::steady_clock::now()});
  }
  wake_.notify_one();
}

size_t NcclWatchdog::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void NcclWatchdog::fail(const std::string& message) {
  failed_ = true;
  comm_.abort();  // releases kernels stuck waiting for a peer
  on_failure_(message);
}

void NcclWatchdog::run() {
  using namespace std::chrono;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      continue;
    }
    // Collectives finish in the order they were issued on a communicator: watch the oldest.
    const Watched oldest = queue_.front();
    lock.unlock();
    const cudaError_t state = cudaEventQuery(oldest.done->get());
    ncclResult_t async_error = ncclSuccess;
    ncclCommGetAsyncError(comm_.get(), &async_error);
    const double waited = duration<double>(steady_clock::now() - oldest.since).count();
    if (async_error != ncclSuccess && async_error != ncclInProgress) {
      fail(std::string("NCCL error during ") + oldest.what + ": " + ncclGetErrorString(async_error));
      return;
    }
    if (state != cudaSuccess && state != cudaErrorNotReady) {
      fail(std::string("CUDA error while waiting for ") + oldest.what + ": " + cudaGetErrorString(state));
      return;
    }
    if (state == cudaErrorNotReady && timeout_seconds_ > 0 && waited > timeout_seconds_) {
      fail("NCCL " + oldest.what + " did not finish within --comm-timeout " + std::to_string(timeout_seconds_) +
           " s: a peer rank is gone or stuck");
      return;
    }
    lock.lock();
    if (state == cudaSuccess) {
      queue_.pop_front();
    } else {
      // Not done: look again soon, without holding the lock the training thread needs to enqueue.
      wake_.wait_for(lock, milliseconds(2), [this] { return stopping_; });
    }
  }
}

}  // namespace mygpt
