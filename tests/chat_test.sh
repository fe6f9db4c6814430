#!/usr/bin/env bash
# `mygpt-ddp chat` through the binary: stdin lines in, one reply line out each; a line that is not UTF-8
# or longer than the model's context gets one error line naming it and an empty reply line, the lines after
# it are answered, and the exit is 2; bad options (a --system too long, a model without room for the chat
# tokens) are one line naming them and exit 2; on a terminal (tests/chat_terminal_test.py, a pseudo-terminal): the
# prompt, a streamed reply, Ctrl-C stopping it, "clear", Ctrl-D ending with exit 0.
# Usage: chat_test.sh MYGPT_DDP SHARED_DATA_DIR PYTHON
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
DATA_DIR=$(test_data_dir "${2:-}")
PY=${3:-python3}
make_work_dir chat
GPT2_DIR=$DATA_DIR/gpt2
SHAKESPEARE=$DATA_DIR/tinyshakespeare.txt
if [[ ! -f $GPT2_DIR/encoder.json || ! -f $SHAKESPEARE ]]; then
  skip "chat (needs $GPT2_DIR and $SHAKESPEARE)"
  # Nothing to run is not a failure here (finish would call a suite that passed nothing one).
  echo "$passed passed, $failed failed, $skipped skipped"
  exit 0
fi

# A GPT-2-tokenizer model (50304 rows: room for the five chat tokens) with a long context, barely trained.
run train_model train "$SHAKESPEARE" --tokenizer gpt2 --vocab "$GPT2_DIR" --preset tiny --block-size 1024 --batch-size 2 \
  --seq-len 64 --steps 2 --eval-every 0 --threads 1 --device cpu --out "$WORK/model"
check "a GPT-2-tokenizer model to talk with (exit $RC)" test "$RC" -eq 0
CHAT=(chat --checkpoint "$WORK/model" --device cpu --threads 1 --max-new-tokens 40)

printf 'hello\nwho are you?\n\nbye\n' >"$WORK/lines.txt"
run_cmd lines "$BIN" "${CHAT[@]}" <"$WORK/lines.txt"
check "stdin not a terminal: exit 0 (exit $RC): $(tail -n 1 "$WORK/lines.err")" test "$RC" -eq 0
check "... one reply line per input line ($(wc -l <"$WORK/lines.out") for 4)" test "$(wc -l <"$WORK/lines.out")" -eq 4
check "... a note that this model was not fine-tuned on conversations" grep -q "not fine-tuned on conversations" "$WORK/lines.err"
run_cmd lines_again "$BIN" "${CHAT[@]}" <"$WORK/lines.txt"
check "... the same seed gives the same replies" cmp -s "$WORK/lines.out" "$WORK/lines_again.out"

# A line that cannot be answered gets an error line on stderr and an empty line on stdout, and the lines
# after it are answered (the command exited at it, and a script reading a reply per line fell out of step).
printf 'hello\n\xff\xfe\nbye\n' >"$WORK/bad_utf8.txt"
run_cmd bad_utf8 "$BIN" "${CHAT[@]}" <"$WORK/bad_utf8.txt"
check "a line that is not UTF-8: exit 2, one line naming stdin line 2, 3 reply lines, the 2nd empty (exit $RC): $(cat "$WORK/bad_utf8.err")" \
  bash -c "[[ $RC -eq 2 ]] && grep -q 'stdin line 2' '$WORK/bad_utf8.err' && [[ \$(grep -vc '^note:' '$WORK/bad_utf8.err') -eq 1 ]] &&
           [[ \$(wc -l <'$WORK/bad_utf8.out') -eq 3 && -z \$(sed -n 2p '$WORK/bad_utf8.out') ]]"

{ echo hello; "$PY" -c 'print("to be or not to be " * 400)'; echo bye; } >"$WORK/long.txt"
run_cmd long "$BIN" "${CHAT[@]}" <"$WORK/long.txt"
check "a message longer than the context: exit 2, one line naming stdin line 2 and the sizes, 3 reply lines, the 2nd empty (exit $RC): $(cat "$WORK/long.err")" \
  bash -c "[[ $RC -eq 2 ]] && grep -q 'stdin line 2: the message needs [0-9]* tokens of context' '$WORK/long.err' &&
           [[ \$(grep -vc '^note:' '$WORK/long.err') -eq 1 && \$(wc -l <'$WORK/long.out') -eq 3 && -z \$(sed -n 2p '$WORK/long.out') ]]"
printf 'hello\nbye\n' >"$WORK/short.txt"
run_cmd short "$BIN" "${CHAT[@]}" <"$WORK/short.txt"
check "... and the lines around it get the replies they get without it" \
  bash -c "[[ \$(sed -n '1p;3p' '$WORK/long.out') == \$(cat '$WORK/short.out') ]]"

