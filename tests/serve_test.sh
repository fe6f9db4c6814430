#!/usr/bin/env bash
# `mygpt-ddp serve` end to end (issue 67): a small chat model fine-tuned here in seconds (train --sft on
# GPT-2's tokenizer) is served, and the official openai client (tests/serve_api_test.py) and a headless
# chromium driven by Selenium (tests/serve_page_test.py) talk to it. Bad options are one line, exit 2.
# Installs openai and selenium into the Python given (pip) and chromium with its driver (apt, as root)
# where they are missing; skips in one line where they cannot be had (offline).
# usage: serve_test.sh MYGPT_DDP SHARED_DATA_DIR PYTHON
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$TESTS_DIR/chat_fixture.sh"
use_binary "${1:-}"
DATA_DIR=$(test_data_dir "${2:-}")
PY=${3:-python3}
make_work_dir serve
GPT2_DIR=$DATA_DIR/gpt2
if [[ ! -f $GPT2_DIR/encoder.json ]]; then
  skip "serve (needs GPT-2's tokenizer files in $GPT2_DIR)"
  echo "$passed passed, $failed failed, $skipped skipped"
  exit 0
fi

# --- bad options: one line, exit 2 ----------------------------------------------------------------------
expect_bad_input "serve: --port out of range" "--port" "" serve --checkpoint "$WORK/none" --port 70000
expect_bad_input "serve: --max-batch 0" "--max-batch" "" serve --checkpoint "$WORK/none" --max-batch 0
expect_bad_input "serve: a missing checkpoint" "none" "" serve --checkpoint "$WORK/none" --device cpu

# --- a chat model -------------------------------------------------------------------------------------------
write_conversations "$WORK/chat.jsonl" 300 3
run train_model train "$WORK/chat.jsonl" --sft --vocab "$GPT2_DIR" --preset tiny --block-size 1024 --seq-len 48 \
  --batch-size 8 --steps 40 --lr 3e-3 --warmup-steps 2 --eval-every 0 --seed 3 --threads 1 --device cpu \
  --out "$WORK/model"
check "a chat model to serve (exit $RC)" test "$RC" -eq 0
expect_bad_input "serve: --host that is no IP address" "--host" "" serve --checkpoint "$WORK/model" --host 256.1.1.1

# --- the openai client ----------------------------------------------------------------------------------------
have_module() { "$PY" -c "import $1" >/dev/null 2>&1; }
install_module() { have_module "$1" || with_timeout 180 "$PY" -m pip install -q "$2" >"$WORK/pip_$1.log" 2>&1; have_module "$1"; }
if install_module openai openai && install_module tokenizers tokenizers; then
  with_timeout 600 "$PY" "$TESTS_DIR/serve_api_test.py" "$BIN" "$WORK/model" "$GPT2_DIR" "$WORK" >"$WORK/api.out" 2>&1
  rc=$?
  cat "$WORK/api.out"
  check "the openai client against the server (exit $rc)" test "$rc" -eq 0
else
  skip "serve through the openai client (pip install openai failed: offline?)"
fi

# --- the page in a browser ------------------------------------------------------------------------------------
if ! command -v chromedriver >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  with_timeout 600 apt-get install -y -q chromium chromium-driver >"$WORK/apt.log" 2>&1
fi
if ! command -v chromedriver >/dev/null 2>&1; then
  skip "the chat page in a browser (no chromium-driver: apt-get install chromium chromium-driver)"
elif ! install_module selenium selenium; then
  skip "the chat page in a browser (pip install selenium failed: offline?)"
else
  # A model never fine-tuned on conversations: its replies run to max_tokens, long enough to watch stream in
  # (and, 128 wide, slow enough that a long one is still going when the page test stops the server under it).
  train_plain_model train_base "$GPT2_DIR" "$WORK/base" --preset tiny --n-embd 128 --block-size 1024 --seq-len 48 \
    --batch-size 4 --steps 3 --threads 1 --device cpu
  check "a base model for the page (exit $RC)" test "$RC" -eq 0
  with_timeout 300 "$PY" "$TESTS_DIR/serve_page_test.py" "$BIN" "$WORK/base" "$WORK" >"$WORK/page.out" 2>&1
  rc=$?
  cat "$WORK/page.out"
  if [[ $rc -eq 77 ]]; then
    skip "the chat page in a browser: $(tail -n 1 "$WORK/page.out")"
  else
    check "the chat page in headless chromium (exit $rc)" test "$rc" -eq 0
  fi
fi
finish
