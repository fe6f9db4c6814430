# Sourced by the scripts that start ranks: lets Open MPI run as root (containers, CI) and on machines
# with fewer cores than ranks. Users on clusters use their own mpirun/srun flags instead.
MYGPT_MPIRUN=(mpirun --oversubscribe)
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
