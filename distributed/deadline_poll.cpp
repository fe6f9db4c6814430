#include "distributed/deadline_poll.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "common/strprintf.h"

namespace mygpt {

void poll_until_done(const std::function<bool()>& done, double timeout_seconds, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  while (!done()) {
    if (timeout_seconds > 0 && std::chrono::duration<double>(Clock::now() - start).count() > timeout_seconds) {
      throw std::runtime_error(strprintf("%s did not complete within --comm-timeout %g s: a rank is missing or "
                                         "cannot reach the others (NCCL_DEBUG=INFO says where it stopped)",
                                         what.c_str(), timeout_seconds));
    }
    // NCCL's initialization takes from milliseconds to seconds; a millisecond between looks costs nothing.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void close_within_deadline(const CommunicatorClosing& steps, double timeout_seconds, const std::string& what,
                           const std::function<void(const std::string&)>& say) noexcept {
  std::string failure;
  try {
    if (!steps.finalize()) poll_until_done(steps.done, timeout_seconds, what);
    steps.destroy();
    return;
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = what + " failed";
  }
  // Each step alone: a line that cannot be written must not keep the communicator from its abort. Nothing
  // is left to do after a failed abort: the process ends, and the driver frees what the communicator held.
  try {
    say(failure + "; aborting it instead");
  } catch (...) {
  }
  try {
    steps.abort();
  } catch (...) {
  }
}

}  // namespace mygpt
