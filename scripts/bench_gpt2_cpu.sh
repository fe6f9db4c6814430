#!/usr/bin/env bash
# GPT-2 124M (`--preset gpt2`) training step time on CPU, C++ vs Python PyTorch, 1 and 2 ranks:
#   C++    1 rank:  mygpt-ddp train SHARDS --preset gpt2 --threads T1
#   C++    N ranks: mpirun -np N mygpt-ddp train ... --threads 1        (MPI all-reduce of gradients)
#   Python 1 rank:  scripts/bench/pytorch_gpt2_cpu.py --threads T1
#   Python N ranks: torchrun --nproc_per_node N scripts/bench/pytorch_gpt2_cpu.py --threads 1 (DDP, gloo)
# in one invocation, on the same torch build (.venv), the same GPT-2 shards (made here with
# `mygpt-ddp prepare` from Tiny Shakespeare), the same seed, batch and fp32 precision. Prints a
# markdown table and appends it to docs/BENCHMARKS.md.
#
# usage: scripts/bench_gpt2_cpu.sh [--steps 6] [--skip 2] [--batch-size 1] [--seq-len 256]
#          [--threads 2] [--ranks 2] [--model-flags "--n-layer 2"] [--text FILE] [--vocab DIR] [--no-append]
#
# Step time is the median of the per-step times after the first --skip steps (each side times one
# whole optimizer step: batch, forward, backward, gradient all-reduce, clip, AdamW, loss.item(); with
# N ranks rank 0's clock). tok/s = B x T x ranks / median step time. Both sides draw the same initial
# weights and read the same batches, so their losses must agree step by step (the table shows the
# largest difference). Each run goes through scripts/bench/step_cpu_monitor.py, which sums the CPU
# time of the run's whole process tree (all ranks, their communication threads included) over the
# same steps: on a machine other jobs share, CPU s per step is the steadier measure of the work, and
# it exposes busy-waiting. The C++ all-reduce wait is the trainer's own sync_wait_ms (how long the step
# waits for gradient buckets after backward; median). --model-flags (e.g. "--n-layer 2") shrinks the
# model on both sides, for a quick check of the script itself.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
command_line="scripts/bench_gpt2_cpu.sh"
[[ $# -gt 0 ]] && command_line+="$(printf ' %q' "$@")"

steps=6
skip=2
batch=1
seq=256
threads=2
ranks=2
model_flags=""
text="$repo/../shared/data/tinyshakespeare.txt"
vocab="$repo/../shared/data/gpt2"
append=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --skip) skip="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --seq-len) seq="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --model-flags) model_flags="$2"; shift 2 ;;
    --text) text="$2"; shift 2 ;;
    --vocab) vocab="$2"; shift 2 ;;
    --no-append) append=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_gpt2_cpu.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
(( steps > skip && skip >= 1 )) || { echo "bench_gpt2_cpu.sh: need --steps > --skip >= 1" >&2; exit 2; }

binary="$repo/build/mygpt-ddp"
python="$repo/.venv/bin/python"
twin="$repo/scripts/bench/pytorch_gpt2_cpu.py"
monitor="$repo/scripts/bench/step_cpu_monitor.py"
[[ -x "$binary" ]] || { echo "bench_gpt2_cpu.sh: $binary is missing; run scripts/setup.sh first" >&2; exit 1; }
[[ -x "$python" ]] || { echo "bench_gpt2_cpu.sh: $python is missing; run scripts/setup.sh first" >&2; exit 1; }
[[ -f "$text" ]] || { echo "bench_gpt2_cpu.sh: text file $text is missing" >&2; exit 1; }
[[ -f "$vocab/encoder.json" && -f "$vocab/vocab.bpe" ]] || {
  echo "bench_gpt2_cpu.sh: $vocab must hold encoder.json and vocab.bpe" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "bench_gpt2_cpu.sh: mpirun is missing" >&2; exit 1; }
# shellcheck source=scripts/mpi_env.sh
source "$repo/scripts/mpi_env.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/bench_gpt2_cpu.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$binary" "$work/mygpt-ddp"  # a rebuild while we run cannot swap it halfway
binary="$work/mygpt-ddp"

