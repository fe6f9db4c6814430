#!/usr/bin/env bash
# Gradient all-reduce bandwidth on N CPU ranks: our MPI path (bench/allreduce_bench.cpp, built as
# build/bench/mygpt_allreduce_bench) next to torch.distributed with gloo (scripts/bench/pytorch_allreduce.py,
# the .venv torch), in one invocation. Prints a markdown table and appends it to docs/BENCHMARKS.md.
#
# usage: scripts/bench_allreduce.sh [--np 2] [--reps 10] [--warmup 2] [--repeat 2] [--bucket-mb 25[,MB...]]
#          [--preset gpt2] [--threads 1] [--no-append]
#
# Bytes: the float32 gradients of GPT-2 124M (preset gpt2: 124.5M parameters, 474.8 MiB). Each side
# runs --repeat times, alternating which goes first; a call's time is the slowest rank's; the table
# shows the median over all timed calls. algbw = bytes / time, busbw = algbw x 2(n-1)/n; GB = 1e9 B.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
command_line="scripts/bench_allreduce.sh"
(( $# )) && command_line+="$(printf ' %q' "$@")"

np=2
reps=10
warmup=2
repeat=2
bucket_mb=25
preset=gpt2
threads=1
append=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --np) np="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --bucket-mb) bucket_mb="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --no-append) append=0; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_allreduce.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

python="$repo/.venv/bin/python"
torchrun="$repo/.venv/bin/torchrun"
twin="$repo/scripts/bench/pytorch_allreduce.py"
[[ -x "$torchrun" ]] || { echo "bench_allreduce.sh: $torchrun is missing; run scripts/setup.sh first" >&2; exit 1; }
[[ -d "$repo/build" ]] || { echo "bench_allreduce.sh: build/ is missing; run scripts/setup.sh first" >&2; exit 1; }

# Build when the benchmark is missing or older than its source (not on every call: rebuilding would
# also recompile whatever else changed in the libraries). The target exists once the top-level
# CMakeLists.txt has add_subdirectory(bench).
built="$repo/build/bench/mygpt_allreduce_bench"
if [[ ! -x "$built" || "$repo/bench/allreduce_bench.cpp" -nt "$built" ]]; then
  jobs=$(( $(nproc) > 2 ? $(nproc) : 1 ))  # small machines: one compiler at a time
  echo "building mygpt_allreduce_bench (log: build/bench_allreduce.build.log)"
  cmake --build "$repo/build" --target mygpt_allreduce_bench -j "$jobs" >"$repo/build/bench_allreduce.build.log" 2>&1 || {
    tail -n 20 "$repo/build/bench_allreduce.build.log" >&2
    echo "bench_allreduce.sh: cannot build mygpt_allreduce_bench (is add_subdirectory(scripts/bench) in CMakeLists.txt?)" >&2
    exit 1
  }
fi

# shellcheck source=mpi_env.sh
source "$repo/scripts/mpi_env.sh"
work="$(mktemp -d "${TMPDIR:-/tmp}/bench_allreduce.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# A private copy, so that a rebuild by someone else during the run cannot change what is measured.
binary="$work/mygpt_allreduce_bench"
cp "$built" "$binary"

# Launch alike: torchrun starts every worker in a session of its own (start_new_session), which on a
# Linux kernel with autogroup scheduling gives each one its own share of a busy machine's CPU; `setsid -w`
# gives our ranks the same. Neither side pins ranks to cores (torchrun does not; mpirun would).
launch_cpp=("${MYGPT_MPIRUN[@]}" --bind-to none -np "$np" setsid -w "$binary")
launch_py=("$torchrun" --standalone --nproc_per_node "$np" "$twin")
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"

torch_version="$("$python" -c 'import torch; print(torch.__version__)')"
mpi_version="$(mpirun --version 2>&1 | head -n 1)"
# GNU nproc honours OMP_NUM_THREADS, which is set above: count the CPUs without it.
cpus="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
mem="$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
load="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "torch $torch_version | $mpi_version | $cpus CPUs ($cpu_model) | $mem | load average at start: $load"

