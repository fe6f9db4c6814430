#include "launcher/stop_signal.h"

#include <unistd.h>
#include <csignal>

namespace mygpt {
namespace {

volatile std::sig_atomic_t g_stop_signals = 0;

void on_stop_signal(int signal_number) {
  g_stop_signals = g_stop_signals + 1;
  if (g_stop_signals > 1) _exit(128 + signal_number);  // the user insists: no checkpoint, end now
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() { return g_stop_signals > 0; }

}  // namespace mygpt
