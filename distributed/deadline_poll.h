#pragma once
// Waiting on the host for something a library finishes in the background (NCCL's non-blocking
// communicator: its initialization, or a call that answered "in progress"), with --comm-timeout as the
// deadline. The rule is here, apart from NCCL, so that it is tested without a GPU.
#include <functional>
#include <string>

namespace mygpt {

// Calls done() until it returns true; done() throws on an error, which passes through. Once
// timeout_seconds have passed (0: never) it throws std::runtime_error naming `what` and the timeout, in
// one line. Either way the caller aborts what it waited for (NCCL: ncclCommAbort).
void poll_until_done(const std::function<bool()>& done, double timeout_seconds, const std::string& what);

// How a non-blocking communicator is closed (NCCL: ncclCommFinalize, ncclCommGetAsyncError,
// ncclCommDestroy, ncclCommAbort). finalize() starts flushing the communicator's work and returns true if
// that is done already, false while in progress; done() is polled until true; both throw on an error.
struct CommunicatorClosing {
  std::function<bool()> finalize;
  std::function<bool()> done;
  std::function<void()> destroy;  // frees what is left locally; only after a finished finalize
  std::function<void()> abort;
};

// Closes within the deadline: finalize, poll to timeout_seconds (0: never expires), destroy. A finalize
// that fails or outlives the deadline is aborted instead: a blocking destroy would wait for peers that
// may be gone, and a rank at its exit must not hang. Then say() gets one line naming what happened.
// Never throws: it runs in destructors.
void close_within_deadline(const CommunicatorClosing& steps, double timeout_seconds, const std::string& what,
                           const std::function<void(const std::string&)>& say) noexcept;

}  // namespace mygpt
