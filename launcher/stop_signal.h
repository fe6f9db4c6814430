#pragma once
// SIGINT, SIGTERM and SIGUSR1 ask a training run to stop: it finishes the step (or cuts an evaluation or a
// sample short), writes a checkpoint and exits 0, so that `--resume auto` continues where it stopped
// (Slurm sends SIGTERM before preempting).
// Further signals while the checkpoint is written are ignored (only SIGKILL ends the process at once).
namespace mygpt {

void install_stop_signal_handlers();
bool stop_requested();

}  // namespace mygpt