args=(--preset "$preset" --bucket-mb "$bucket_mb" --reps "$reps" --warmup "$warmup" --threads "$threads")
for ((rep = 1; rep <= repeat; rep++)); do
  order="cpp py"; (( rep % 2 == 0 )) && order="py cpp"
  for side in $order; do
    echo "== run $rep/$repeat: $side"
    if [[ $side == cpp ]]; then
      "${launch_cpp[@]}" "${args[@]}" >"$work/$side-$rep.log" 2>&1 || {
        cat "$work/$side-$rep.log" >&2; echo "bench_allreduce.sh: the C++ run failed" >&2; exit 1; }
    else
      "${launch_py[@]}" "${args[@]}" >"$work/$side-$rep.log" 2>&1 || {
        cat "$work/$side-$rep.log" >&2; echo "bench_allreduce.sh: the Python run failed" >&2; exit 1; }
    fi
    grep '^RESULT ' "$work/$side-$rep.log" | sed 's/"seconds": \[[^]]*\], *//' | cut -c1-200
  done
done

table="$work/table.md"
"$python" - "$work" "$repeat" >"$table" <<'PY'
import glob, json, statistics, sys
work, repeat = sys.argv[1], int(sys.argv[2])
pooled = {}  # (variant, bucket_mb) -> side -> [seconds]
meta = {}
for side in ("cpp", "py"):
    for path in sorted(glob.glob(f"{work}/{side}-*.log")):
        for line in open(path):
            if line.startswith("RESULT "):
                r = json.loads(line[len("RESULT "):])
                key = (r["variant"], float(r["bucket_mb"]))
                pooled.setdefault(key, {}).setdefault(side, []).extend(r["seconds"])
                meta[key] = r["buckets"]
                nbytes, ranks = r["bytes"], r["ranks"]
bus = 2 * (ranks - 1) / ranks
order = {"ddp-buckets": 0, "flat": 1, "raw": 2}
names = {"ddp-buckets": "ddp-buckets (our GradientSynchronizer / the same buckets in torch.distributed)",
         "flat": "flat all-reduce + average", "raw": "flat all-reduce, sum only (raw MPI / raw gloo)"}
print(f"{nbytes / 2**20:.1f} MiB of float32 gradients, {ranks} ranks, {repeat} runs per side")
print()
print("| variant | bucket MiB | buckets | C++ MPI ms/call | C++ algbw GB/s | C++ busbw GB/s "
      "| PyTorch gloo ms/call | PyTorch algbw GB/s | PyTorch busbw GB/s | C++ speed / PyTorch |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for key in sorted(pooled, key=lambda k: (order.get(k[0], 9), k[1])):
    variant, mb = key
    cpp, py = statistics.median(pooled[key]["cpp"]), statistics.median(pooled[key]["py"])
    print(f"| {names.get(variant, variant)} | {f'{mb:g}' if mb > 0 else '-'} | {meta[key]} "
          f"| {cpp * 1e3:.0f} | {nbytes / cpp / 1e9:.2f} | {nbytes / cpp / 1e9 * bus:.2f} "
          f"| {py * 1e3:.0f} | {nbytes / py / 1e9:.2f} | {nbytes / py / 1e9 * bus:.2f} | {py / cpp:.2f} |")
PY
echo
cat "$table"

if [[ $append -eq 1 ]]; then
  out="$repo/docs/BENCHMARKS.md"
  [[ -f "$out" ]] || { echo "bench_allreduce.sh: $out is missing" >&2; exit 1; }
  {
    echo
    echo "## Gradient all-reduce bandwidth, $np CPU ranks, C++ (MPI) vs PyTorch (gloo), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $cpus CPUs, $cpu_model, $mem RAM; load average at start $load"
    echo "- torch $torch_version (.venv, both sides); $mpi_version; $threads intra-op thread(s) per rank"
    echo "- command: \`$command_line\`"
    echo "- C++: \`mpirun --oversubscribe --bind-to none -np $np setsid -w build/bench/mygpt_allreduce_bench ${args[*]}\`;" \
         "PyTorch: \`torchrun --standalone --nproc_per_node $np scripts/bench/pytorch_allreduce.py ${args[*]}\`"
    echo "- bytes: the gradients of GPT-2 124M (\`--preset $preset\`); median over $reps timed calls (after $warmup warm-up) x $repeat runs per side, alternating which side goes first; a call's time is its slowest rank's; algbw = bytes / time, busbw = algbw x 2(n-1)/n, GB = 1e9 B"
    echo
    cat "$table"
  } >>"$out"
  echo
  echo "appended to docs/BENCHMARKS.md"
fi
