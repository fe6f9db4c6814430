#!/usr/bin/env bash
# Fine-tuning's loss is the mean over ALL assistant tokens of the global batch (issue 42): so N ranks x
# accumulation A == 1 rank x N*A (DESIGN's contract) still holds when ranks and micro-batches hold
# different numbers of assistant tokens, and, what a mean of per-micro-batch means (the gradient-
# accumulation normalization bug) breaks, 1 rank x accumulation 2 of 2 rows == 1 rank x 1 micro-batch of
# 4 rows, and 2 ranks x 2 rows == 1 rank x 4 rows. Per-step losses, validation losses and final weights
# agree within 1e-5 (MPI on CPU). Checked by hand: with a mean of per-micro-batch means instead, (a) and
# (b) fail (loss differences of 0.036 after 12 steps) while (c) and (d) still pass, which is why they
# are here.
#
# usage: sft_equivalence_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch SHARED_DATA_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$TESTS_DIR/chat_fixture.sh"

use_binary "${1:-}"
python=${2:-python3}
vocab=$(test_data_dir "${3:-}")/gpt2
use_mpirun
make_work_dir sft_equivalence
if [[ ! -f $vocab/encoder.json ]]; then
  skip "GPT-2's tokenizer files are not in $vocab (see README)"
  echo "$passed passed, $failed failed, $skipped skipped"
  exit 0
fi
[[ ${#MPIRUN[@]} -gt 0 ]] || { fail "no mpirun on the PATH"; finish; }

write_conversations "$WORK/chat.jsonl" 120 11
common=(train "$WORK/chat.jsonl" --sft --vocab "$vocab" --preset tiny --block-size 48 --steps 12 --lr 1e-3
        --min-lr 1e-4 --warmup-steps 2 --seed 4242 --eval-every 6 --eval-steps 3 --log-every 4 --threads 1
        --device cpu)

# sft_run NAME RANKS ROWS ACCUM [extra flags...]
sft_run() {
  local name=$1 ranks=$2 rows=$3 accum=$4
  shift 4
  run_np "$ranks" "$name" "${common[@]}" --batch-size "$rows" --grad-accum "$accum" --out "$WORK/$name" "$@"
  if [[ $RC -ne 0 ]]; then
    fail "$name: training failed" "exit $RC: $(tail -c 400 "$WORK/$name.err")"
    return 1
  fi
  grep -q "^world: $ranks rank(s)" "$WORK/$name.out" || fail "$name: expected a world of $ranks rank(s)"
}

sft_run single_rows4 1 4 1
sft_run single_rows2_accum2 1 2 2
sft_run ranks2_rows2 2 2 1
sft_run single_rows2_accum6 1 2 6
sft_run ranks2_rows2_accum3 2 2 3
sft_run ranks3_rows2_accum2 3 2 2
sft_run single_rows2_accum6_sequential 1 2 6 --data-order sequential

# The steps did train on different numbers of assistant tokens (else the test shows nothing).
counts=$(metric_values trained_tokens "$WORK/single_rows2_accum6/metrics.jsonl" | sort -u | wc -l)
check "the steps trained different numbers of assistant tokens ($counts distinct counts over 12 steps)" \
  test "$counts" -gt 1

pair() { echo "$3|$WORK/$1|$WORK/$2|${4:-same}"; }
comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 1e-5 \
  "$(pair single_rows2_accum2 single_rows4 "(a) 1 rank x 2 rows x accum 2 == 1 rank x 4 rows (a mean over all tokens, not of micro-batch means)" same-steps)" \
  "$(pair ranks2_rows2 single_rows4 "(b) 2 ranks x 2 rows == 1 rank x 4 rows" same-steps)" \
  "$(pair ranks2_rows2_accum3 single_rows2_accum6 "(c) 2 ranks x accum 3 == 1 rank x accum 6")" \
  "$(pair ranks3_rows2_accum2 single_rows2_accum6 "(d) 3 ranks x accum 2 == 1 rank x accum 6")" \
  "$(pair single_rows2_accum6_sequential single_rows2_accum6 "control: the file's order and the shuffled order differ" different)" \
  "$(pair single_rows4 single_rows2_accum6 "control: batches of 4 and of 12 conversations differ" different)" 2>&1)
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
[[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq 6 ]] || fail "checkpoint comparison did not report all 6 pairs"
finish
