#include "distributed/launch_check.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mygpt {
namespace {

// The positive integer in an environment variable, 0 when it is unset or not a number.
long env_count(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  return end != value && *end == '\0' && n > 0 ? n : 0;
}

}  // namespace

void require_consistent_launch(const WorldInfo& world) {
  // Set by srun for the tasks of a job step (not in the batch script itself).
  const long slurm_tasks = env_count("SLURM_STEP_NUM_TASKS");
  if (slurm_tasks > 1 && world.world_size == 1) {
    throw std::invalid_argument("srun started " + std::to_string(slurm_tasks) +
                                " tasks (SLURM_STEP_NUM_TASKS) but MPI sees a world of 1 in each: they would train "
                                "apart into one --out; start them with srun --mpi=pmix (see srun --mpi=list), or "
                                "mpirun");
  }
  const long torch_world = env_count("WORLD_SIZE");
  if (torch_world > 1 && world.world_size != torch_world) {
    throw std::invalid_argument("WORLD_SIZE=" + std::to_string(torch_world) + " (a torchrun-style launcher) but MPI sees " +
                                std::to_string(world.world_size) +
                                " rank(s): mygpt-ddp ranks are started by mpirun -np N or srun --mpi=pmix, not torchrun");
  }
}

}  // namespace mygpt
