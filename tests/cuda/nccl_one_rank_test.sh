#!/usr/bin/env bash
# The whole multi-rank NCCL path on one GPU (CTest label `cuda`): a one-rank job started by a launcher
# (`mpirun -np 1`, or `torchrun --nproc-per-node 1`) with --device cuda takes the route of a larger job
# (NCCL's unique id through MPI, or through Gloo over a c10d store; the NCCL communicator, gradient
# bucket views and autograd hooks with overlap, the watchdog on every collective, the stop flag
# all-reduced each step), and its per-step losses and final weights must equal a plain single-process
# CUDA run's. Then a stop signal to the launcher (SIGUSR1 to mpirun, SIGTERM to torchrun, which passes it
# on) must stop the one-rank NCCL job with a checkpoint. Exits 77 (CTest: skipped) with one line where no
# GPU is visible. With DEVICE cpu the same checks run the MPI or Gloo backend (a test of this script and
# of the one-rank paths on machines without a GPU).
#
#   bash nccl_one_rank_test.sh <mygpt-ddp> <mpirun or torchrun> <python-with-torch> [DEVICE: cuda (default) | cpu]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
use_binary "${1:-}"
launcher_path=${2:-mpirun}
python=${3:-python3}
device=${4:-cuda}
if [[ $(basename "$launcher_path") == torchrun ]]; then
  launcher=torchrun
  LAUNCH=("$launcher_path" --standalone --nproc-per-node 1 --no-python)
  # A node whose torch has no torchrun script on the PATH still has the module.
  [[ -x $launcher_path ]] || LAUNCH=("$python" -m torch.distributed.run --standalone --nproc-per-node 1 --no-python)
  stop_signal=TERM
  backend=nccl; [[ $device == cpu ]] && backend=gloo
else
  launcher=mpirun
  use_mpirun "$launcher_path"
  [[ ${#MPIRUN[@]} -gt 0 ]] || { echo "SKIP: no mpirun"; exit 77; }
  LAUNCH=("${MPIRUN[@]}" -np 1)
  stop_signal=USR1  # mpirun forwards SIGUSR1 to its ranks (SIGTERM it would answer itself)
  backend=nccl; [[ $device == cpu ]] && backend=mpi
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [[ $device == cuda && ${gpus:-0} -lt 1 ]]; then
  echo "SKIP: the one-rank NCCL test needs a GPU (nvidia-smi -L shows none)"
  exit 77
fi
make_work_dir nccl_one_rank

# Compared where the comparison is exact, so no tolerance is needed: one device, the same kernels in the
# same order, deterministic ones (the math attention kernel, no atomics in its backward; cuBLAS with a
# fixed workspace), and a one-rank all-reduce that leaves each gradient as it was (a sum over one rank;
# an average divides by 1). Any difference is a bug of the distributed path (a bucket copied wrong, a
# gradient reduced twice or not at all), not rounding. Observed on an H100: 0 in three runs.
export CUBLAS_WORKSPACE_CONFIG=:4096:8
common=(train builtin:sort --preset tiny --batch-size 8 --seq-len 32 --lr 1e-3 --warmup-steps 2 --attention math
        --seed 4242 --eval-every 0 --log-every 5 --device "$device" --precision fp32 --bucket-mb 0.05 --threads 1)
run plain "${common[@]}" --steps 30 --out "$WORK/plain"
check "plain $device run trains (exit $RC): $(tail -1 "$WORK/plain.err")" test "$RC" -eq 0
run_cmd np1 "${LAUNCH[@]}" "$BIN" "${common[@]}" --steps 30 --comm-timeout 30 --out "$WORK/np1"
check "$launcher, one rank, $device: trains (exit $RC): $(tail -1 "$WORK/np1.err")" test "$RC" -eq 0
check "... on the $backend backend: $(grep -m1 'backend' "$WORK/np1.out")" grep -q "backend $backend" "$WORK/np1.out"
# metrics.jsonl counts the buckets whose all-reduce started from a backward hook (0 without hooks).
overlapped=$(grep -o '"buckets_overlapped":[0-9]*' "$WORK/np1/metrics.jsonl" | tail -1 | cut -d: -f2)
check "... its gradient buckets reduced from the backward hooks (${overlapped:-none} overlapped)" \
  test "${overlapped:-0}" -gt 1
while IFS= read -r line; do
  case "$line" in PASS:*) pass "${line#PASS: }" ;; *) fail "${line#FAIL: }" ;; esac
done < <("$python" "$TESTS_DIR/mpi/compare_runs.py" 0 "$launcher one rank, $backend vs plain $device|$WORK/plain|$WORK/np1|same" 2>&1)

# The stop flag travels through the backend's all-reduce: a stop signal ends the job with a checkpoint.
"${LAUNCH[@]}" "$BIN" "${common[@]}" --steps 1000000 --comm-timeout 30 --out "$WORK/stop" \
  >"$WORK/stop.out" 2>"$WORK/stop.err" &
pid=$!
for _ in $(seq 600); do grep -qE '^step +[0-9]+ \| loss' "$WORK/stop.out" && break; sleep 0.1; done
kill -$stop_signal $pid
# A limit on the stop: a hang must not cost a GPU session's whole call (`timeout` would not pass SIGUSR1 on).
for _ in $(seq 1200); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill -KILL $pid; echo "the stopped job was still running after 120 s: killed" >>"$WORK/stop.err"; }
wait $pid
rc=$?
# torchrun itself exits non-zero when signalled (after its worker stopped cleanly): judge the rank's words.
check "SIG$stop_signal to a one-rank $backend job under $launcher: the rank stopped (exit $rc): $(tail -1 "$WORK/stop.err")" \
  bash -c "[[ $rc -ne 137 ]] && grep -q 'stopped early; continue with --resume auto' '$WORK/stop.out'"
check "... with a checkpoint" bash -c "ls '$WORK/stop' | grep -q '^ckpt_.*\.safetensors$'"
finish
