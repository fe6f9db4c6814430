#!/usr/bin/env bash
# --zero 2 and 3 with what fine-tuning brings (issue 65), on 2 ranks against --zero 0 on the same ranks,
# bit for bit (no accumulation: the two add the same numbers in the same order):
#  (a) train --init-from <Hugging Face folder> --sft --zero 3: a GPT-2 of 50257 rows saved by transformers,
#      grown for the chat tokens, each rank reading only its piece of each tensor from the mapped file:
#      the same first loss, losses and final weights as --zero 0; and --zero 2 likewise;
#  (b) --precision fp16 (autocast on the CPU, the dynamic loss scale) at --zero 2 and 3 == --zero 0, with
#      an overflow injected into rank 1's gradients at step 2: every rank skips that step and halves the
#      scale alike.
# (a) needs GPT-2's tokenizer files (the shared data) and transformers, and is skipped in one line without.
#
# usage: zero_fine_tuning_test.sh PATH/TO/mygpt-ddp PATH/TO/python-with-torch SHARED_DATA_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
source "$TESTS_DIR/chat_fixture.sh"

use_binary "${1:-}"
python=${2:-python3}
vocab=$(test_data_dir "${3:-}")/gpt2
use_mpirun
make_work_dir zero_fine_tuning
[[ ${#MPIRUN[@]} -gt 0 ]] || { fail "no mpirun on the PATH"; finish; }

# train_run NAME [flags...]: 2 ranks.
train_run() {
  local name=$1
  shift
  run_np 2 "$name" "$@" --out "$WORK/$name"
  if [[ $RC -ne 0 ]]; then
    fail "$name: training failed" "exit $RC: $(tail -c 400 "$WORK/$name.err")"
    return 1
  fi
}

pair() { echo "$3|$WORK/$1|$WORK/$2|same"; }
compare() {
  local comparison
  comparison=$("$python" "$TESTS_DIR/mpi/compare_runs.py" 0 "$@" 2>&1)
  echo "$comparison"
  passed=$((passed + $(grep -c '^PASS:' <<<"$comparison")))
  failed=$((failed + $(grep -c '^FAIL:' <<<"$comparison")))
  [[ $(grep -cE '^(PASS|FAIL):' <<<"$comparison") -eq $# ]] || fail "the comparison did not report all $# pairs"
}

first_loss() { metric_values loss "$WORK/$1/metrics.jsonl" | head -1; }

# --- (a) a Hugging Face folder, fine-tuned on conversations --------------------------------------------
if [[ ! -f $vocab/encoder.json ]]; then
  skip "(a) GPT-2's tokenizer files are not in $vocab (see README)"
elif ! "$python" -c "import transformers" 2>/dev/null; then
  skip "(a) no transformers in $python"
elif "$python" "$TESTS_DIR/hf_reference.py" make "$WORK/hf_gpt2" --vocab 50257 --seed 3 --tokens "1,2,3" >/dev/null &&
     "$python" "$TESTS_DIR/tokenizer_reference.py" make-gpt2 "$vocab" "$WORK/hf_tokenizer" >/dev/null &&
     cp "$WORK/hf_tokenizer/tokenizer.json" "$WORK/hf_gpt2/" && cp "$vocab/encoder.json" "$WORK/hf_gpt2/vocab.json" &&
     cp "$vocab/vocab.bpe" "$WORK/hf_gpt2/merges.txt"; then
  write_conversations "$WORK/chat.jsonl" 60 9
  sft=(train "$WORK/chat.jsonl" --sft --init-from "$WORK/hf_gpt2" --batch-size 4 --seq-len 32 --steps 4 --lr 3e-3
       --warmup-steps 1 --seed 11 --eval-every 0 --log-every 1 --grad-clip 1.0 --threads 1 --device cpu)
  for zero in 0 2 3; do train_run "sft_zero$zero" "${sft[@]}" --zero "$zero"; done
  check "(a) --zero 3 read the Hugging Face folder and grew its rows: $(grep -m1 '^vocabulary:' "$WORK/sft_zero3.out")" \
    grep -q "^vocabulary: grew the model's 50257 token rows to 50304" "$WORK/sft_zero3.out"
  check "(a) --zero 3's first loss $(first_loss sft_zero3) == --zero 0's $(first_loss sft_zero0)" \
    test "$(first_loss sft_zero3)" = "$(first_loss sft_zero0)"
  compare "$(pair sft_zero3 sft_zero0 "(a) --init-from a Hugging Face folder --sft: --zero 3 == --zero 0 bit for bit")" \
          "$(pair sft_zero2 sft_zero0 "(a) --init-from a Hugging Face folder --sft: --zero 2 == --zero 0 bit for bit")"
else
  fail "(a) could not make the Hugging Face folder with transformers"
fi

# --- (b) fp16 with its loss scale ---------------------------------------------------------------------
fp16=(train builtin:sort --preset tiny --steps 8 --batch-size 4 --seq-len 32 --lr 1e-3 --min-lr 1e-4 --warmup-steps 2
      --seed 77 --data-order sequential --eval-every 0 --log-every 1 --grad-clip 1.0 --bias false --threads 1
      --device cpu --precision fp16 --loss-scale-init 4096 --loss-scale-growth-interval 3)
for zero in 0 2 3; do MYGPT_TEST_INJECT_OVERFLOW=1:2 train_run "fp16_zero$zero" "${fp16[@]}" --zero "$zero"; done
check "(b) --zero 3 skipped step 2 as an overflow at scale 4096" \
  grep -q "^step 2 | skipped: gradients overflowed fp16 at loss scale 4096" "$WORK/fp16_zero3.out"
check "(b) --zero 3's loss scales step by step are --zero 0's" \
  test "$(metric_values loss_scale "$WORK/fp16_zero3/metrics.jsonl" | tr '\n' ' ')" = \
       "$(metric_values loss_scale "$WORK/fp16_zero0/metrics.jsonl" | tr '\n' ' ')"
compare "$(pair fp16_zero3 fp16_zero0 "(b) fp16 with an overflow on rank 1: --zero 3 == --zero 0 bit for bit")" \
        "$(pair fp16_zero2 fp16_zero0 "(b) fp16 with an overflow on rank 1: --zero 2 == --zero 0 bit for bit")"
finish
