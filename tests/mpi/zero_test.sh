#!/usr/bin/env bash
# --zero 1 through the binary under mpirun (optimizer state sharded across ranks):
#  (a) N ranks with --zero 1 == N ranks with --zero 0, bit for bit (losses, weights and the whole AdamW
#      state of the checkpoints), for N = 2 and 3, with clipping at every step, one bucket or many, and a
#      parameter count that neither 2 nor 3 divides;
#  (b) N ranks x accumulation A with --zero 1 == 1 rank x accumulation N*A within 1e-5 (the DDP contract);
#  (c) the checkpoint is whole: a 2-rank --zero 1 run resumes with --zero 0, bit for bit, and on 3 ranks;
#      a 3-rank --zero 1 checkpoint (streamed tensor by tensor to rank 0) resumes on 1 rank, whose
#      checkpoint resumes on 3 ranks with --zero 1 again, and `export` reads it;
#  (d) Muon with --zero 1 (each matrix's gradient gathered to its owner, its momentum kept there alone)
#      == Muon with --zero 0 on 2 and 3 ranks, with --zero 2 and 3 on 2 ranks too, and its checkpoint
#      resumes with --zero 0.
#
# usage: zero_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
use_mpirun
make_work_dir zero

# Width 35 and block 33: 31955 parameters, which neither 2 nor 3 divides (checked below), in tensors of
# odd sizes; --grad-clip 0.1 clips every step.
common=(train builtin:sort --preset tiny --n-embd 35 --n-head 5 --block-size 33 --steps 12 --batch-size 4 --seq-len 32 --lr 1e-3
        --min-lr 1e-4 --warmup-steps 2 --seed 4242 --data-order sequential --eval-every 0 --log-every 4
        --grad-clip 0.1 --threads 1 --device cpu)

train_run() {
  local name=$1 ranks=$2 accum=$3
  shift 3
  run_np "$ranks" "$name" "${common[@]}" --grad-accum "$accum" --out "$WORK/$name" "$@"
  if [[ $RC -ne 0 ]]; then
    fail "$name: training failed" "exit $RC: $(tail -c 400 "$WORK/$name.err")"
    return 1
  fi
}

train_run single_accum2 1 2
train_run single_accum6 1 6
train_run ranks2_zero0 2 1 --zero 0
train_run ranks2_zero1 2 1 --zero 1
train_run ranks3_zero0 3 2 --zero 0
train_run ranks3_zero1 3 2 --zero 1
train_run ranks3_zero1_many 3 2 --zero 1 --bucket-mb 0.002 --ddp-overlap false

# The model's parameter count: neither 2 nor 3 divides it, so the shards really are padded.
params=$(sed -n 's/^model:.*| \([0-9]*\) parameters$/\1/p' "$WORK/ranks3_zero1.out")
check "the parameter count ($params) is divisible by neither 2 nor 3" test -n "$params" -a $((params % 2)) -ne 0 -a $((params % 3)) -ne 0
check "--zero 1 is announced" grep -q "^zero 1: AdamW state sharded over 3 rank(s)" "$WORK/ranks3_zero1.out"
norms=$(metric_values grad_norm "$WORK/ranks3_zero1/metrics.jsonl" | awk '$1 > 0.1' | wc -l)
check "every step clipped (norm above --grad-clip 0.1 at $norms of 12 steps)" test "$norms" -eq 12

pair() { echo "$3|$WORK/$1|$WORK/$2|same"; }
comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 0 \
  "$(pair ranks2_zero1 ranks2_zero0 "(a) 2 ranks: --zero 1 == --zero 0 bit for bit")" \
  "$(pair ranks3_zero1 ranks3_zero0 "(a) 3 ranks x accum 2: --zero 1 == --zero 0 bit for bit")" \
  "$(pair ranks3_zero1_many ranks3_zero0 "(a) 3 ranks, many buckets, no overlap: --zero 1 == --zero 0 bit for bit")" 2>&1)
comparison+=$'\n'$("$python" "$TESTS_DIR/mpi/compare_runs.py" 1e-5 \
  "$(pair ranks2_zero1 single_accum2 "(b) 2 ranks x accum 1 --zero 1 == 1 rank x accum 2")" \
  "$(pair ranks3_zero1 single_accum6 "(b) 3 ranks x accum 2 --zero 1 == 1 rank x accum 6")" 2>&1)
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
[[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq 5 ]] || fail "checkpoint comparison did not report all 5 pairs"

# same_state A B PREFIX: every tensor whose name starts with PREFIX is identical in the two runs' last checkpoints.
same_state() {
  "$python" - "$TESTS_DIR/mpi" "$WORK/$1" "$WORK/$2" "$3" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import compare_runs
_, a = compare_runs.final_state(sys.argv[2])
_, b = compare_runs.final_state(sys.argv[3])
names = sorted(k for k in a if k.startswith(sys.argv[4]))
assert names and names == sorted(k for k in b if k.startswith(sys.argv[4])), "different tensor names"
bad = [k for k in names if not (a[k].shape == b[k].shape and bool((a[k] == b[k]).all()))]
assert not bad, f"{len(bad)} of {len(names)} differ, e.g. {bad[:3]}"
print(len(names))
PY
}
for n in 2 3; do
  if count=$(same_state ranks${n}_zero1 ranks${n}_zero0 optimizer. 2>&1); then
    pass "(a) $n ranks: the whole AdamW state in the checkpoints is identical ($count tensors)"
  else
    fail "(a) $n ranks: AdamW state in the checkpoints" "$count"
  fi
done

