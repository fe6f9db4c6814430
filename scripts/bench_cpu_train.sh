#!/usr/bin/env bash
# Single-process CPU training throughput: `mygpt-ddp train` next to the same model and loop in Python
# PyTorch (scripts/bench/pytorch_gpt_train.py), same torch build (.venv), same data, config, seed and
# thread count, in one invocation. Prints a markdown table and appends it to docs/BENCHMARKS.md.
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

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
command_line="scripts/bench_cpu_train.sh"
[[ $# -gt 0 ]] && command_line+="$(printf ' %q' "$@")"

threads_list="1 2"
configs="small shakespeare-char"
small_steps=100
char_steps=30
repeat=2
skip=5
append=1
data="$repo/../shared/data/tinyshakespeare.txt"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads_list="$2"; shift 2 ;;
    --configs) configs="$2"; shift 2 ;;
    --small-steps) small_steps="$2"; shift 2 ;;
    --char-steps) char_steps="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --skip) skip="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --no-append) append=0; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_cpu_train.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

binary="$repo/build/mygpt-ddp"
python="$repo/.venv/bin/python"
twin="$repo/scripts/bench/pytorch_gpt_train.py"
[[ -x "$binary" ]] || { echo "bench_cpu_train.sh: $binary is missing; run scripts/setup.sh first" >&2; exit 1; }
[[ -x "$python" ]] || { echo "bench_cpu_train.sh: $python is missing; run scripts/setup.sh first" >&2; exit 1; }
[[ -f "$data" ]] || { echo "bench_cpu_train.sh: data file $data is missing (expected the shared tinyshakespeare.txt)" >&2; exit 1; }
data="$(cd "$(dirname "$data")" && pwd)/$(basename "$data")"

work="$(mktemp -d "${TMPDIR:-/tmp}/bench_cpu_train.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# A snapshot of the binary (its library path is absolute), so a rebuild while we run cannot swap or
# remove it halfway through.
cp "$binary" "$work/mygpt-ddp"
binary="$work/mygpt-ddp"

# Model and batch flags per config (the same flags go to both sides).
config_flags() {
  case "$1" in
    small) echo "--preset small --batch-size 16 --seq-len 128 --steps $small_steps" ;;
    shakespeare-char) echo "--preset shakespeare-char --batch-size 8 --seq-len 256 --steps $char_steps" ;;
    *) echo "bench_cpu_train.sh: unknown config '$1' (small, shakespeare-char)" >&2; exit 2 ;;
  esac
}

torch_version="$("$python" -c 'import torch; print(torch.__version__)')"
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
mem="$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
load="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $torch_version | $(nproc) CPUs ($cpu_model) | $mem | load average at start: $load"
if awk -v n="$(nproc)" '{ exit !($1 > n) }' /proc/loadavg; then
  echo "bench_cpu_train.sh: warning: the load average exceeds the CPU count; numbers will be noisy" >&2
fi

rows="$work/rows.jsonl"
: >"$rows"
for config in $configs; do
  flags="$(config_flags "$config")"
  for threads in $threads_list; do
    tag="$config-t$threads"
    export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
    for ((rep = 1; rep <= repeat; rep++)); do
      order="cpp py"; (( rep % 2 == 0 )) && order="py cpp"
      for side in $order; do
        run="$tag-r$rep-$side"
        echo "== $config, $threads thread(s), run $rep/$repeat: $side ($flags)"
        if [[ $side == cpp ]]; then
          # shellcheck disable=SC2086  # flags are words on purpose
          "$binary" train "$data" --device cpu --threads "$threads" --eval-every 0 --log-every 20 --seed 1337 \
              $flags --out "$work/$run" >"$work/$run.log" 2>&1 || {
            cat "$work/$run.log" >&2; echo "bench_cpu_train.sh: the C++ run failed" >&2; exit 1; }
          cp "$work/$run/metrics.jsonl" "$work/$run.jsonl"
        else
          # shellcheck disable=SC2086
          "$python" "$twin" --data "$data" --threads "$threads" --log-every 20 --seed 1337 --skip-steps "$skip" \
              $flags --metrics "$work/$run.jsonl" >"$work/$run.log" 2>&1 || {
            cat "$work/$run.log" >&2; echo "bench_cpu_train.sh: the Python run failed" >&2; exit 1; }
        fi
        grep '^step' "$work/$run.log" | tail -n 2
      done
    done
    "$python" - "$config" "$threads" "$skip" "$repeat" "$work/$tag" >>"$rows" <<'PY'
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
echo
cat "$table"

if [[ $append -eq 1 ]]; then
  out="$repo/docs/BENCHMARKS.md"
  [[ -f "$out" ]] || { echo "bench_cpu_train.sh: $out is missing" >&2; exit 1; }
  {
    echo
    echo "## CPU training throughput, C++ vs Python, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $cpu_model, $mem RAM; load average (1/5/15 min) at start $load, at end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- torch $torch_version (the same build for both sides: .venv), single process, OMP_NUM_THREADS = --threads"
    echo "- command: \`$command_line\`"
    echo "- configs: $(for c in $configs; do printf '%s: `%s`; ' "$c" "$(config_flags "$c")"; done)$repeat runs per side alternating which goes first, seed 1337, --eval-every 0, median tok/s over the steps after the first $skip of each run"
    echo
    cat "$table"
  } >>"$out"
  echo
  echo "appended to docs/BENCHMARKS.md"
fi
