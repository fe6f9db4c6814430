#!/usr/bin/env bash
# DDP equivalence for the newer members of the model family (model/gpt_config.h): N ranks x accumulation
# A == 1 rank x accumulation N*A, per-step losses, validation losses and final parameters within 1e-5,
# through the binary under mpirun. The nanochat block (rotary, weightless RMSNorm, QK-norm, ReLU^2,
# untied soft-capped head, zero-initialized output projections) with Muon; the Llama block (grouped-query
# attention 4:2, SwiGLU) with AdamW and ZeRO-1. Controls show the comparison can fail. Then, per member:
#  - the same equivalences under torchrun (Gloo), where a torchrun is given;
#  - --recompute block == no recompute, bit for bit (recomputing a block repeats the same kernels on the
#    same inputs, and the block's input gradient comes out of one nested backward as in the plain graph);
#    --recompute mlp within 1e-5: the MLP's input gradient then comes back from a nested backward and is
#    added to the residual's, and RMSNorm's two paths to its input (x and its mean square) are summed in
#    another order than the plain graph's (LayerNorm's one fused backward has one path: GPT-2 is exact);
#  - under --precision bf16 (nanochat) and fp16 (Llama, dynamic loss scaling) N ranks x A == 1 x N*A too:
#    each micro-batch's forward and backward are the same computation on both sides, so the runs differ by
#    the fp32 order of adding the micro-batches' gradients alone, as in fp32 (bf16: 1e-5); fp16 is judged
#    by the bounds derived from fp16 and AdamW (compare_runs.py fp16-adamw), as fp16_equivalence does;
#    a control shows the bf16 run is not the fp32 one;
#  - with the shared data: a nanochat member on GPT-2's tokenizer is scored on HellaSwag by eval.
#
# usage: family_equivalence_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch [PATH/TO/torchrun [DATA_DIR]]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

use_binary "${1:-}"
python=${2:-python3}
torchrun=${3:-}
data_dir=$(test_data_dir "${4:-}")
use_mpirun
make_work_dir family_equivalence

# The tolerance argument of tests/mpi/equivalence_test.sh holds here too: tiny models, 20 steps, lr 1e-3.
common=(train builtin:sort --steps 20 --batch-size 4 --seq-len 32 --block-size 32 --lr 1e-3 --min-lr 1e-4
        --warmup-steps 2 --seed 4242 --eval-every 10 --eval-steps 5 --log-every 5 --threads 1 --device cpu
        --data-order sequential)
nanochat=(--preset nanochat-d2 --n-embd 32 --n-head 2 --n-kv-head 2 --optimizer muon)
llama=(--preset llama-small --n-layer 2 --n-embd 32 --mlp-hidden 96)

# train_run NAME RANKS ACCUM ARGS...: the binary on RANKS ranks under mpirun (LAUNCHER=torchrun: under
# torchrun, over Gloo), one world of that size.
train_run() {
  local name=$1 ranks=$2 accum=$3
  shift 3
  if [[ ${LAUNCHER:-} == torchrun ]]; then
    run_cmd "$name" "$torchrun" --standalone --nproc-per-node "$ranks" --no-python "$BIN" "${common[@]}" \
      --grad-accum "$accum" --out "$WORK/$name" "$@"
  else
    run_np "$ranks" "$name" "${common[@]}" --grad-accum "$accum" --out "$WORK/$name" "$@"
  fi
  if [[ $RC -ne 0 ]]; then
    fail "$name: training failed" "exit $RC"
    tail -n 20 "$WORK/$name.err" | sed 's/^/     | /'
    return 1
  fi
  if ! grep -q "^world: $ranks rank(s)${LAUNCHER:+ .*| launcher $LAUNCHER}" "$WORK/$name.out"; then
    fail "$name: expected a world of $ranks rank(s)${LAUNCHER:+ from $LAUNCHER}; got: $(grep '^world:' "$WORK/$name.out")"
    return 1
  fi
}
pair() { echo "$3|$WORK/$1|$WORK/$2|${4:-same}"; }

train_run nanochat_single_accum2 1 2 "${nanochat[@]}"
train_run nanochat_ranks2_accum1 2 1 "${nanochat[@]}"
train_run nanochat_single_accum6 1 6 "${nanochat[@]}"
train_run nanochat_ranks3_accum2 3 2 "${nanochat[@]}"
train_run llama_single_accum2 1 2 "${llama[@]}"
train_run llama_ranks2_accum1_zero 2 1 "${llama[@]}" --zero 1
train_run nanochat_single_accum2_recompute 1 2 "${nanochat[@]}" --recompute block
train_run llama_single_accum2_recompute 1 2 "${llama[@]}" --recompute block
train_run llama_single_accum2_recompute_mlp 1 2 "${llama[@]}" --recompute mlp
train_run nanochat_single_accum2_bf16 1 2 "${nanochat[@]}" --precision bf16
train_run nanochat_ranks2_accum1_bf16 2 1 "${nanochat[@]}" --precision bf16
train_run llama_single_accum2_fp16 1 2 "${llama[@]}" --precision fp16
train_run llama_ranks2_accum1_fp16 2 1 "${llama[@]}" --precision fp16
check "recompute is announced" grep -q "^recompute: each whole block" "$WORK/nanochat_single_accum2_recompute.out"
check "bf16 is announced" grep -q "| bf16 autocast$" "$WORK/nanochat_ranks2_accum1_bf16.out"

