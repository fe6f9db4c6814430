#!/usr/bin/env bash
# DDP equivalence through the binary (DESIGN: N ranks x accumulation A == 1 rank x accumulation N*A):
# per-step losses and final parameters agree within 1e-5, for N = 2 and 3, with overlapped and
# non-overlapped gradient sync and with one bucket or many.
#
# usage: equivalence_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch
set -uo pipefail
bin=$(realpath "$1")
python=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../scripts/mpi_env.sh"  # MYGPT_MPIRUN, root permission for Open MPI
export OMP_NUM_THREADS=1

work=$(mktemp -d "${TMPDIR:-/tmp}/mygpt_equivalence.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
pass() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

# A tiny model and learning rates high enough that 20 steps move the weights far beyond the tolerance
# (the control below shows it) yet low enough that AdamW, which scales even rounding noise in a
# gradient up to a step of about lr (the attention's key bias has a zero true gradient), keeps 3-rank
# runs within 1e-5 of the single process: lr 3e-3 drifts to ~1.1e-5, 1e-3 stays below 4e-6.
common=(train builtin:sort --preset tiny --steps 20 --batch-size 4 --seq-len 32 --lr 1e-3 --min-lr 1e-4
        --warmup-steps 2 --seed 4242 --data-order sequential --eval-every 0 --log-every 5 --threads 1)

# run NAME RANKS ACCUM [extra flags...]: trains into $work/NAME; stdout and stderr in $work/NAME.log.
run() {
  local name=$1 ranks=$2 accum=$3
  shift 3
  local launcher=()
  [ "$ranks" -gt 1 ] && launcher=("${MYGPT_MPIRUN[@]}" -np "$ranks")
  if ! timeout 120 "${launcher[@]}" "$bin" "${common[@]}" --grad-accum "$accum" --out "$work/$name" "$@" \
      >"$work/$name.log" 2>&1; then
    fail "$name: training failed"
    tail -n 20 "$work/$name.log" | sed 's/^/     | /'
    return 1
  fi
  # Guards against a launcher that started independent single processes instead of one job.
  if ! grep -q "^world: $ranks rank(s)" "$work/$name.log"; then
    fail "$name: expected a world of $ranks rank(s); got: $(grep '^world:' "$work/$name.log")"
    return 1
  fi
}

# The overlap statistic of every step: buckets whose all-reduce started during backward.
overlapped_buckets() { grep -o '"buckets_overlapped":[0-9]*' "$work/$1/metrics.jsonl" | cut -d: -f2 | sort -u | tr '\n' ' '; }

start=$(date +%s)
run single_accum2 1 2
run ranks2_accum1 2 1 --ddp-overlap true
run ranks2_accum1_many_buckets 2 1 --ddp-overlap false --bucket-mb 0.001
run single_accum6 1 6
run ranks3_accum2 3 2 --ddp-overlap true

# One Python process compares every pair (importing torch dominates its time).
pair() { echo "$3|$work/$1|$work/$2|${4:-same}"; }
comparison=$("$python" "$here/compare_runs.py" 1e-5 \
  "$(pair ranks2_accum1 single_accum2 "(a) 2 ranks x accum 1 == 1 rank x accum 2 (overlap, one bucket)")" \
  "$(pair ranks2_accum1_many_buckets single_accum2 "(a) 2 ranks x accum 1 == 1 rank x accum 2 (no overlap, many buckets)")" \
  "$(pair ranks3_accum2 single_accum6 "(b) 3 ranks x accum 2 == 1 rank x accum 6 (overlap, one bucket)")" \
  "$(pair single_accum2 single_accum6 "control: accum 2 and accum 6 runs differ" different)" 2>&1)
echo "$comparison"
passed=$((passed + $(echo "$comparison" | grep -c '^ok')))
failed=$((failed + $(echo "$comparison" | grep -c '^FAIL')))
# A comparer that crashed before printing its verdicts must not pass silently.
[ "$(echo "$comparison" | grep -cE '^(ok|FAIL)')" -eq 4 ] || fail "checkpoint comparison did not report all 4 pairs"

# The flags reached the synchronizer: overlap starts buckets during backward, no overlap never does.
if [ -f "$work/ranks2_accum1_many_buckets/metrics.jsonl" ]; then
  seen=$(overlapped_buckets ranks2_accum1_many_buckets)
  [ "$seen" = "0 " ] && pass "--ddp-overlap false: no bucket started during backward" \
                     || fail "--ddp-overlap false: buckets_overlapped values $seen (want only 0)"
fi
for name in ranks2_accum1 ranks3_accum2; do  # one bucket: its all-reduce starts during backward
  [ -f "$work/$name/metrics.jsonl" ] || continue
  seen=$(overlapped_buckets $name)
  [ "$seen" = "1 " ] && pass "--ddp-overlap true ($name): the one bucket started during backward at every step" \
                     || fail "--ddp-overlap true ($name): buckets_overlapped values $seen (want only 1)"
done

echo "$passed passed, $failed failed ($(($(date +%s) - start)) s)"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
