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

}  // namespace mygpt
