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

}  // namespace mygpt
