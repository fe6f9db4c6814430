#!/usr/bin/env bash
# Memory options on CPU, measured: peak RSS per rank of `--zero 0` against `--zero 1` on 2 and 3 ranks
# (a model whose AdamW state dominates: 4 layers, 512 wide, GPT-2's 50304-token vocabulary, batch 1 x 32),
# and peak RSS and step time of `--recompute none|mlp|block` on 1 rank (a model whose activations
# dominate: 4 layers, 256 wide, vocabulary 512, batch 16 x 256, dropout 0.1). Prints markdown tables and
# appends them to docs/BENCHMARKS.md.
#
# usage: scripts/bench_memory_options.sh [--steps 4] [--no-append]
#
# Peak RSS is `/usr/bin/time`'s maximum resident set size of each rank's process (LibTorch's own
# baseline included). Step time is the median dt_ms of metrics.jsonl, leaving out step 0. Bytes sent
# per rank and step are counted from the parameter count: the gradient all-reduce moves 2(N-1)/N of the
# gradients, as a reduce-scatter then an all-gather (MpiCommunicator's rank-ordered sum); --zero 1 sends
# the same two halves, the second one carrying updated parameters instead of gradients (plus the
# shards' alignment padding, at most 1024 elements per tensor).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
command_line="scripts/bench_memory_options.sh"
[[ $# -gt 0 ]] && command_line+="$(printf ' %q' "$@")"
steps=4
append=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --no-append) append=0; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_memory_options.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$steps" -ge 2 ]] || { echo "bench_memory_options.sh: --steps must be at least 2 (step 0 is left out)" >&2; exit 2; }

binary="$repo/build/mygpt-ddp"
python="$repo/.venv/bin/python"
[[ -x "$binary" ]] || { echo "bench_memory_options.sh: $binary is missing; run scripts/setup.sh first" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_memory_options.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
source "$repo/scripts/mpi_env.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/bench_memory_options.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$binary" "$work/mygpt-ddp"
"$python" - "$work/train.bin" <<'PY'
import array, random, sys
random.seed(0)
array.array("H", (random.randrange(512) for _ in range(300_000))).tofile(open(sys.argv[1], "wb"))
PY

common=(train "$work/train.bin" --steps "$steps" --eval-every 0 --log-every 1 --device cpu --threads 1 --seed 1337
        --warmup-steps 1)
zero_model=(--preset tiny --n-layer 4 --n-embd 512 --n-head 8 --block-size 32 --batch-size 1 --vocab-size 50304)
recompute_model=(--preset tiny --n-layer 4 --n-embd 256 --n-head 4 --block-size 256 --batch-size 16 --vocab-size 512
                 --dropout 0.1)

# run NAME RANKS FLAGS...: every rank under /usr/bin/time; its peak RSS (KiB) lines land in NAME.rss.
run() {
  local name=$1 ranks=$2
  shift 2
  local launcher=()
  ((ranks > 1)) && launcher=("${MYGPT_MPIRUN[@]}" -np "$ranks")
  env OMP_NUM_THREADS=1 "${launcher[@]}" /usr/bin/time -f "peak-rss-kib %M" "$work/mygpt-ddp" "${common[@]}" "$@" \
    --out "$work/$name" >"$work/$name.log" 2>&1 || { echo "the $name run failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  awk '/^peak-rss-kib/ {print $2}' "$work/$name.log" >"$work/$name.rss"
  echo "$name: peak RSS per rank (MiB): $(awk '{printf "%d ", $1 / 1024}' "$work/$name.rss")"
}

cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
mem="$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
torch_version="$("$python" -c 'import torch; print(torch.__version__)')"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $torch_version | $(nproc) CPUs ($cpu_model) | $mem | load average at start: $load_start"

for ranks in 2 3; do
  for zero in 0 1; do run "zero${zero}_np${ranks}" "$ranks" "${zero_model[@]}" --zero "$zero"; done
done
for mode in none mlp block; do run "recompute_$mode" 1 "${recompute_model[@]}" --recompute "$mode"; done

tables="$("$python" - "$work" <<'PY'
import json, os, re, statistics, sys
work = sys.argv[1]
def rss(name): return [int(l) / 1024 for l in open(os.path.join(work, name + ".rss"))]
def records(name):
    return [json.loads(l) for l in open(os.path.join(work, name, "metrics.jsonl")) if '"dt_ms"' in l]
def params(name):
    return int(re.search(r"\| (\d+) parameters", open(os.path.join(work, name + ".log")).read()).group(1))
P = params("zero0_np2")
print("| ranks | --zero | peak RSS per rank, MiB | mean | AdamW state per rank, MiB | sent per rank and step, MiB | losses equal |")
print("|---:|---:|---|---:|---:|---:|---|")
for n in (2, 3):
    base = records(f"zero0_np{n}")
    for z in (0, 1):
        r = rss(f"zero{z}_np{n}")
        same = all(a["loss"] == b["loss"] for a, b in zip(base, records(f"zero{z}_np{n}")))
        state = 8 * P / (n if z else 1) / 2**20
        sent = 2 * (n - 1) / n * 4 * P / 2**20
        print(f"| {n} | {z} | {' / '.join(f'{x:.0f}' for x in r)} | {statistics.mean(r):.0f} | {state:.0f} | {sent:.0f} | "
              f"{'bit for bit' if same else 'NO'} |")
print()
print(f"(model: {P} parameters, fp32: {4 * P / 2**20:.0f} MiB of weights, as much again of gradients)")
print()
print("| --recompute | peak RSS MiB | step ms (median, steps >= 1) | losses vs none |")
print("|---|---:|---:|---|")
base = records("recompute_none")
for mode in ("none", "mlp", "block"):
    recs = records(f"recompute_{mode}")
    same = all(a["loss"] == b["loss"] for a, b in zip(base, recs))
    dt = statistics.median(r["dt_ms"] for r in recs if r["step"] > 0)
    print(f"| {mode} | {rss(f'recompute_{mode}')[0]:.0f} | {dt:.0f} | {'bit for bit' if same else 'DIFFERENT'} |")
PY
)"
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "$tables"
if ((append)); then
  {
    echo
    echo "## Memory options on CPU: --zero 1 (peak RSS per rank) and --recompute (peak RSS, step time), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $cpu_model, $mem RAM; load average (1/5/15 min) at start $load_start, at end $load_end"
    echo "- versions: mygpt-ddp linked against torch $torch_version; Open MPI, 1 intra-op thread per rank"
    echo "- command: \`$command_line\`"
    echo "- --zero runs: \`mpirun -np N /usr/bin/time build/mygpt-ddp ${common[*]//$work/TMP} ${zero_model[*]} --zero 0|1\`"
    echo "- --recompute runs: \`/usr/bin/time build/mygpt-ddp ${common[*]//$work/TMP} ${recompute_model[*]} --recompute none|mlp|block\`"
    echo
    echo "$tables"
  } >>docs/BENCHMARKS.md
  echo "appended to docs/BENCHMARKS.md"
fi
