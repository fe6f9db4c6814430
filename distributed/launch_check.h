#pragma once
// Launchers that would start several copies of a job that do not know of each other: `srun` without
// MPI wiring (each task an MPI world of 1) or torchrun-style variables without MPI. Every copy would
// train alone and write to the same --out; the job is refused instead.
#include "distributed/mpi_world.h"

namespace mygpt {

// Throws std::invalid_argument (one line naming the variable and the fix) when the launcher's
// variables announce more ranks than the MPI world has.
void require_consistent_launch(const WorldInfo& world);

}  // namespace mygpt