# (c) 12 steps with --zero 1 on 2 ranks, then back to its checkpoint at step 6 and on to 12 with --zero 0
# in the same folder: the straight run's losses and weights, bit for bit.
train_run stop6 2 1 --zero 1 --checkpoint-every 6
rm -f "$WORK/stop6/ckpt_00000012.safetensors"
awk -F'"step":' '{ split($2, a, ","); if (a[1] + 0 < 6) print }' "$WORK/stop6/metrics.jsonl" >"$WORK/kept.jsonl"
mv "$WORK/kept.jsonl" "$WORK/stop6/metrics.jsonl"
if [[ -f $WORK/stop6/ckpt_00000006.safetensors ]]; then
  train_run stop6 2 1 --zero 0 --checkpoint-every 6 --resume auto
  check "(c) the --zero 0 run resumed the --zero 1 checkpoint" grep -q "resumed from .*ckpt_00000006.safetensors at step 6" "$WORK/stop6.out"
  comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 0 \
    "$(pair stop6 ranks2_zero1 "(c) --zero 1 to step 6, resumed with --zero 0 to 12 == 12 steps straight with --zero 1")" 2>&1)
  echo "$comparison"
  passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
  failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
  train_run resumed_3ranks 3 1 --zero 1 --resume "$WORK/stop6/ckpt_00000006.safetensors" &&
    check "(c) the 2-rank --zero 1 checkpoint resumes on 3 ranks with --zero 1 to step 12" \
      test -f "$WORK/resumed_3ranks/ckpt_00000012.safetensors"
else
  fail "(c) no checkpoint at step 6"
fi

# (c) across world sizes both ways: 3 ranks --zero 1 to step 6, on 1 rank --zero 0 from there (its checkpoint
# at step 9), on 3 ranks --zero 1 from that to step 12. The data position carries over; the random streams
# restart (dropout is 0 here, so the losses are the straight run's within float summation's reordering).
train_run ws3 3 2 --zero 1 --checkpoint-every 6
if train_run ws1 1 6 --zero 0 --resume "$WORK/ws3/ckpt_00000006.safetensors" --checkpoint-every 3 &&
  train_run ws3b 3 2 --zero 1 --resume "$WORK/ws1/ckpt_00000009.safetensors"; then
  check "(c) 3 ranks -> 1 rank: resumed at step 6" grep -q "resumed from .*ckpt_00000006.safetensors at step 6" "$WORK/ws1.out"
  check "(c) 1 rank -> 3 ranks: resumed at step 9" grep -q "resumed from .*ckpt_00000009.safetensors at step 9" "$WORK/ws3b.out"
  comparison=$("$python" - "$WORK" <<'PY' 2>&1
import json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r}
work = sys.argv[1]
straight = losses(f"{work}/ranks3_zero1/metrics.jsonl")
resumed = {**losses(f"{work}/ws1/metrics.jsonl"), **losses(f"{work}/ws3b/metrics.jsonl")}
worst = max(abs(resumed[s] - straight[s]) for s in range(6, 12) if s in resumed and s in straight)
print(("PASS" if worst < 1e-4 else "FAIL") + f": (c) 3 ranks -> 1 rank -> 3 ranks follows the straight run (worst loss difference {worst:.2e})")
PY
)
  echo "$comparison"
  passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
  failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
  if "$BIN" export --checkpoint "$WORK/ws3b/ckpt_00000012.safetensors" --out "$WORK/exported" >"$WORK/export.out" 2>&1; then
    check "(c) export reads the 3-rank --zero 1 checkpoint" test -f "$WORK/exported/model.safetensors"
  else
    fail "(c) export of the 3-rank --zero 1 checkpoint" "$(tail -c 300 "$WORK/export.out")"
  fi
fi

# (d) Muon with --zero 1 against Muon with --zero 0 (the AdamW part sharded as ever; Muon's matrices'
# gradients gathered whole to their owners): the same sums, so bit for bit.
train_run muon2_zero0 2 1 --optimizer muon --zero 0
train_run muon2_zero1 2 1 --optimizer muon --zero 1
train_run muon2_zero2 2 1 --optimizer muon --zero 2
train_run muon2_zero3 2 1 --optimizer muon --zero 3
train_run muon3_zero0 3 2 --optimizer muon --zero 0
train_run muon3_zero1 3 2 --optimizer muon --zero 1 --checkpoint-every 6
comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 0 \
  "$(pair muon2_zero1 muon2_zero0 "(d) 2 ranks: Muon --zero 1 == Muon --zero 0")" \
  "$(pair muon2_zero2 muon2_zero0 "(d) 2 ranks: Muon --zero 2 == Muon --zero 0")" \
  "$(pair muon2_zero3 muon2_zero0 "(d) 2 ranks: Muon --zero 3 == Muon --zero 0")" \
  "$(pair muon3_zero1 muon3_zero0 "(d) 3 ranks x accum 2: Muon --zero 1 == Muon --zero 0")" 2>&1)
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
for n in 2 3; do
  if count=$(same_state muon${n}_zero1 muon${n}_zero0 muon. 2>&1); then
    pass "(d) $n ranks: Muon's momenta in the checkpoints are identical ($count tensors)"
  else
    fail "(d) $n ranks: Muon's momenta in the checkpoints" "$count"
  fi
done
rm -f "$WORK/muon3_zero1/ckpt_00000012.safetensors"
if train_run muon_resumed 2 1 --optimizer muon --zero 0 --resume "$WORK/muon3_zero1/ckpt_00000006.safetensors"; then
  check "(d) a 3-rank Muon --zero 1 checkpoint resumes on 2 ranks with --zero 0" \
    test -f "$WORK/muon_resumed/ckpt_00000012.safetensors"
fi

finish
