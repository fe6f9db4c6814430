#!/usr/bin/env bash
# scripts/plot_run.py on a real short run's metrics: writes a PNG (and only a PNG) into the run folder;
# two runs overlay; bad input is one line and exit 2. Skips where the python lacks matplotlib.
# Usage: plot_run_test.sh MYGPT_DDP PYTHON
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
PY=${2:-python3}
make_work_dir plot
PLOT="$REPO_DIR/scripts/plot_run.py"
if ! "$PY" -c "import matplotlib" >/dev/null 2>&1; then
  echo "SKIP: plot_run.py (the python $PY has no matplotlib; scripts/setup.sh installs it)"
  exit 77
fi
for seed in 1 2; do
  expect_ok "train_$seed" train builtin:sort --preset tiny --steps 8 --eval-every 4 --eval-steps 2 --device cpu \
    --seed "$seed" --out "$WORK/run$seed" || finish
done
run_cmd plot_one "$PY" "$PLOT" "$WORK/run1"
check "one run: exit 0 ($RC)" test "$RC" -eq 0
check "... writes run1/run.png, a PNG" bash -c "head -c 8 '$WORK/run1/run.png' | od -An -c | grep -q 'P   N   G'"
check "... and leaves no temporary file" test -z "$(find "$WORK/run1" -name '*.tmp*')"
check "... with a panel only for what the run recorded, and no GPT-2 FineWeb line on a character run: $(grep '^panels' "$WORK/plot_one.out")" \
  grep -qx "panels: training loss, validation loss, validation bits per byte, tokens / s | x: step | reference lines: none" "$WORK/plot_one.out"
run_cmd plot_two "$PY" "$PLOT" "$WORK/run1" "$WORK/run2" --out "$WORK/both.png"
check "two runs overlaid into --out (exit $RC)" test "$RC" -eq 0 -a -s "$WORK/both.png"
check "... against the step when their batches agree" grep -q "| x: step |" "$WORK/plot_two.out"
if expect_ok train_3 train builtin:sort --preset tiny --steps 4 --eval-every 0 --batch-size 4 --device cpu --out "$WORK/run3"; then
  run_cmd plot_batches "$PY" "$PLOT" "$WORK/run1" "$WORK/run3" --out "$WORK/batches.png"
  check "runs of different batches are drawn against each one's tokens seen: $(grep '^panels' "$WORK/plot_batches.out")" \
    grep -q "| x: tokens seen (each run's own tokens per step) |" "$WORK/plot_batches.out"
fi
run_cmd plot_help "$PY" "$PLOT" --help
check "--help prints the whole description (exit $RC)" grep -q "Bad input is one line on stderr and exit 2." "$WORK/plot_help.out"
run_cmd plot_missing "$PY" "$PLOT" "$WORK/nope"
check "a missing folder: exit 2 and one line ($(cat "$WORK/plot_missing.err"))" \
  test "$RC" -eq 2 -a "$(wc -l <"$WORK/plot_missing.err")" -eq 1
mkdir "$WORK/empty"
run_cmd plot_empty "$PY" "$PLOT" "$WORK/empty"
check "a folder without metrics: exit 2 naming it ($(cat "$WORK/plot_empty.err"))" \
  grep -q "holds no metrics.jsonl" "$WORK/plot_empty.err"
finish
