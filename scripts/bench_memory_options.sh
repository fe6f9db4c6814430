#!/usr/bin/env bash
# Memory options on CPU, C++ next to its PyTorch twin (scripts/bench/pytorch_gpt_train.py: torch's
# ZeroRedundancyOptimizer and torch.utils.checkpoint) on the same torch: peak RSS per rank of `--zero 0`
# against `--zero 1` on 2 and 3 ranks (a model whose AdamW state dominates: 8 layers, 512 wide, batch
# 1 x 32), and peak RSS and step time of `--recompute none|mlp|block` on 1 rank (a model whose
# activations dominate: 4 layers, 256 wide, batch 16 x 256, dropout 0.1), and of `--precision fp32|bf16|fp16`
# on that model (autocast on the CPU; fp16 with the dynamic loss scale, PyTorch's with its GradScaler).
# Character text generated here.
# Prints markdown tables and appends them to docs/benchmarks-log.md.
#
# usage: scripts/bench_memory_options.sh [--steps 4] [--no-append]
#
# Peak RSS is `/usr/bin/time`'s maximum resident set size of each rank's own process (LibTorch's or
# Python's baseline included); for C++ rank 0 also its peak during the training steps (metrics.jsonl's
# peak_mem_mib at the last step), since writing the final checkpoint gathers the whole AdamW state there. Step time is the median dt_ms of metrics.jsonl leaving out step 0. Bytes
# sent per rank and step follow from the parameter count: mygpt-ddp's gradient all-reduce is a rank-ordered
# reduce-scatter and an all-gather, 2(N-1)/N of the gradients; --zero 1 sends the same two halves, the
# second carrying updated parameters instead of gradients (plus alignment padding, < 1024 elements per tensor).
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
[[ -x "$binary" ]] || { echo "bench_memory_options.sh: $binary is missing; run scripts/setup.sh first" >&2; exit 1; }
source "$repo/scripts/torch_python.sh"
python=$(torch_python "$repo" 2>&1) || { echo "bench_memory_options.sh: $python" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_memory_options.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
source "$repo/scripts/mpi_env.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/bench_memory_options.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$binary" "$work/mygpt-ddp"
"$python" - "$work/train.txt" <<'PY'
import random, sys
rng = random.Random(0)
words = ["the", "king", "shall", "not", "speak", "of", "thee", "my", "lord", "and", "her", "grace", "to", "be"]
with open(sys.argv[1], "w") as f:
    f.write("".join(" ".join(rng.choice(words) for _ in range(8)).capitalize() + ".\n" for _ in range(20000)))
PY

common=(--steps "$steps" --log-every 1 --threads 1 --seed 1337 --warmup-steps 1 --grad-clip 1.0)
zero_model=(--preset tiny --n-layer 8 --n-embd 512 --n-head 8 --block-size 32 --batch-size 1 --dropout 0)
recompute_model=(--preset tiny --n-layer 4 --n-embd 256 --n-head 4 --block-size 256 --batch-size 16 --dropout 0.1)
torchrun="$(dirname "$python")/torchrun"  # beside the Python that has torch, as in bench/common.sh
twin="$repo/scripts/bench/pytorch_gpt_train.py"

# run NAME SIDE RANKS FLAGS...: every rank of the C++ binary (side cpp) or the Python twin (side py) under
# /usr/bin/time; the ranks' peak RSS (KiB) land in NAME.rss, one line each, and the metrics in NAME.jsonl.
run() {
  local name=$1 side=$2 ranks=$3
  shift 3
  local cmd
  if [[ $side == cpp ]]; then
    local launcher=()
    ((ranks > 1)) && launcher=("${MYGPT_MPIRUN[@]}" -np "$ranks")
    cmd=("${launcher[@]}" /usr/bin/time -f "peak-rss-kib %M" "$work/mygpt-ddp" train "$work/train.txt" --device cpu
         --eval-every 0 --out "$work/$name" "${common[@]}" "$@")
  elif ((ranks > 1)); then
    cmd=("$torchrun" --standalone --nproc_per_node "$ranks" --no-python /usr/bin/time -f "peak-rss-kib %M"
         "$python" "$twin" --data "$work/train.txt" --metrics "$work/$name.jsonl" "${common[@]}" "$@")
  else
    cmd=(/usr/bin/time -f "peak-rss-kib %M" "$python" "$twin" --data "$work/train.txt" --metrics "$work/$name.jsonl"
         "${common[@]}" "$@")
  fi
  env OMP_NUM_THREADS=1 "${cmd[@]}" >"$work/$name.log" 2>&1 || { echo "the $name run failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  [[ $side == cpp ]] && cp "$work/$name/metrics.jsonl" "$work/$name.jsonl"
  awk '/peak-rss-kib/ {print $NF}' "$work/$name.log" >"$work/$name.rss"
  echo "$name: peak RSS per rank (MiB): $(awk '{printf "%d ", $1 / 1024}' "$work/$name.rss")"
}

cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
mem="$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
torch_version="$("$python" -c 'import torch; print(torch.__version__)')"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $torch_version | $(nproc) CPUs ($cpu_model) | $mem | load average at start: $load_start"

for ranks in 2 3; do
  for zero in 0 1; do
    for side in cpp py; do run "${side}_zero${zero}_np${ranks}" "$side" "$ranks" "${zero_model[@]}" --zero "$zero"; done
  done
done
for mode in none mlp block; do
  for side in cpp py; do run "${side}_recompute_$mode" "$side" 1 "${recompute_model[@]}" --recompute "$mode"; done
done
for precision in bf16 fp16; do  # fp32 is the --recompute none run
  for side in cpp py; do run "${side}_precision_$precision" "$side" 1 "${recompute_model[@]}" --precision "$precision"; done
done

tables="$("$python" - "$work" <<'PY'
import json, os, re, statistics, sys
work = sys.argv[1]
def rss(name): return [int(l) / 1024 for l in open(os.path.join(work, name + ".rss"))]
def records(name): return [json.loads(l) for l in open(os.path.join(work, name + ".jsonl")) if '"dt_ms"' in l]
def step_ms(name): return statistics.median(r["dt_ms"] for r in records(name) if r["step"] > 0)
P = int(re.search(r"\| (\d+) parameters", open(os.path.join(work, "cpp_zero0_np2.log")).read()).group(1))
print("| ranks | --zero | C++ rank 0 peak RSS during training, MiB | C++ peak RSS per rank, whole run, MiB | "
      "PyTorch (ZeroRedundancyOptimizer) peak RSS per rank, MiB | AdamW state per rank, MiB | "
      "C++ sent per rank and step, MiB | C++ losses vs --zero 0 | C++ vs PyTorch, max loss diff |")
print("|---:|---:|---:|---|---|---:|---:|---|---:|")
for n in (2, 3):
    base = records(f"cpp_zero0_np{n}")
    for z in (0, 1):
        cpp, py = f"cpp_zero{z}_np{n}", f"py_zero{z}_np{n}"
        same = all(a["loss"] == b["loss"] for a, b in zip(base, records(cpp)))
        diff = max(abs(a["loss"] - b["loss"]) for a, b in zip(records(cpp), records(py)))
        state = 8 * P / (n if z else 1) / 2**20
        sent = 2 * (n - 1) / n * 4 * P / 2**20
        training = records(cpp)[-1]["peak_mem_mib"]  # VmHWM at the last step, before the final checkpoint
        print(f"| {n} | {z} | {training:.0f} | {' / '.join(f'{x:.0f}' for x in rss(cpp))} | "
              f"{' / '.join(f'{x:.0f}' for x in rss(py))} | "
              f"{state:.0f} | {sent:.0f} | {'bit for bit' if same else 'DIFFERENT'} | {diff:.1e} |")
print()
print(f"(model: {P} parameters: {4 * P / 2**20:.0f} MiB of fp32 weights, as much of gradients, twice that of AdamW state)")
print()
print("| --recompute | C++ peak RSS MiB | C++ step ms | PyTorch (torch.utils.checkpoint) peak RSS MiB | PyTorch step ms | "
      "C++ losses vs none |")
print("|---|---:|---:|---:|---:|---|")
base = records("cpp_recompute_none")
for mode in ("none", "mlp", "block"):
    cpp, py = f"cpp_recompute_{mode}", f"py_recompute_{mode}"
    same = all(a["loss"] == b["loss"] for a, b in zip(base, records(cpp)))
    print(f"| {mode} | {rss(cpp)[0]:.0f} | {step_ms(cpp):.0f} | {rss(py)[0]:.0f} | {step_ms(py):.0f} | "
          f"{'bit for bit' if same else 'DIFFERENT'} |")
print()
print("| --precision | C++ peak RSS MiB | C++ step ms | PyTorch peak RSS MiB | PyTorch step ms | "
      "C++ vs PyTorch, max loss diff | C++ vs fp32, max loss diff | C++ skipped steps |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for precision in ("fp32", "bf16", "fp16"):
    name = "recompute_none" if precision == "fp32" else f"precision_{precision}"
    cpp, py = records(f"cpp_{name}"), records(f"py_{name}")
    to_py = max(abs(a["loss"] - b["loss"]) for a, b in zip(cpp, py))
    to_fp32 = max(abs(a["loss"] - b["loss"]) for a, b in zip(cpp, base))
    skipped = sum(1 for r in cpp if r.get("skipped"))
    print(f"| {precision} | {rss('cpp_' + name)[0]:.0f} | {step_ms('cpp_' + name):.0f} | {rss('py_' + name)[0]:.0f} | "
          f"{step_ms('py_' + name):.0f} | {to_py:.1e} | {to_fp32:.1e} | {skipped} |")
PY
)"
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "$tables"
if ((append)); then
  {
    echo
    echo "## Memory options on CPU: --zero 1 (peak RSS per rank), --recompute and --precision (peak RSS, step time), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $cpu_model, $mem RAM; load average (1/5/15 min) at start $load_start, at end $load_end"
    echo "- versions: mygpt-ddp linked against torch $torch_version; Open MPI, 1 intra-op thread per rank"
    echo "- command: \`$command_line\`"
    echo "- C++: \`mpirun -np N /usr/bin/time build/mygpt-ddp train TMP/train.txt --device cpu --eval-every 0 ${common[*]} MODEL --zero 0|1\`, and \`... --recompute none|mlp|block\` and \`--precision bf16|fp16\` on 1 rank; PyTorch: \`torchrun --standalone --nproc_per_node N --no-python /usr/bin/time python scripts/bench/pytorch_gpt_train.py --data TMP/train.txt ${common[*]} MODEL --zero 0|1\` (gloo), and \`--recompute\` and \`--precision\` in one process"
    echo "- MODEL for --zero: \`${zero_model[*]}\`; for --recompute and --precision: \`${recompute_model[*]}\`; character text generated by the script (160000 words)"
    echo
    echo "$tables"
  } >>docs/benchmarks-log.md
  echo "appended to docs/benchmarks-log.md"
fi
