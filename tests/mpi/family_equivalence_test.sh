#!/usr/bin/env bash
# DDP equivalence for the newer members of the model family (model/gpt_config.h): N ranks x accumulation
# A == 1 rank x accumulation N*A, per-step losses, validation losses and final parameters within 1e-5,
# through the binary under mpirun. The nanochat block (rotary, weightless RMSNorm, QK-norm, ReLU^2,
# untied soft-capped head, zero-initialized output projections) with Muon; the Llama block (grouped-query
# attention 4:2, SwiGLU) with AdamW and ZeRO-1. Controls show the comparison can fail.
#
# usage: family_equivalence_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
use_mpirun
make_work_dir family_equivalence

# The tolerance argument of tests/mpi/equivalence_test.sh holds here too: tiny models, 20 steps, lr 1e-3.
common=(train builtin:sort --steps 20 --batch-size 4 --seq-len 32 --block-size 32 --lr 1e-3 --min-lr 1e-4
        --warmup-steps 2 --seed 4242 --eval-every 10 --eval-steps 5 --log-every 5 --threads 1 --device cpu
        --data-order sequential)
nanochat=(--preset nanochat-d2 --n-embd 32 --n-head 2 --n-kv-head 2 --optimizer muon)
llama=(--preset llama-small --n-layer 2 --n-embd 32 --mlp-hidden 96)

train_run() {
  local name=$1 ranks=$2 accum=$3
  shift 3
  run_np "$ranks" "$name" "${common[@]}" --grad-accum "$accum" --out "$WORK/$name" "$@"
  if [[ $RC -ne 0 ]]; then
    fail "$name: training failed" "exit $RC"
    tail -n 20 "$WORK/$name.err" | sed 's/^/     | /'
    return 1
  fi
  if ! grep -q "^world: $ranks rank(s)" "$WORK/$name.out"; then
    fail "$name: expected a world of $ranks rank(s); got: $(grep '^world:' "$WORK/$name.out")"
    return 1
  fi
}

train_run nanochat_single_accum2 1 2 "${nanochat[@]}"
train_run nanochat_ranks2_accum1 2 1 "${nanochat[@]}"
train_run nanochat_single_accum6 1 6 "${nanochat[@]}"
train_run nanochat_ranks3_accum2 3 2 "${nanochat[@]}"
train_run llama_single_accum2 1 2 "${llama[@]}"
train_run llama_ranks2_accum1_zero 2 1 "${llama[@]}" --zero 1

pair() { echo "$3|$WORK/$1|$WORK/$2|${4:-same}"; }
comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 1e-5 \
  "$(pair nanochat_ranks2_accum1 nanochat_single_accum2 "nanochat + muon: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair nanochat_ranks3_accum2 nanochat_single_accum6 "nanochat + muon: 3 ranks x accum 2 == 1 rank x accum 6")" \
  "$(pair llama_ranks2_accum1_zero llama_single_accum2 "llama (GQA, SwiGLU) + zero-1: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair nanochat_single_accum2 nanochat_single_accum6 "control: accum 2 and accum 6 runs differ" different)" 2>&1)
echo "$comparison"
passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
[[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq 4 ]] || fail "checkpoint comparison did not report all 4 pairs"

finish
