#pragma once
// Which process a pid names, beyond the number. Pids are reused: after a reboot every small pid is taken
// again, and in a container the trainer is PID 1 at every start. So a claim that names only a pid cannot
// tell its holder from a stranger. The host's boot (its random boot id) and the process's start within
// that boot together name one process for the host's whole life.
#include <sys/types.h>

#include <optional>
#include <string>

namespace mygpt {

// "<boot id>/<start, in clock ticks since boot>" of a live process; "" where the system does not say
// (not Linux, no /proc, the process gone).
std::string process_start_identity(pid_t pid);

// The boot id alone (the part before '/' of process_start_identity); "" where unknown.
std::string boot_identity();

// When a live process started, in seconds since the epoch (to about a second: the kernel gives the boot
// time in whole seconds); nullopt where unknown.
std::optional<double> process_start_time(pid_t pid);

// Whether `pid` has exited but is not yet reaped (a zombie: Linux's state Z or X). kill(pid, 0) still
// succeeds on it, yet it holds nothing: under mpirun a rank outlives its launcher this way until an init
// reaps it, and in a container whose PID 1 reaps nothing, for good. False where the system does not say.
bool process_has_exited(pid_t pid);

}  // namespace mygpt
