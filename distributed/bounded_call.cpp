#include "distributed/bounded_call.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace mygpt {

void run_within(std::chrono::milliseconds limit, std::function<void()> work,
                const std::function<std::string()>& late_message) {
  if (limit.count() <= 0) {
    work();
    return;
  }
  struct Outcome {
    std::mutex mutex;
    std::condition_variable finished;
    bool done = false;
    std::exception_ptr error;
  };
  auto outcome = std::make_shared<Outcome>();
  // Detached: a late call is never joined (it may never return); it keeps `outcome` alive itself.
  std::thread([outcome, work = std::move(work)] {
    std::exception_ptr error;
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(outcome->mutex);
    outcome->done = true;
    outcome->error = error;
    outcome->finished.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(outcome->mutex);
  if (!outcome->finished.wait_for(lock, limit, [&] { return outcome->done; })) throw std::runtime_error(late_message());
  if (outcome->error) std::rethrow_exception(outcome->error);
}

}  // namespace mygpt
