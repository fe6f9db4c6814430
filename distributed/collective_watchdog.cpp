#include "distributed/collective_watchdog.h"

#include <stdexcept>

#include "common/strprintf.h"

namespace mygpt {

std::string collective_timeout_message(const std::string& what, double timeout_seconds) {
  return strprintf("%s did not finish within --comm-timeout %g s of its start: a peer rank is gone or stuck",
                   what.c_str(), timeout_seconds);
}

CollectiveWatchdog::CollectiveWatchdog(WatchedDevice& device, double timeout_seconds,
                                       std::function<void(const std::string&)> on_failure)
    : device_(device), timeout_seconds_(timeout_seconds), on_failure_(std::move(on_failure)), thread_([this] { run(); }) {}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CollectiveWatchdog::watch(std::shared_ptr<DeviceEvent> ready, std::shared_ptr<DeviceEvent> done,
                               std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(ready), std::move(done), std::move(what)});
  }
  wake_.notify_one();
}

size_t CollectiveWatchdog::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

CollectiveWatchdog::Pause::Pause(CollectiveWatchdog& watchdog) : watchdog_(watchdog) {
  std::unique_lock<std::mutex> lock(watchdog_.mutex_);
  ++watchdog_.pauses_;
  watchdog_.out_of_query_.wait(lock, [this] { return !watchdog_.querying_; });
}

CollectiveWatchdog::Pause::~Pause() {
  {
    std::lock_guard<std::mutex> lock(watchdog_.mutex_);
    --watchdog_.pauses_;
  }
  watchdog_.wake_.notify_one();
}

void CollectiveWatchdog::fail(const std::string& message) {
  failed_ = true;
  device_.abort();  // releases kernels stuck waiting for a peer
  on_failure_(message);
}

bool CollectiveWatchdog::check(const Watched& oldest, std::optional<std::chrono::steady_clock::time_point>& started) {
  using namespace std::chrono;
  const std::string async_error = device_.async_error();
  if (!async_error.empty()) throw std::runtime_error("NCCL error during " + oldest.what + ": " + async_error);
  // Its predecessor has finished (it is the oldest now): it may start once its stream is ready.
  if (!started && oldest.ready->reached()) started = steady_clock::now();
  if (oldest.done->reached()) return true;
  if (started && timeout_seconds_ > 0 && duration<double>(steady_clock::now() - *started).count() > timeout_seconds_) {
    throw std::runtime_error(collective_timeout_message("NCCL " + oldest.what, timeout_seconds_));
  }
  return false;
}

void CollectiveWatchdog::run() {
  try {
    device_.bind_thread();
  } catch (const std::exception& e) {
    fail(std::string("the collective watchdog cannot select its device: ") + e.what());
    return;
  }
  std::optional<std::chrono::steady_clock::time_point> started;  // of the oldest collective
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (pauses_ > 0) {
      const auto paused_at = std::chrono::steady_clock::now();
      wake_.wait(lock, [this] { return stopping_ || pauses_ == 0; });
      if (started) *started += std::chrono::steady_clock::now() - paused_at;
      continue;
    }
    if (queue_.empty()) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      continue;
    }
    const Watched oldest = queue_.front();
    querying_ = true;
    lock.unlock();  // queries can take a while: the training thread must still be able to enqueue
    bool finished = false;
    std::optional<std::string> failure;
    try {
      finished = check(oldest, started);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    lock.lock();
    querying_ = false;
    out_of_query_.notify_all();
    if (failure) {
      lock.unlock();
      fail(*failure);
      return;
    }
    if (finished) {
      queue_.pop_front();
      started.reset();
    } else {
      wake_.wait_for(lock, std::chrono::milliseconds(2), [this] { return stopping_; });
    }
  }
}

}  // namespace mygpt