run_cmd long_system "$BIN" "${CHAT[@]}" --system "$(cat "$WORK/long.txt")" <"$WORK/lines.txt"
check "a --system longer than the context: exit 2 naming --system, not a message (exit $RC): $(cat "$WORK/long_system.err")" \
  bash -c "[[ $RC -eq 2 ]] && grep -q -- '--system takes [0-9]* of the model.s 1024 context tokens' '$WORK/long_system.err' && ! grep -q 'stdin line' '$WORK/long_system.err'"

run_cmd greedy_top_k "$BIN" "${CHAT[@]}" --temperature 0 --top-k 5 </dev/null
check "--top-k with --temperature 0: exit 2 naming --top-k (exit $RC)" \
  bash -c "[[ $RC -eq 2 ]] && grep -q -- '--top-k' '$WORK/greedy_top_k.err'"

# A character model has no rows to spare for the chat tokens.
printf 'abc abc abc\n%.0s' $(seq 1 200) >"$WORK/chars.txt"
run train_chars train "$WORK/chars.txt" --preset tiny --steps 1 --eval-every 0 --threads 1 --device cpu --out "$WORK/chars"
run_cmd no_room "$BIN" chat --checkpoint "$WORK/chars" --device cpu </dev/null
check "a model without rows for the chat tokens: exit 2, one line (exit $RC): $(cat "$WORK/no_room.err")" \
  bash -c "[[ $RC -eq 2 && \$(wc -l <'$WORK/no_room.err') -eq 1 ]] && grep -q 'chat' '$WORK/no_room.err' && ! grep -q 'does not exist' '$WORK/no_room.err'"

# The synthetic task: a small model fine-tuned from scratch (train --sft) on sorting four digits asked and
# answered in chat form, with a system prompt, answers held-out lists through `chat`'s stdin mode. Chance
# is about 4% for a model that only puts the four digits in some order; 99 of 100 on 2 CPU cores at 400 steps.
"$PY" - "$WORK" <<'PY'
import json, random, sys
work = sys.argv[1]
def digits(rng):
    return [rng.randrange(10) for _ in range(4)]
rng = random.Random(0)
with open(f"{work}/sort_train.jsonl", "w") as f:
    for _ in range(3000):
        xs = digits(rng)
        f.write(json.dumps({"messages": [{"role": "system", "content": "Sort the digits."},
                                         {"role": "user", "content": " ".join(map(str, xs))},
                                         {"role": "assistant", "content": " ".join(map(str, sorted(xs)))}]}) + "\n")
held_out = random.Random(99)
with open(f"{work}/sort_questions.txt", "w") as q, open(f"{work}/sort_answers.txt", "w") as a:
    for _ in range(100):
        xs = digits(held_out)
        q.write(" ".join(map(str, xs)) + "\n")
        a.write(" ".join(map(str, sorted(xs))) + "\n")
PY
run train_sort train "$WORK/sort_train.jsonl" --sft --tokenizer gpt2 --vocab "$GPT2_DIR" --preset small --seq-len 32 \
  --batch-size 32 --steps 300 --lr 3e-3 --warmup-steps 20 --eval-every 0 --threads 1 --device cpu --out "$WORK/sort"
check "fine-tuning on the sorting conversations (exit $RC): $(grep -v '^step' "$WORK/train_sort.err" | tail -n 1)" test "$RC" -eq 0
run_cmd sort_chat "$BIN" chat --checkpoint "$WORK/sort" --system "Sort the digits." --temperature 0 --device cpu \
  --threads 1 --max-new-tokens 20 <"$WORK/sort_questions.txt"
correct=$(paste -d'|' "$WORK/sort_chat.out" "$WORK/sort_answers.txt" | awk -F'|' '$1 == $2 { c++ } END { print c + 0 }')
echo "synthetic sorting task through chat: $correct of 100 held-out lists sorted exactly"
check "... answered through chat's stdin mode: $correct of 100 held-out lists sorted exactly (at least 60)" \
  test "$correct" -ge 60
check "... and no note that the model was not fine-tuned" bash -c "! grep -q 'not fine-tuned' '$WORK/sort_chat.err'"

if "$PY" -c 'import pty' >/dev/null 2>&1; then
  with_timeout 300 "$PY" "$TESTS_DIR/chat_terminal_test.py" "$BIN" "$WORK/model" >"$WORK/terminal.out" 2>&1
  rc=$?
  check "on a terminal: prompt, streamed reply, Ctrl-C, clear, Ctrl-D (exit $rc): $(tail -n 3 "$WORK/terminal.out" | tr '\n' ' ')" \
    test "$rc" -eq 0
else
  skip "chat on a terminal (this python has no pty module)"
fi
finish
