#!/usr/bin/env bash
# Peak memory and step time of `mygpt-ddp train` with the fused (chunked) LM loss on and off, on CPU:
# a 2-layer, 64-wide model with GPT-2's 50304-token vocabulary at batch 16 x 256, where the head's
# (4096 x 50304) fp32 logits, their log-softmax and their gradient dominate memory when unfused.
# Prints a markdown table and appends it to docs/benchmarks-log.md.
#
# usage: scripts/bench_fused_loss.sh [--steps 5] [--repeat 2] [--threads 1] [--no-append]
#
# Peak memory is `/usr/bin/time -v`'s "Maximum resident set size" of the whole process (LibTorch's
# own baseline included), the largest over the --repeat runs of a setting. Step time is the median
# of the per-step dt_ms in metrics.jsonl over all runs of a setting, leaving out each run's step 0.
# Runs alternate which setting goes first. Both settings read the same random tokens with the same
# seed, so their losses agree to float tolerance; the table shows the largest difference.
#
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
command_line="scripts/bench_fused_loss.sh"
[[ $# -gt 0 ]] && command_line+="$(printf ' %q' "$@")"

steps=5
repeat=2
threads=1
append=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --no-append) append=0; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_fused_loss.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$steps" -ge 2 ]] || { echo "bench_fused_loss.sh: --steps must be at least 2 (step 0 is left out)" >&2; exit 2; }

binary="$repo/build/mygpt-ddp"
[[ -x "$binary" ]] || { echo "bench_fused_loss.sh: $binary is missing; run scripts/setup.sh first" >&2; exit 1; }
source "$repo/scripts/torch_python.sh"
python=$(torch_python "$repo" 2>&1) || { echo "bench_fused_loss.sh: $python" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_fused_loss.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/bench_fused_loss.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# A snapshot of the binary, so a rebuild while we run cannot swap it halfway through.
cp "$binary" "$work/mygpt-ddp"

# Raw uint16 tokens below the vocabulary size (nanoGPT's train.bin format): enough for every step.
"$python" - "$work/train.bin" <<'EOF'
import array, random, sys
random.seed(0)
array.array("H", (random.randrange(50304) for _ in range(400_000))).tofile(open(sys.argv[1], "wb"))
EOF

train_flags=(--preset tiny --n-layer 2 --n-embd 64 --n-head 2 --block-size 256 --batch-size 16 --vocab-size 50304
             --steps "$steps" --eval-every 0 --log-every 1 --device cpu --threads "$threads" --seed 1337)
fused_loss_switch() { echo "--fused-loss=$([[ $1 == fused ]] && echo true || echo false)"; }

cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
mem="$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
torch_version="$("$python" -c 'import torch; print(torch.__version__)')"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $torch_version | $(nproc) CPUs ($cpu_model) | $mem | load average at start: $load_start"

for ((r = 0; r < repeat; r++)); do
  order="fused plain"
  ((r % 2 == 1)) && order="plain fused"
  for setting in $order; do
    out="$work/$setting-$r"
    env OMP_NUM_THREADS="$threads" /usr/bin/time -v \
      "$work/mygpt-ddp" train "$work/train.bin" "${train_flags[@]}" "$(fused_loss_switch "$setting")" --out "$out" >"$out.log" 2>&1 \
      || { echo "bench_fused_loss.sh: the $setting run failed; its output:" >&2; cat "$out.log" >&2; exit 1; }
    rss_kb="$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out.log")"
    echo "$setting run $r: peak RSS $((rss_kb / 1024)) MiB"
    echo "$setting $rss_kb $out/metrics.jsonl" >>"$work/runs.txt"
  done
done

table="$("$python" - "$work/runs.txt" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    setting, rss_kb, metrics = line.split()
    records = [json.loads(l) for l in open(metrics) if '"dt_ms"' in l]
    runs.setdefault(setting, []).append((int(rss_kb), records))
def summary(setting):
    peak_mib = max(rss for rss, _ in runs[setting]) / 1024
    dts = [r["dt_ms"] for _, recs in runs[setting] for r in recs if r["step"] > 0]
    return peak_mib, statistics.median(dts), runs[setting][0][1]
fused, plain = summary("fused"), summary("plain")
loss_diff = max(abs(a["loss"] - b["loss"]) for a, b in zip(fused[2], plain[2]))
print("| loss | peak RSS MiB (max of runs) | step ms (median, steps >= 1) | loss step 0 -> last |")
print("|---|---:|---:|---|")
for name, (peak, dt, recs) in (("fused (chunked head + cross-entropy)", fused), ("plain (full logits)", plain)):
    print(f"| {name} | {peak:.0f} | {dt:.0f} | {recs[0]['loss']:.6f} -> {recs[-1]['loss']:.6f} |")
print(f"| fused / plain | {fused[0] / plain[0]:.2f}x | {fused[1] / plain[1]:.2f}x | max abs loss diff {loss_diff:.1e} |")
EOF
)"
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "$table"

if ((append)); then
  {
    echo
    echo "## Fused LM loss: peak memory and step time, fused vs plain, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $cpu_model, $mem RAM; load average (1/5/15 min) at start $load_start, at end $load_end"
    echo "- versions: mygpt-ddp linked against torch $torch_version"
    echo "- command: \`$command_line\`"
    echo "- each run: \`OMP_NUM_THREADS=$threads /usr/bin/time -v build/mygpt-ddp train TMP/train.bin ${train_flags[*]} --fused-loss true|false --out TMP/out\` (random uint16 tokens below 50304), $repeat runs per setting alternating which goes first; fp32 on CPU"
    echo
    echo "$table"
  } >>docs/benchmarks-log.md
  echo "appended to docs/benchmarks-log.md"
fi
