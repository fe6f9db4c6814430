#!/usr/bin/env bash
# The documented road with a tokenizer of one's own, end to end (issue 64): `tokenizer train` with nanochat's
# chat tokens -> `prepare` -> pretrain a tiny model -> `train --sft --init-from` it -> `chat` on stdin ->
# `export` -> transformers. --sft refused every tokenizer.json that was not GPT-2's ("tokenizer.json:
# expected 50257 tokens, found ..."): the trained folder as --vocab, the pretrained model's tokenizer,
# `--tokenizer hf`, an export's folder. Here each of those fine-tunes, on the tokenizer's own chat tokens;
# transformers applies the exported chat template and scores held-out conversations as `eval` does (the
# same assistant-token count and loss: any id of the rendering that differed would change them), and its
# greedy replies equal `chat`'s. Piped `chat` answers every line: one that does not fit the context gets
# an error line on stderr and an empty line on stdout, and the lines after it are answered.
# No public data needed: the text is made here.
#
# usage: sft_trained_tokenizer_test.sh PATH/TO/mygpt-ddp [PYTHON_WITH_TRANSFORMERS]
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTS_DIR/chat_fixture.sh"

use_binary "${1:-}"
PY=${2:-python3}
make_work_dir sft_trained_tokenizer
CPU=(--device cpu --threads 1)

# Conversations to fine-tune on and to hold out, and a text that holds their words and some prose.
chat=$WORK/chat.jsonl
held=$WORK/held.jsonl
write_conversations "$chat" 200 5
write_conversations "$held" 12 11
corpus=$WORK/corpus.txt
{
  for i in $(seq 150); do
    echo "The citizens of town $i met at noon; they spoke of bread, of rain and of the river."
    echo "Please reverse the word for me, and again: sure, here it is."
  done
  sed 's/[{}":,]/ /g' "$chat"
} >"$corpus"

# --- tokenizer train, prepare, pretrain ----------------------------------------------------------------
TOK=$WORK/tok
expect_ok tok tokenizer train --input "$corpus" --vocab-size 420 --special nanochat --out "$TOK" --threads 1 || finish
expect_ok prep prepare --input "$corpus" --vocab "$TOK" --out "$WORK/shards" --val-tokens 1024 --shard-tokens 100000 || finish
small=(--preset tiny --block-size 64 --batch-size 8 --seq-len 64 --seed 7)
expect_ok pretrain train "$WORK/shards" "${small[@]}" --steps 3 --eval-every 0 --out "$WORK/pre" "${CPU[@]}" || finish
pre=$WORK/pre/ckpt_00000003.safetensors
expect_ok export_pre export --checkpoint "$pre" --out "$WORK/pre_exported" || finish

# --- every way of naming that tokenizer reaches --sft -----------------------------------------------------
quick=(--steps 2 --eval-every 0 --val-fraction 0 --warmup-steps 0 "${CPU[@]}")
if expect_ok sft_vocab train "$chat" --sft --vocab "$TOK" "${small[@]}" "${quick[@]}" --out "$WORK/sft_vocab"; then
  check "--sft --vocab the trained folder: its own chat tokens: $(grep -m1 '^data:' "$WORK/sft_vocab.out")" \
    grep -q "^data: conversations .* | hf tokenizer with its own chat tokens, chat template 'nanochat'" "$WORK/sft_vocab.out"
fi
expect_ok sft_hf train "$chat" --sft --tokenizer hf --init-from "$pre" --batch-size 8 "${quick[@]}" --out "$WORK/sft_hf" &&
  pass "--sft --tokenizer hf --init-from the pretrained model"
expect_ok sft_export_vocab train "$chat" --sft --vocab "$WORK/pre_exported" "${small[@]}" "${quick[@]}" \
  --out "$WORK/sft_export_vocab" && pass "--sft --vocab an export's folder ($(ls "$WORK/pre_exported" | tr '\n' ' '))"
expect_ok sft_export_init train "$chat" --sft --init-from "$WORK/pre_exported" --batch-size 8 "${quick[@]}" \
  --out "$WORK/sft_export_init" && pass "--sft --init-from an export's folder"

# --- the fine-tuning that the rest talks with ------------------------------------------------------------
if ! expect_ok sft train "$chat" --sft --init-from "$pre" --batch-size 16 --steps 120 --lr 3e-3 --warmup-steps 5 \
       --eval-every 0 --val-fraction 0 "${CPU[@]}" --out "$WORK/sft"; then
  finish
fi
ckpt=$WORK/sft/ckpt_00000120.safetensors
check "--init-from the pretrained model keeps its rows (the tokenizer's own chat tokens): $(grep -m1 '^data:' "$WORK/sft.out")" \
  bash -c "grep -q '^weights: ' '$WORK/sft.out' && ! grep -q '^vocabulary: grew' '$WORK/sft.out' &&
           grep -q 'hf tokenizer with its own chat tokens' '$WORK/sft.out'"

