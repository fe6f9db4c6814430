#!/usr/bin/env bash
# `train`'s validation loss and `eval --val`'s on its checkpoint are one computation (eval/validation_loss.h;
# issue 66: they were twins that had drifted apart, fp32 against fp64 sums, and so were the two losses of
# held-out conversations): on the same model, data and batches they print the same numbers to every digit,
# for plain text (loss and bits per byte) and for held-out conversations (train --sft, eval of a chat model).
# No public data needed: the text, the conversations and the tokenizer are made here.
#
# usage: val_loss_twins_test.sh PATH/TO/mygpt-ddp
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTS_DIR/chat_fixture.sh"

use_binary "${1:-}"
make_work_dir val_loss_twins
CPU=(--device cpu --threads 1)

# The number after LABEL on the last line of FILE that has it ("val loss: 3.1416 ..." -> 3.1416).
number_after() { grep "$1" "$2" | tail -n 1 | sed -E "s/.*$1 ([0-9.]+).*/\1/"; }
same() { [[ -n $1 && $1 == "$2" ]]; }

# --- plain text, character tokenizer: the loss and bits per byte ----------------------------------------
text=$WORK/text.txt
for i in $(seq 300); do
  echo "Line $i: the citizens of the town met at noon and spoke of bread, of rain and of the river."
done >"$text"
shape=(--batch-size 4 --seq-len 32 --eval-steps 3)
if expect_ok plain_train train "$text" --preset tiny --block-size 32 "${shape[@]}" --steps 4 --eval-every 4 \
     --lr 3e-3 --warmup-steps 1 --seed 3 "${CPU[@]}" --out "$WORK/plain" &&
   expect_ok plain_eval eval --checkpoint "$WORK/plain/ckpt_00000004.safetensors" --val "$text" "${shape[@]}" "${CPU[@]}"; then
  trained=$(number_after "val loss:" "$WORK/plain_train.out")
  evaluated=$(number_after "val loss:" "$WORK/plain_eval.out")
  check "plain text: train's validation loss ($trained) is eval's on its checkpoint ($evaluated), every digit" \
    same "$trained" "$evaluated"
  trained=$(number_after "val bpb:" "$WORK/plain_train.out")
  evaluated=$(number_after "bpb:" "$WORK/plain_eval.out")
  check "plain text: train's bits per byte ($trained) are eval's ($evaluated), every digit" same "$trained" "$evaluated"
fi

# --- held-out conversations (train --sft, eval of the chat model) --------------------------------------
chat=$WORK/chat.jsonl
held=$WORK/held.jsonl
write_conversations "$chat" 120 5
write_conversations "$held" 12 11
corpus=$WORK/corpus.txt
{
  cat "$text"
  sed 's/[{}":,]/ /g' "$chat"
} >"$corpus"
if expect_ok tok tokenizer train --input "$corpus" --vocab-size 400 --special nanochat --out "$WORK/tok" --threads 1; then
  shape=(--batch-size 4 --seq-len 64 --eval-steps 2)
  if expect_ok sft_train train "$chat" --sft --val-data "$held" --vocab "$WORK/tok" --preset tiny --block-size 64 \
       "${shape[@]}" --steps 4 --eval-every 4 --lr 3e-3 --warmup-steps 1 --seed 3 "${CPU[@]}" --out "$WORK/sft" &&
     expect_ok sft_eval eval --checkpoint "$WORK/sft/ckpt_00000004.safetensors" --val "$held" "${shape[@]}" "${CPU[@]}"; then
    trained=$(number_after "val loss:" "$WORK/sft_train.out")
    evaluated=$(number_after "val loss:" "$WORK/sft_eval.out")
    check "conversations: train --sft's validation loss ($trained) is eval's on its checkpoint ($evaluated), every digit" \
      same "$trained" "$evaluated"
  fi
fi
finish
