#pragma once
// A call into a library that may block with no way to interrupt it, given a deadline of our own.
// c10d's TCPStore bounds only some of its waits: its ping after connecting, and the replies to check, add,
// compareSet and set, are read from a socket with no timeout, so a listener that accepts the connection
// and never answers (another program on MASTER_PORT, a stopped rank 0) holds the caller forever. A recv
// blocked in another library cannot be cancelled from outside, so the call runs on a thread of its own:
// on time, its result or exception comes back; late, the caller gets one line (and the process ends
// with it) while the thread stays blocked, owning only what the call captured by value.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace mygpt {

// Runs `work` and waits for it at most `limit` (zero or less: no limit, run on this thread). Late, throws
// std::runtime_error(late_message()); `work` must then own everything it touches (capture by value).
void run_within(std::chrono::milliseconds limit, std::function<void()> work,
                const std::function<std::string()>& late_message);

template <class T>
T call_within(std::chrono::milliseconds limit, std::function<T()> work,
              const std::function<std::string()>& late_message) {
  // The result lives in shared memory: a late call writes it after this frame is gone.
  auto result = std::make_shared<std::optional<T>>();
  run_within(limit, [result, work = std::move(work)] { *result = work(); }, late_message);
  return std::move(**result);
}

}  // namespace mygpt
