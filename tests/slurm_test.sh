#!/usr/bin/env bash
# scripts/slurm/train_gpt2.sbatch under a fake Slurm: `srun` and `scontrol` are stand-ins on the PATH
# that record their arguments; srun plays a run that stops early with a checkpoint, one that finishes,
# and one that fails. Checks the #SBATCH lines (signal to the tasks before the time limit, requeue, a
# log path that needs no folder) and that only an early stop requeues the job.
# Usage: slurm_test.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
make_work_dir slurm
SCRIPT="$REPO_DIR/scripts/slurm/train_gpt2.sbatch"

check "the script parses (bash -n)" bash -n "$SCRIPT"
check "#SBATCH --signal=TERM@180: the tasks (no B:) get SIGTERM 3 minutes before the limit" \
  grep -qx "#SBATCH --signal=TERM@180" "$SCRIPT"
check "#SBATCH --requeue" grep -qx "#SBATCH --requeue" "$SCRIPT"
output=$(sed -n 's/^#SBATCH --output=//p' "$SCRIPT")
check "the log path ($output) names no folder that Slurm would need to exist" test "${output#*/}" = "$output"

mkdir -p "$WORK/fake"
cat >"$WORK/fake/srun" <<'SRUN'
#!/usr/bin/env bash
printf '%s\n' "$*" >>"$WORK/srun.args"
out=""; prev=""
for a in "$@"; do [[ $prev == --out ]] && out=$a; prev=$a; done
case "$FAKE_SRUN" in
  stop) touch "$out/ckpt_00000005.pt"; exit 0 ;;
  finish) touch "$out/$(printf 'ckpt_%08d.pt' "$STEPS")"; exit 0 ;;
  fail) exit 1 ;;
esac
SRUN
printf '#!/usr/bin/env bash\nprintf "%%s\\n" "$*" >>"$WORK/scontrol.args"\n' >"$WORK/fake/scontrol"
printf '#!/usr/bin/env bash\nexit 0\n' >"$WORK/fake/mygpt-ddp"
chmod +x "$WORK/fake/srun" "$WORK/fake/scontrol" "$WORK/fake/mygpt-ddp"

# job MODE: the batch script as Slurm would run it, srun playing MODE; exit status in RC.
job() {
  rm -rf "$WORK/out" "$WORK/srun.args" "$WORK/scontrol.args"
  env WORK="$WORK" FAKE_SRUN="$1" PATH="$WORK/fake:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=1 \
    SLURM_NTASKS_PER_NODE=2 SLURM_NTASKS=2 SLURM_JOB_NODELIST=node1 SLURM_CPUS_PER_TASK=1 \
    REPO="$REPO_DIR" DATA_DIR="$WORK/data" OUT_DIR="$WORK/out" BINARY="$WORK/fake/mygpt-ddp" HELLASWAG="" STEPS=10 \
    bash "$SCRIPT" >"$WORK/job_$1.out" 2>&1
  RC=$?
}

job stop
check "an early stop with a checkpoint exits 0 (exit $RC)" test "$RC" -eq 0
check "... and requeues the job (scontrol requeue 42)" grep -qx "requeue 42" "$WORK/scontrol.args"
check "srun runs the binary with --mpi=pmix and --resume auto" grep -q -- "--mpi=pmix .*--resume auto" "$WORK/srun.args"
job finish
check "a finished run exits 0 (exit $RC)" test "$RC" -eq 0
check "... and is not requeued" test ! -e "$WORK/scontrol.args"
job fail
check "a failed run keeps its exit status (exit $RC)" test "$RC" -eq 1
check "... and is not requeued" test ! -e "$WORK/scontrol.args"
finish
