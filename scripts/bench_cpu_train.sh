#!/usr/bin/env bash
# Single-process CPU training throughput: `mygpt-ddp train` next to the same model and loop in Python
# PyTorch (scripts/bench/pytorch_gpt_train.py), same torch build (.venv), same data, config, seed and
# thread count, in one invocation. Prints a markdown table and appends it to docs/benchmarks-log.md.
#
# usage: scripts/bench_cpu_train.sh [--threads "1 2"] [--configs "small shakespeare-char"]
#          [--small-steps 100] [--char-steps 30] [--repeat 2] [--skip 5] [--data FILE] [--no-append]
#
# Throughput is the median of the per-step tok/sec over the steps after the first --skip ones (each
# side times one whole train_step: batch, forward, backward, clip, AdamW, loss.item()), pooled over
# --repeat runs per side that alternate which side goes first (a shared machine drifts). Both sides
# draw the same initial weights and read the same batches, so their losses must agree step by step;
# the table reports the largest difference next to the loss at step 0 (ln(vocab) expected) and the
# mean loss over the last 10 steps.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options threads="1 2" configs="small shakespeare-char" small-steps=100 char-steps=30 repeat=2 skip=5 \
  data="$repo/../shared/data/tinyshakespeare.txt" -- "$@"

twin="$repo/scripts/bench/pytorch_gpt_train.py"
bench_need_built "$repo/build/mygpt-ddp" "$python"
[[ -f "$data" ]] || bench_die "data file $data is missing (expected the shared tinyshakespeare.txt)"
data="$(bench_abs_path "$data")"

bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"

# Model and batch flags per config (the same flags go to both sides).
config_flags() {
  case "$1" in
    small) echo "--preset small --batch-size 16 --seq-len 128 --steps $small_steps" ;;
    shakespeare-char) echo "--preset shakespeare-char --batch-size 8 --seq-len 256 --steps $char_steps" ;;
    *) bench_usage_error "unknown config '$1' (small, shakespeare-char)" ;;
  esac
}

bench_machine_facts

rows="$work/rows.jsonl"
: >"$rows"
for config in $configs; do
  flags="$(config_flags "$config")"
  for t in $threads; do
    tag="$config-t$t"
    export OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t"
    for ((rep = 1; rep <= repeat; rep++)); do
      for side in $(bench_rotate "$rep" cpp py); do
        run="$tag-r$rep-$side"
        echo "== $config, $t thread(s), run $rep/$repeat: $side ($flags)"
        if [[ $side == cpp ]]; then
          # shellcheck disable=SC2086  # flags are words on purpose
          bench_run "$work/$run.log" C++ "$binary" train "$data" --device cpu --threads "$t" --eval-every 0 \
              --log-every 20 --seed 1337 $flags --out "$work/$run"
          cp "$work/$run/metrics.jsonl" "$work/$run.jsonl"
        else
          # shellcheck disable=SC2086
          bench_run "$work/$run.log" Python "$python" "$twin" --data "$data" --threads "$t" --log-every 20 --seed 1337 \
              --skip-steps "$skip" $flags --metrics "$work/$run.jsonl"
        fi
        grep '^step' "$work/$run.log" | tail -n 2
      done
    done
    "$python" - "$config" "$t" "$skip" "$repeat" "$work/$tag" >>"$rows" <<'PY'
import json, math, statistics, sys
config, threads, skip, repeat, prefix = sys.argv[1:]
skip, repeat = int(skip), int(repeat)
def steps(path):
    return [r for r in map(json.loads, open(path)) if "loss" in r]
runs = {side: [steps(f"{prefix}-r{rep}-{side}.jsonl") for rep in range(1, repeat + 1)] for side in ("cpp", "py")}
rates = {side: [r["tok_per_sec"] for run in runs[side] for r in run[skip:]] for side in runs}
cpp, py = runs["cpp"][0], runs["py"][0]
result = json.loads([l for l in open(f"{prefix}-r1-py.log") if l.startswith("RESULT ")][-1][len("RESULT "):])
tail = lambda rs: statistics.mean(r["loss"] for r in rs[-10:])
print(json.dumps({
    "config": config, "threads": int(threads), "steps": len(cpp), "repeat": repeat, "timed": len(rates["cpp"]),
    "cpp": statistics.median(rates["cpp"]), "py": statistics.median(rates["py"]),
    "ln_vocab": result["ln_vocab"], "cpp_best": max(rates["cpp"]), "py_best": max(rates["py"]),
    "cpp_loss0": cpp[0]["loss"], "py_loss0": py[0]["loss"], "cpp_tail": tail(cpp), "py_tail": tail(py),
    # every run of either side, against the first C++ run: all must follow the same loss curve
    "max_dloss": max(abs(a["loss"] - b["loss"]) for run in runs["cpp"] + runs["py"] for a, b in zip(cpp, run)),
}))
PY
  done
done

table="$work/table.md"
"$python" - "$rows" >"$table" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| config | threads | steps x runs (timed) | C++ tok/s | Python tok/s | C++/Python "
      "| C++/Python, fastest step | loss@0 C++ / Py (ln V) | mean loss last 10, C++ / Py | max abs loss diff |")
print("|---|---:|---:|---:|---:|---:|---:|---|---|---:|")
for r in rows:
    print(f"| {r['config']} | {r['threads']} | {r['steps']} x {r['repeat']} ({r['timed']} per side) | {r['cpp']:.0f} "
          f"| {r['py']:.0f} | {r['cpp'] / r['py']:.2f} | {r['cpp_best'] / r['py_best']:.2f} | {r['cpp_loss0']:.4f} / {r['py_loss0']:.4f} ({r['ln_vocab']:.4f}) "
          f"| {r['cpp_tail']:.4f} / {r['py_tail']:.4f} | {r['max_dloss']:.2e} |")
PY
bench_report "CPU training throughput, C++ vs Python" "$table" \
  "torch $torch_version (the same build for both sides: .venv), single process, OMP_NUM_THREADS = --threads" \
  "configs: $(for c in $configs; do printf '%s: `%s`; ' "$c" "$(config_flags "$c")"; done)$repeat runs per side alternating which goes first, seed 1337, --eval-every 0, median tok/s over the steps after the first $skip of each run"
