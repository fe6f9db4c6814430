# Sourced by the scripts that start ranks: lets Open MPI run as root (containers, CI) and on machines
# with fewer cores than ranks. Users on clusters use their own mpirun/srun flags instead.
# --bind-to none: for 2 ranks or fewer Open MPI would pin each rank, and all its threads, to one core.
MYGPT_MPIRUN=(mpirun --oversubscribe --bind-to none)
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
