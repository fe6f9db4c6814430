# Sourced by the scripts that start ranks: lets Open MPI run as root (containers, CI) and on machines
# with fewer cores than ranks. Users on clusters use their own mpirun/srun flags instead.
# --bind-to none: for 2 ranks or fewer Open MPI would pin each rank, and all its threads, to one core.
# After `scripts/setup.sh --offline`, Open MPI lives in .deps/: its env.sh puts that mpirun and those
# libraries on the paths (Debian's libmpi names its own folder in RUNPATH, so the binary's RPATH alone
# does not find libopen-rte and friends).
mygpt_repo_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
[ -f "$mygpt_repo_dir/.deps/env.sh" ] && source "$mygpt_repo_dir/.deps/env.sh"
MYGPT_MPIRUN=(mpirun --oversubscribe --bind-to none)
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
