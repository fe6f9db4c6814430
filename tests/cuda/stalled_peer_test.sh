#!/usr/bin/env bash
# A stalled peer on NCCL (CTest label `cuda`, two GPUs or more): rank 1 stops answering (SIGSTOP) in a
# 2-rank CUDA run with --comm-timeout 5; the job must end within 30 s with a one-line error, no hang and
# no crash. Exits 77 (CTest: skipped) with one line where fewer than two GPUs are visible.
#
#   bash stalled_peer_test.sh <path-to-mygpt-ddp> <mpirun>
set -u
bin=${1:?usage: stalled_peer_test.sh <mygpt-ddp> <mpirun>}
mpirun=${2:-mpirun}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -lt 2 ]; then
  echo "SKIP: the stalled-peer test needs two GPUs (found ${gpus:-0})"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/mygpt_stalled.XXXXXX")
trap 'kill -CONT "$(cat "$work/rank1.pid" 2>/dev/null)" 2>/dev/null; kill -KILL $job 2>/dev/null; rm -rf "$work"' EXIT

"$mpirun" --oversubscribe --bind-to none -np 2 bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then echo $$ > "$0/rank1.pid"; fi; shift; exec "$@"' \
  "$work" _ "$bin" train builtin:sort --preset tiny --device cuda --comm-timeout 5 --steps 1000000 --log-every 50 \
  --eval-every 0 --out "$work/out" >"$work/out.log" 2>"$work/err.log" &
job=$!
for _ in $(seq 600); do grep -qE '^step +[0-9]+ \| loss' "$work/out.log" && break; sleep 0.1; done
grep -qE '^step +[0-9]+ \| loss' "$work/out.log" || { echo "FAIL: training did not start: $(tail -3 "$work/err.log")"; exit 1; }
kill -STOP "$(cat "$work/rank1.pid")"
start=$(date +%s)
for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
took=$(( $(date +%s) - start ))
if kill -0 $job 2>/dev/null; then echo "FAIL: the job still runs 30 s after rank 1 stalled"; exit 1; fi
wait $job; rc=$?
errors=$(grep -c 'mygpt-ddp: error:' "$work/err.log")
if [ $rc -eq 0 ]; then echo "FAIL: the job exited 0 after a peer stalled"; exit 1; fi
if grep -qE 'terminate called|Segmentation|core dumped|Aborted \(' "$work/err.log"; then
  echo "FAIL: crash signature: $(head -5 "$work/err.log")"; exit 1
fi
if [ "$errors" -lt 1 ]; then echo "FAIL: no one-line error: $(head -5 "$work/err.log")"; exit 1; fi
echo "PASS: a stalled rank ended the job in $took s (exit $rc): $(grep -m1 'mygpt-ddp: error:' "$work/err.log")"
