#pragma once
// Watches a communicator's collectives from a thread of its own, as PyTorch's NCCL process group does:
// the training thread only enqueues work and never spins on the host. A collective unfinished
// --comm-timeout seconds after it could start, or an error the device reports, aborts the communicator
// and ends the job through on_failure. The device is reached only through WatchedDevice and
// DeviceEvent (CUDA events and NCCL in nccl_watchdog.cpp; fakes in tests/test_collective_watchdog.cpp),
// so the rules here are tested without a GPU.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace mygpt {

// A point in a device stream (an event recorded there).
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // Whether the stream has passed this point; throws std::runtime_error on a device error.
  virtual bool reached() = 0;
};

// What the watchdog does to the device and the communicator it watches.
class WatchedDevice {
 public:
  virtual ~WatchedDevice() = default;
  // Called once, first thing in the watchdog's thread, before any query: makes this rank's GPU the
  // thread's current device (else the first CUDA call would open a context on GPU 0).
  virtual void bind_thread() = 0;
  // An error the communicator reports asynchronously (a peer gone), or "" while there is none.
  virtual std::string async_error() = 0;
  // Aborts the communicator: frees kernels stuck waiting for a peer. Idempotent.
  virtual void abort() = 0;
};

// The line every backend's timeout ends the job with (NCCL's watchdog here, MPI's polled requests in
// mpi_communicator.cpp): which collective and how long; the job's failure line adds the rank.
std::string collective_timeout_message(const std::string& what, double timeout_seconds);

class CollectiveWatchdog {
 public:
  // timeout_seconds 0 waits forever (errors are still watched). on_failure gets one line and should end
  // the job; it is called from the watchdog's thread, after abort().
  CollectiveWatchdog(WatchedDevice& device, double timeout_seconds,
                     std::function<void(const std::string&)> on_failure);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Watches one collective: `ready` is reached when its stream could start it (recorded just before it),
  // `done` when it has finished (recorded just after). Collectives of one communicator run in the order
  // they are watched, so the clock of each starts when its own ready point and its predecessor's done
  // point are both passed: a rank that is late to a collective (writing a checkpoint) does not use up
  // the time its peers are given for the collectives before.
  void watch(std::shared_ptr<DeviceEvent> ready, std::shared_ptr<DeviceEvent> done, std::string what);
  size_t pending() const;  // collectives not finished yet

  // While a CUDA graph is captured, a device query from any thread (cudaEventQuery, NCCL's async error)
  // invalidates the capture. The capturing thread holds a Pause from before capture begins until after
  // it ends: pause() returns once the watchdog's thread is out of any query, and that thread makes no
  // device call until the last Pause is gone. Time paused counts toward no collective's timeout.
  class [[nodiscard]] Pause {
   public:
    explicit Pause(CollectiveWatchdog& watchdog);
    ~Pause();
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;

   private:
    CollectiveWatchdog& watchdog_;
  };
  Pause pause() { return Pause(*this); }
  bool failed() const { return failed_; }

 private:
  struct Watched {
    std::shared_ptr<DeviceEvent> ready, done;
    std::string what;
  };
  void run();
  void fail(const std::string& message);
  // One look at the oldest collective; returns true when it has finished.
  bool check(const Watched& oldest, std::optional<std::chrono::steady_clock::time_point>& started);

  WatchedDevice& device_;
  double timeout_seconds_;
  std::function<void(const std::string&)> on_failure_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable out_of_query_;
  std::deque<Watched> queue_;
  bool stopping_ = false;
  int pauses_ = 0;
  bool querying_ = false;  // the watchdog's thread is in a device call
  std::atomic<bool> failed_{false};
  std::thread thread_;  // last: starts once everything above is constructed
};

}  // namespace mygpt
