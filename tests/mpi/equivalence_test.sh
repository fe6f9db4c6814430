#!/usr/bin/env bash
# DDP equivalence through the binary (DESIGN: N ranks x accumulation A == 1 rank x accumulation N*A):
# per-step losses, validation losses and final parameters agree within 1e-5, for N = 2 and 3, with overlapped and
# non-overlapped gradient sync and with one bucket or many. MPI on CPU: every run says --device cpu,
# so a machine with GPUs runs the same test.
#
# usage: equivalence_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
use_mpirun
make_work_dir equivalence

# A tiny model and learning rates high enough that 20 steps move the weights far beyond the tolerance
# (the control below shows it) yet low enough that AdamW, which scales even rounding noise in a
# gradient up to a step of about lr (the attention's key bias has a zero true gradient), keeps 3-rank
# runs within 1e-5 of the single process: lr 3e-3 drifts to ~1.1e-5, 1e-3 stays below 4e-6.
# Validation every 10 steps over 5 batches: split 3:2 on 2 ranks and 2:2:1 on 3, it must still score the
# batches one rank scores (--eval-steps counts batches of all ranks together).
common=(train builtin:sort --preset tiny --steps 20 --batch-size 4 --seq-len 32 --lr 1e-3 --min-lr 1e-4
        --warmup-steps 2 --seed 4242 --eval-every 10 --eval-steps 5 --log-every 5 --threads 1 --device cpu)

# train_run NAME RANKS ACCUM [extra flags...]: trains into $WORK/NAME (output in $WORK/NAME.out, .err),
# in the data order $order (default sequential; shuffled: rows in a fresh order each epoch).
train_run() {
  local name=$1 ranks=$2 accum=$3
  shift 3
  run_np "$ranks" "$name" "${common[@]}" --data-order "${order:-sequential}" --grad-accum "$accum" --out "$WORK/$name" "$@"
  if [[ $RC -ne 0 ]]; then
    fail "$name: training failed" "exit $RC"
    tail -n 20 "$WORK/$name.err" | sed 's/^/     | /'
    return 1
  fi
  # Guards against a launcher that started independent single processes instead of one job.
  if ! grep -q "^world: $ranks rank(s)" "$WORK/$name.out"; then
    fail "$name: expected a world of $ranks rank(s); got: $(grep '^world:' "$WORK/$name.out")"
    return 1
  fi
}

# The overlap statistic of every step: buckets whose all-reduce started during backward.
overlapped_buckets() { metric_values buckets_overlapped "$WORK/$1/metrics.jsonl" | sort -u | tr '\n' ' '; }

train_run single_accum2 1 2
train_run ranks2_accum1 2 1 --ddp-overlap true
train_run ranks2_accum1_many_buckets 2 1 --ddp-overlap false --bucket-mb 0.001
train_run single_accum6 1 6
train_run ranks3_accum2 3 2 --ddp-overlap true
order=shuffled train_run shuffled_single_accum6 1 6
order=shuffled train_run shuffled_ranks3_accum2 3 2
# --optimizer muon: each rank orthogonalizes its share of the matrices and the updates are exchanged.
train_run single_accum2_muon 1 2 --optimizer muon
train_run ranks2_accum1_muon 2 1 --optimizer muon
train_run single_accum6_muon 1 6 --optimizer muon
train_run ranks3_accum2_muon 3 2 --optimizer muon

# One Python process compares every pair (importing torch dominates its time); it prints a PASS or
# FAIL line for each.
pair() { echo "$3|$WORK/$1|$WORK/$2|${4:-same}"; }
comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 1e-5 \
  "$(pair ranks2_accum1 single_accum2 "(a) 2 ranks x accum 1 == 1 rank x accum 2 (overlap, one bucket)")" \
  "$(pair ranks2_accum1_many_buckets single_accum2 "(a) 2 ranks x accum 1 == 1 rank x accum 2 (no overlap, many buckets)")" \
  "$(pair ranks3_accum2 single_accum6 "(b) 3 ranks x accum 2 == 1 rank x accum 6 (overlap, one bucket)")" \
  "$(pair shuffled_ranks3_accum2 shuffled_single_accum6 "(c) shuffled order: 3 ranks x accum 2 == 1 rank x accum 6")" \
  "$(pair shuffled_single_accum6 single_accum6 "control: the shuffled and the sequential order differ" different)" \
  "$(pair single_accum2 single_accum6 "control: accum 2 and accum 6 runs differ" different)" \
  "$(pair ranks2_accum1_muon single_accum2_muon "(d) muon: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair ranks3_accum2_muon single_accum6_muon "(d) muon: 3 ranks x accum 2 == 1 rank x accum 6")" \
  "$(pair single_accum2_muon single_accum2 "control: muon and adamw runs differ" different)" 2>&1)
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
# A comparer that crashed before printing its verdicts must not pass silently.
[[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq 9 ]] || fail "checkpoint comparison did not report all 9 pairs"

# The flags reached the synchronizer: overlap starts buckets during backward, no overlap never does.
if [[ -f $WORK/ranks2_accum1_many_buckets/metrics.jsonl ]]; then
  seen=$(overlapped_buckets ranks2_accum1_many_buckets)
  check "--ddp-overlap false: no bucket started during backward (buckets_overlapped values: $seen, want only 0)" \
    test "$seen" = "0 "
fi
for name in ranks2_accum1 ranks3_accum2; do  # one bucket: its all-reduce starts during backward
  [[ -f $WORK/$name/metrics.jsonl ]] || continue
  seen=$(overlapped_buckets $name)
  check "--ddp-overlap true ($name): the one bucket started during backward at every step (values: $seen, want only 1)" \
    test "$seen" = "1 "
done

finish