torchrun_pairs=()
if [[ -n $torchrun && -x $torchrun ]]; then
  LAUNCHER=torchrun train_run nanochat_torchrun2 2 1 "${nanochat[@]}"
  LAUNCHER=torchrun train_run llama_torchrun2_zero 2 1 "${llama[@]}" --zero 1
  torchrun_pairs=("$(pair nanochat_torchrun2 nanochat_single_accum2 "torchrun: nanochat + muon: 2 ranks x accum 1 == 1 rank x accum 2")"
                  "$(pair llama_torchrun2_zero llama_single_accum2 "torchrun: llama + zero-1: 2 ranks x accum 1 == 1 rank x accum 2")")
else
  skip "the torchrun equivalences (no torchrun given)"
fi

# compare TOLERANCE PAIR...: compare_runs.py's verdicts counted as this suite's; every pair must report.
compare() {
  local tolerance=$1 comparison
  shift
  comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" "$tolerance" "$@" 2>&1)
  echo "$comparison"
  passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
  failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
  [[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq $# ]] || fail "compare_runs.py $tolerance did not report all $# pairs"
}
compare 1e-5 \
  "$(pair nanochat_ranks2_accum1 nanochat_single_accum2 "nanochat + muon: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair nanochat_ranks3_accum2 nanochat_single_accum6 "nanochat + muon: 3 ranks x accum 2 == 1 rank x accum 6")" \
  "$(pair llama_ranks2_accum1_zero llama_single_accum2 "llama (GQA, SwiGLU) + zero-1: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair nanochat_ranks2_accum1_bf16 nanochat_single_accum2_bf16 "nanochat bf16: 2 ranks x accum 1 == 1 rank x accum 2")" \
  "$(pair llama_single_accum2_recompute_mlp llama_single_accum2 "llama --recompute mlp == no recompute")" \
  ${torchrun_pairs[@]+"${torchrun_pairs[@]}"} \
  "$(pair nanochat_single_accum2 nanochat_single_accum6 "control: accum 2 and accum 6 runs differ" different)" \
  "$(pair nanochat_single_accum2_bf16 nanochat_single_accum2 "control: the bf16 run is not the fp32 run" different)"
compare 0 \
  "$(pair nanochat_single_accum2_recompute nanochat_single_accum2 "nanochat --recompute block == no recompute, bit for bit")" \
  "$(pair llama_single_accum2_recompute llama_single_accum2 "llama --recompute block == no recompute, bit for bit")"
compare fp16-adamw \
  "$(pair llama_ranks2_accum1_fp16 llama_single_accum2_fp16 "llama fp16: 2 ranks x accum 1 == 1 rank x accum 2")"

# HellaSwag scored by a member on GPT-2's tokenizer (a few steps of Tiny Shakespeare: the score is chance,
# what is checked is that eval reads, scores and counts every example with this block).
hellaswag=$data_dir/hellaswag/hellaswag_val_full.txt
if [[ -n $data_dir && -f $data_dir/tinyshakespeare.txt && -f $hellaswag && -f $data_dir/gpt2/encoder.json ]]; then
  head -c 20000 "$data_dir/tinyshakespeare.txt" >"$WORK/text.txt"
  if expect_ok nanochat_bpe train "$WORK/text.txt" --vocab "$data_dir/gpt2" --preset nanochat-d2 --n-embd 32 \
       --n-head 2 --n-kv-head 2 --steps 3 --batch-size 2 --seq-len 64 --block-size 64 --eval-every 0 --threads 1 \
       --device cpu --out "$WORK/nanochat_bpe" &&
     expect_ok nanochat_hellaswag eval --checkpoint "$WORK/nanochat_bpe" --hellaswag "$hellaswag" --examples 12 \
       --device cpu --threads 1; then
    line=$(grep "^hellaswag accuracy:" "$WORK/nanochat_hellaswag.out")
    check "nanochat member scores HellaSwag: $line" grep -qE "^hellaswag accuracy: [0-9.]+ \([0-9]+/12 examples" \
      "$WORK/nanochat_hellaswag.out"
  fi
else
  skip "HellaSwag with a nanochat member (needs Tiny Shakespeare, HellaSwag and GPT-2's files under DATA_DIR)"
fi

finish