# chat on stdin: one line out per line in, a line too long for the context (64) among them.
system="You reverse words."
printf '%s\n' "reverse abc" "please reverse the word dog for me" "xyz" >"$WORK/prompts.txt"
{
  echo "reverse abc"
  printf 'word %.0s' $(seq 80)
  echo
  echo "xyz"
} >"$WORK/with_long.txt"
run_cmd chat_long "$BIN" chat --checkpoint "$ckpt" --temperature 0 --max-new-tokens 8 "${CPU[@]}" <"$WORK/with_long.txt"
check "piped chat, line 2 too long: exit 2, 3 lines out, line 2 empty, one error line naming stdin line 2 (exit $RC): $(grep -v '^note' "$WORK/chat_long.err")" \
  bash -c "[[ $RC -eq 2 && \$(wc -l <'$WORK/chat_long.out') -eq 3 && -z \$(sed -n 2p '$WORK/chat_long.out') ]] &&
           [[ \$(grep -c 'stdin line 2: the message needs [0-9]* tokens of context' '$WORK/chat_long.err') -eq 1 ]] &&
           [[ \$(grep -vc '^note:' '$WORK/chat_long.err') -eq 1 ]]"
run_cmd chat_two "$BIN" chat --checkpoint "$ckpt" --temperature 0 --max-new-tokens 8 "${CPU[@]}" \
  < <(sed -n '1p;3p' "$WORK/with_long.txt")
check "... the lines after it are answered as they are without it" \
  bash -c "[[ \$(sed -n '1p;3p' '$WORK/chat_long.out') == \$(cat '$WORK/chat_two.out') ]]"

run_cmd chat "$BIN" chat --checkpoint "$ckpt" --temperature 0 --max-new-tokens 16 --system "$system" "${CPU[@]}" \
  <"$WORK/prompts.txt"
check "chat answers each of the 3 lines (exit $RC): $(head -c 120 "$WORK/chat.out" | tr '\n' '|')" \
  bash -c "[[ $RC -eq 0 && \$(wc -l <'$WORK/chat.out') -eq 3 ]] && ! grep -q 'not fine-tuned' '$WORK/chat.err'"

# --- export, judged by transformers ------------------------------------------------------------------------
expect_ok export export --checkpoint "$ckpt" --out "$WORK/exported" || finish
check "the export carries the chat template" grep -q chat_template "$WORK/exported/tokenizer_config.json"
if ! "$PY" -c "import transformers" 2>/dev/null; then
  skip "transformers on the export (no transformers in $PY)"
  finish
fi
if expect_ok eval eval --checkpoint "$ckpt" --val "$held" --batch-size 12 --eval-steps 1 --seq-len 64 "${CPU[@]}"; then
  ours=$(grep -m1 '^val loss:' "$WORK/eval.out")
  run_cmd template "$PY" - "$WORK/exported" "$held" "$ours" <<'PY'
import json, re, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, held, ours = sys.argv[1:4]
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
start, end = tok.convert_tokens_to_ids("<|assistant_start|>"), tok.convert_tokens_to_ids("<|assistant_end|>")
total, count = 0.0, 0
for line in open(held, encoding="utf-8"):
    record = json.loads(line)
    messages = record.get("messages") or [{"role": "user", "content": record["prompt"]},
                                          {"role": "assistant", "content": record["completion"]}]
    ids = tok.apply_chat_template(messages, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    ids = list(ids)
    assert ids[0] == tok.convert_tokens_to_ids("<|bos|>"), ids
    # The assistant's tokens: after each <|assistant_start|>, up to and with its <|assistant_end|>.
    trained, inside = [], False
    for i in ids:
        trained.append(inside)
        if i == start:
            inside = True
        elif i == end:
            inside = False
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
    mask = torch.tensor(trained[1:])
    total += nll[mask].sum().item()
    count += int(mask.sum())
m = re.match(r"val loss: ([0-9.]+) \(12 conversations, ([0-9]+) assistant tokens\)", ours)
assert m, ours
print(f"transformers: {total / count:.4f} over {count} assistant tokens; ours: {ours}")
assert int(m.group(2)) == count, "assistant token counts differ"
assert abs(float(m.group(1)) - total / count) < 2e-4, "losses differ"
PY
  check "transformers' apply_chat_template on the export scores the held-out conversations as eval does: $(tail -1 "$WORK/template.out")" \
    test "$RC" -eq 0
fi
run_cmd replies "$PY" "$TESTS_DIR/chat_reply_reference.py" "$WORK/exported" "$system" 16 "$WORK/prompts.txt" "$WORK/chat.out"
check "transformers' greedy replies on the export (its template applied) equal chat's: $(head -c 200 "$WORK/replies.out" | tr '\n' '|')" \
  test "$RC" -eq 0
finish
