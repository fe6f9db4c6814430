#!/usr/bin/env bash
# Gradient all-reduce bandwidth on N CPU ranks: our MPI path (scripts/bench/allreduce_bench.cpp, built as
# build/bench/mygpt_allreduce_bench) next to torch.distributed with gloo (scripts/bench/pytorch_allreduce.py,
# the .venv torch), in one invocation. Prints a markdown table and appends it to docs/benchmarks-log.md.
#
# usage: scripts/bench_allreduce.sh [--np 2] [--reps 10] [--warmup 2] [--repeat 2] [--bucket-mb 25[,MB...]]
#          [--preset gpt2] [--threads 1] [--no-append]
#
# Bytes: the float32 gradients of GPT-2 124M (preset gpt2: 124.5M parameters, 474.8 MiB). Each side
# runs --repeat times, alternating which goes first; a call's time is the slowest rank's; the table
# shows the median over all timed calls. algbw = bytes / time, busbw = algbw x 2(n-1)/n; GB = 1e9 B.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options np=2 reps=10 warmup=2 repeat=2 bucket-mb=25 preset=gpt2 threads=1 -- "$@"

twin="$repo/scripts/bench/pytorch_allreduce.py"
bench_need_built "$python" "$torchrun"
[[ -d "$repo/build" ]] || bench_die "build/ is missing; run scripts/setup.sh first"

# Build when the benchmark is missing or older than its source (not on every call: rebuilding would
# also recompile whatever else changed in the libraries). The target exists once the top-level
# CMakeLists.txt has add_subdirectory(scripts/bench).
built="$repo/build/bench/mygpt_allreduce_bench"
if [[ ! -x "$built" || "$repo/scripts/bench/allreduce_bench.cpp" -nt "$built" ]]; then
  jobs=$(( $(nproc) > 2 ? $(nproc) : 1 ))  # small machines: one compiler at a time
  echo "building mygpt_allreduce_bench (log: build/bench_allreduce.build.log)"
  cmake --build "$repo/build" --target mygpt_allreduce_bench -j "$jobs" >"$repo/build/bench_allreduce.build.log" 2>&1 || {
    tail -n 20 "$repo/build/bench_allreduce.build.log" >&2
    bench_die "cannot build mygpt_allreduce_bench (is add_subdirectory(scripts/bench) in CMakeLists.txt?)"
  }
fi

# shellcheck source=mpi_env.sh
source "$repo/scripts/mpi_env.sh"
bench_work_dir
binary="$(bench_private_copy "$built")"

# Launch alike: torchrun starts every worker in a session of its own (start_new_session), which on a
# Linux kernel with autogroup scheduling gives each one its own share of a busy machine's CPU; `setsid -w`
# gives our ranks the same. Neither side pins ranks to cores (torchrun does not; mpirun would).
launch_cpp=("${MYGPT_MPIRUN[@]}" -np "$np" setsid -w "$binary")  # MYGPT_MPIRUN has --bind-to none
launch_py=("$torchrun" --standalone --nproc_per_node "$np" "$twin")
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"

bench_machine_facts

args=(--preset "$preset" --bucket-mb "$bucket_mb" --reps "$reps" --warmup "$warmup" --threads "$threads")
for ((rep = 1; rep <= repeat; rep++)); do
  for side in $(bench_rotate "$rep" cpp py); do
    echo "== run $rep/$repeat: $side"
    if [[ $side == cpp ]]; then
      bench_run "$work/$side-$rep.log" C++ "${launch_cpp[@]}" "${args[@]}"
    else
      bench_run "$work/$side-$rep.log" Python "${launch_py[@]}" "${args[@]}"
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
bench_report "Gradient all-reduce bandwidth, $np CPU ranks, C++ (MPI) vs PyTorch (gloo)" "$table" \
  "torch $torch_version (.venv, both sides); $mpi_version; $threads intra-op thread(s) per rank" \
  "C++: \`mpirun --oversubscribe --bind-to none -np $np setsid -w build/bench/mygpt_allreduce_bench ${args[*]}\`; PyTorch: \`torchrun --standalone --nproc_per_node $np scripts/bench/pytorch_allreduce.py ${args[*]}\`" \
  "bytes: the gradients of GPT-2 124M (\`--preset $preset\`); median over $reps timed calls (after $warmup warm-up) x $repeat runs per side, alternating which side goes first; a call's time is its slowest rank's; algbw = bytes / time, busbw = algbw x 2(n-1)/n, GB = 1e9 B"