ncpu="$(nproc)"
torch_version="$("$python" -c 'import torch; print(torch.__version__)')"
mpi_version="$(mpirun --version 2>/dev/null | head -n 1)"
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
mem="$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
load="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $torch_version | $mpi_version | $ncpu CPUs ($cpu_model) | $mem | load average at start: $load"
if awk -v n="$ncpu" '{ exit !($1 > n) }' /proc/loadavg; then
  echo "bench_gpt2_cpu.sh: warning: the load average exceeds the CPU count; step times will be slow and noisy" >&2
fi

shards="$work/shards"
"$binary" prepare --tokenizer gpt2 --vocab "$vocab" --input "$text" --out "$shards" --val-tokens 0 | tail -n 1

# The same flags go to both sides (the Python twin defaults to the gpt2 recipe's lr, min lr, warmup).
common=(--batch-size "$batch" --seq-len "$seq" --grad-accum 1 --steps "$steps" --seed 1337)
# shellcheck disable=SC2206  # model flags are words on purpose
common+=($model_flags)
cpp_flags=(train "$shards" --preset gpt2 --device cpu --total-batch-tokens 0 --precision fp32 --eval-every 0
           --log-every 1 "${common[@]}")

# run NAME WORLD SIDE: one benchmark run; leaves NAME.jsonl (per-step metrics) and NAME.log.
run() {
  local name="$1" world="$2" side="$3" t=1
  (( world == 1 )) && t="$threads"
  echo "== $side, $world rank(s) x $t thread(s)"
  local -a cmd
  if [[ $side == cpp ]]; then
    if (( world == 1 )); then cmd=("$binary" "${cpp_flags[@]}" --threads "$t" --out "$work/$name")
    else cmd=("${MYGPT_MPIRUN[@]}" -np "$world" "$binary" "${cpp_flags[@]}" --threads "$t" --out "$work/$name"); fi
  else
    if (( world == 1 )); then cmd=("$python" "$twin")
    else cmd=("$repo/.venv/bin/torchrun" --standalone --nproc_per_node "$world" "$twin"); fi
    cmd+=(--data "$shards" --threads "$t" --skip-steps "$skip" --metrics "$work/$name.jsonl" "${common[@]}")
  fi
  echo "\$ OMP_NUM_THREADS=$t ${cmd[*]}" >"$work/$name.cmd"
  # The CPU window: from the end of step skip-1 to the end of the last step, the steps the median covers.
  cmd=("$python" "$monitor" --from-step "$((skip - 1))" --to-step "$((steps - 1))" -- "${cmd[@]}")
  OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" "${cmd[@]}" >"$work/$name.log" 2>&1 || {
    cat "$work/$name.log" >&2; echo "bench_gpt2_cpu.sh: the $side run on $world rank(s) failed" >&2; exit 1; }
  if [[ $side == cpp ]]; then
    cp "$work/$name/metrics.jsonl" "$work/$name.jsonl"
    rm -rf "${work:?}/$name"  # the final checkpoint: 1.5 GB for gpt2
  fi
  grep -E '^step +[0-9]+ \|' "$work/$name.log" | sed 's/ | mfu.*//' | tail -n "$steps"
  grep '^CPU_WINDOW' "$work/$name.log" || true
}

start_s=$SECONDS
run cpp-1 1 cpp
run py-1 1 py
run py-n "$ranks" py  # alternate which side goes first
run cpp-n "$ranks" cpp
elapsed_s=$((SECONDS - start_s))

table="$work/table.md"
"$python" - "$work" "$skip" "$batch" "$seq" "$ranks" "$threads" >"$table" <<'PY'
import json, statistics, sys
work, skip, batch, seq, ranks, threads = sys.argv[1], *map(int, sys.argv[2:])
def steps(name):
    return [r for r in map(json.loads, open(f"{work}/{name}.jsonl")) if "loss" in r]
