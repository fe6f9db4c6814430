#include "launcher/stop_signal.h"

#include <csignal>

namespace mygpt {
namespace {

volatile std::sig_atomic_t g_stop_signals = 0;

// Only counts: the training loop sees the request at its next step, every rank stops at the same step
// and rank 0 writes a checkpoint. Further signals while that is under way are counted and ignored, so an
// impatient second Ctrl-C or a launcher's repeated SIGTERM cannot lose the checkpoint (SIGKILL still can).
void on_stop_signal(int) { g_stop_signals = g_stop_signals + 1; }

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in flight carry on rather than fail with EINTR
  // SIGUSR1 too: Open MPI's mpirun forwards it to every rank (SIGTERM makes mpirun itself end the job
  // with exit 1, even after the ranks saved their checkpoint and exited 0).
  for (int signal : {SIGINT, SIGTERM, SIGUSR1}) sigaction(signal, &action, nullptr);
}

bool stop_requested() { return g_stop_signals > 0; }

}  // namespace mygpt
