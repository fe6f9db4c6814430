#!/usr/bin/env bash
# train --packing best-fit through the binary, on shards that prepare wrote from documents of many lengths:
#   (a) 2 ranks x accumulation 1 == 1 rank x accumulation 2 (losses, validation, weights, the packer's state);
#   (b) a run stopped by SIGTERM resumes to the same losses, bit for bit, as a run straight through;
#   (c) the cropped share is printed; best-fit trains on other rows than today's (a control);
#   (d) refusals: best-fit with --data-order shuffled, with a tokenizer that has no delimiter.
# Skips without GPT-2's tokenizer files in the shared data (the shards' delimiter is its <|endoftext|>).
#
# usage: packing_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch SHARED_DATA_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
data=$(test_data_dir "${3:-}")
use_mpirun
make_work_dir packing
vocab=$data/gpt2
if [[ ! -f $vocab/encoder.json ]]; then
  echo "SKIP: no GPT-2 tokenizer files in $vocab"
  exit 77
fi

# Documents of 3 to 120 words: rows of 32 tokens take several short ones, long ones are cropped.
"$python" - "$WORK/docs.jsonl" <<'PY'
import json, random, sys
random.seed(7)
words = "the quick brown fox jumps over a lazy dog while seven wizards quietly hum under bright stars".split()
with open(sys.argv[1], "w") as f:
    for i in range(600):
        n = random.choice([3, 5, 8, 13, 21, 40, 120])
        f.write(json.dumps({"text": " ".join(random.choice(words) for _ in range(n)) + "."}) + "\n")
PY
run prep prepare "$WORK/docs.jsonl" --vocab "$vocab" --out "$WORK/shards" --val-tokens 3000 --quiet
[[ $RC -eq 0 ]] || { fail "prepare" "exit $RC: $(tail -c 300 "$WORK/prep.err")"; finish; }

common=(train "$WORK/shards" --preset tiny --batch-size 4 --seq-len 32 --lr 1e-3
        --warmup-steps 2 --seed 11 --eval-every 6 --eval-steps 2 --log-every 1 --threads 1 --device cpu)
train_run() {
  local name=$1 ranks=$2 accum=$3
  shift 3
  run_np "$ranks" "$name" "${common[@]}" --steps 12 --grad-accum "$accum" --out "$WORK/$name" "$@"
  [[ $RC -eq 0 ]] || { fail "$name: training failed" "exit $RC: $(tail -c 400 "$WORK/$name.err")"; return 1; }
}
train_run single_accum2 1 2 --packing best-fit
train_run ranks2_accum1 2 1 --packing best-fit
train_run rows_accum2 1 2 --data-order sequential

line=$(grep '^packing best-fit:' "$WORK/single_accum2.out")
check "(c) the cropped share is printed: $line" grep -qE '^packing best-fit: [0-9]+ tokens in rows, [0-9]+ cropped \([0-9.]+% ' \
  <<<"$line"
check "(c) 2 ranks print the same share as 1 rank" test -n "$line" -a "$line" = "$(grep '^packing best-fit:' "$WORK/ranks2_accum1.out")"
check "(c) rows packing prints no packing line" test -z "$(grep '^packing' "$WORK/rows_accum2.out")"

comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 1e-5 \
  "(a) best-fit: 2 ranks x accum 1 == 1 rank x accum 2|$WORK/ranks2_accum1|$WORK/single_accum2|same" \
  "control: best-fit and rows train on other data|$WORK/rows_accum2|$WORK/single_accum2|different" 2>&1)
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
[[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq 2 ]] || fail "checkpoint comparison did not report both pairs"

# (b) SIGTERM mid-run, then --resume auto.
S=60
resume_args=("${common[@]}" --steps $S --packing best-fit --dropout 0.1)
if expect_ok straight "${resume_args[@]}" --out "$WORK/straight"; then
  "$BIN" "${resume_args[@]}" --out "$WORK/stopped" >"$WORK/stopped.out" 2>"$WORK/stopped.err" &
  pid=$!
  for _ in $(seq 600); do grep -qE '^step +5 \| loss' "$WORK/stopped.out" && break; sleep 0.05; done
  kill -TERM $pid
  wait $pid
  rc=$?
  at=$(ls "$WORK/stopped" | sed -n 's/^ckpt_0*\([0-9][0-9]*\)\.safetensors$/\1/p' | head -1)
  if [[ $rc -ne 0 || -z $at || $at -ge $S ]]; then
    fail "(b) SIGTERM mid-run: a checkpoint before step $S and exit 0" "exit $rc, checkpoint at '${at}'"
  else
    run resumed "${resume_args[@]}" --resume auto --out "$WORK/stopped"
    a=$(metric_values loss "$WORK/straight/metrics.jsonl")
    b=$(metric_values loss "$WORK/stopped/metrics.jsonl")
    if [[ $RC -ne 0 ]]; then
      fail "(b) resume after SIGTERM" "exit $RC: $(tail -c 300 "$WORK/resumed.err")"
    elif [[ $a != "$b" || $(grep -c . <<<"$b") -ne $S ]]; then
      fail "(b) resume after SIGTERM at step $at: losses differ" "$(diff <(echo "$a") <(echo "$b") | head -4 | tr '\n' ' ')"
    else
      check "(b) SIGTERM at step $at, --resume auto: all $S losses bit-identical, the same share cropped" \
        test "$(grep '^packing best-fit:' "$WORK/straight.out")" = "$(grep '^packing best-fit:' "$WORK/resumed.out")"
    fi
  fi
fi

# (d) refusals: one line, exit 2.
expect_bad_input shuffled "--packing best-fit reads the documents in order: leave out --data-order shuffled" "" \
  "${common[@]}" --steps 3 --packing best-fit --data-order shuffled --out "$WORK/o_shuffled"
printf 'To be, or not to be, that is the question.\n%.0s' $(seq 200) >"$WORK/text.txt"
expect_bad_input char "--packing best-fit needs documents delimited by the tokenizer's BOS" "" \
  train "$WORK/text.txt" --tokenizer char --preset tiny --steps 1 --packing best-fit --device cpu --out "$WORK/o_char"
finish