def cpu_window(name):
    lines = [l for l in open(f"{work}/{name}.log") if l.startswith("CPU_WINDOW ")]
    return json.loads(lines[-1][len("CPU_WINDOW "):]) if lines else None
print("| ranks x threads | C++ step ms (median) | C++ tok/s | Python step ms (median) | Python tok/s "
      "| C++/Python speed | C++ / Python CPU s per step, all ranks | C++/Python speed by CPU time "
      "| C++ / Python step ms, fastest | C++ grad all-reduce wait ms | max abs loss diff | loss step 0 -> last |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
rate = {}
for tag, world, t in (("1", 1, threads), ("n", ranks, 1)):
    cpp, py = steps(f"cpp-{tag}"), steps(f"py-{tag}")
    dt = {k: [r["dt_ms"] for r in v[skip:]] for k, v in (("cpp", cpp), ("py", py))}
    med = {k: statistics.median(v) for k, v in dt.items()}
    tokens = batch * seq * world
    rate[tag] = {k: tokens / (m / 1000) for k, m in med.items()}
    dloss = max(abs(a["loss"] - b["loss"]) for a, b in zip(cpp, py))
    cw = {k: cpu_window(f"{k}-{tag}") for k in ("cpp", "py")}
    if all(cw.values()):
        cpu_cols = (f"{cw['cpp']['cpu_s_per_step']:.2f} / {cw['py']['cpu_s_per_step']:.2f} "
                    f"| {cw['py']['cpu_s_per_step'] / cw['cpp']['cpu_s_per_step']:.2f}")
    else:
        cpu_cols = "n/a | n/a"
    print(f"| {world} x {t} | {med['cpp']:.0f} | {rate[tag]['cpp']:.1f} | {med['py']:.0f} | {rate[tag]['py']:.1f} "
          f"| {med['py'] / med['cpp']:.2f} | {cpu_cols} | {min(dt['cpp']):.0f} / {min(dt['py']):.0f} "
          f"| {statistics.median(r.get('sync_wait_ms', 0.0) for r in cpp[skip:]):.0f} | {dloss:.1e} "
          f"| {cpp[0]['loss']:.4f} -> {cpp[-1]['loss']:.4f} |")
print(f"\n{ranks} ranks vs 1 rank, tok/s: C++ {rate['n']['cpp'] / rate['1']['cpp']:.2f}x, "
      f"Python {rate['n']['py'] / rate['1']['py']:.2f}x")
PY
echo
cat "$table"
echo "(the four runs took ${elapsed_s} s)"

if [[ $append -eq 1 ]]; then
  out="$repo/docs/BENCHMARKS.md"
  [[ -f "$out" ]] || { echo "bench_gpt2_cpu.sh: $out is missing" >&2; exit 1; }
  model_line="$(grep -m1 '^model:' "$work/cpp-1.log" || true)"
  {
    echo
    echo "## GPT-2 124M CPU training step, C++ vs Python, 1 and $ranks ranks, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $ncpu CPUs, $cpu_model, $mem RAM; load average (1/5/15 min) at start $load, at end $(cut -d' ' -f1-3 /proc/loadavg); the four runs took ${elapsed_s} s"
    echo "- versions: torch $torch_version for both sides (.venv), $mpi_version; Python DDP over gloo under torchrun"
    echo "- command: \`$command_line\`"
    echo "- ${model_line:-model: gpt2 preset}; batch $batch x $seq per rank, grad accum 1, fp32, seed 1337, $steps steps, median over steps $skip..$((steps - 1)); data: GPT-2 shards from \`mygpt-ddp prepare\` of $(basename "$text") (--val-tokens 0)"
    for name in cpp-1 py-1 cpp-n py-n; do
      echo "- ${name}: \`$(sed "s|$work/mygpt-ddp|build/mygpt-ddp|g; s|$work|TMP|g; s|$repo/||g" "$work/$name.cmd" | cut -c 3-)\`"
    done
    echo
    cat "$table"
  } >>"$out"
  echo
  echo "appended to docs/BENCHMARKS.md"
fi
