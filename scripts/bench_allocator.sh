#!/usr/bin/env bash
# Which memory allocator policy CPU training should run under, measured: `mygpt-ddp train` on one thread
# under its default policy (memory-reuse: launcher/memory_reuse keeps freed memory, no mmap per block, no
# trimming), under glibc's defaults (`--keep-freed-memory false`), and under Debian's jemalloc (default
# decay, and decay off) and mimalloc, preloaded (with `--keep-freed-memory false`, glibc's malloc unused).
# Two configurations: nanoGPT's CPU Shakespeare model (4 x 128, block 64, batch 12; blocks below glibc's
# mmap threshold) and the same model at block 256, batch 32 (attention blocks of 64 MiB, above it).
# Per variant: the median step time over the steps after --skip, minor page faults, kernel (sys) and
# user CPU seconds of the whole run, and peak RSS. One run at a time, --repeat runs per variant in
# rotating order. Prints the CPU model and appends the table to docs/benchmarks-log.md.
#
# usage: scripts/bench_allocator.sh [--small-steps 300] [--large-steps 30] [--skip 10] [--repeat 1]
#          [--data FILE] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options small-steps=300 large-steps=30 skip=10 repeat=1 data="$repo/../shared/data/tinyshakespeare.txt" -- "$@"
bench_need_built "$repo/build/mygpt-ddp" "$python"
[[ -f "$data" ]] || bench_die "data file $data is missing (expected the shared tinyshakespeare.txt)"
[[ -x /usr/bin/time ]] || bench_die "/usr/bin/time (GNU time) is needed"
lib=/usr/lib/x86_64-linux-gnu
jemalloc="$lib/libjemalloc.so.2"
mimalloc="$lib/libmimalloc.so.2"
variants=(glibc-defaults memory-reuse)
[[ -f $jemalloc ]] && variants+=(jemalloc jemalloc-no-decay) || echo "$bench_name: $jemalloc missing (apt install libjemalloc2): skipped" >&2
[[ -f $mimalloc ]] && variants+=(mimalloc) || echo "$bench_name: $mimalloc missing (apt install libmimalloc2.0): skipped" >&2
bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"
bench_machine_facts

environment_of() {  # the env(1) arguments of a variant
  case $1 in
    glibc-defaults | memory-reuse) ;;
    jemalloc) echo "LD_PRELOAD=$jemalloc" ;;
    jemalloc-no-decay) echo "LD_PRELOAD=$jemalloc MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1" ;;
    mimalloc) echo "LD_PRELOAD=$mimalloc" ;;
  esac
}
config_flags() {
  case $1 in
    small) echo "--block-size 64 --batch-size 12 --steps $small_steps" ;;
    large) echo "--block-size 256 --batch-size 32 --steps $large_steps" ;;
  esac
}
rows="$work/rows.txt"
: >"$rows"
for config in small large; do
  for ((rep = 1; rep <= repeat; rep++)); do
    for variant in $(bench_rotate "$rep" "${variants[@]}"); do
      name="$config-$variant-$rep"
      echo "== $config, $variant, run $rep/$repeat"
      # shellcheck disable=SC2046,SC2086  # words on purpose
      OMP_NUM_THREADS=1 bench_run "$work/$name.log" "$name" /usr/bin/time -f "TIME %e %U %S %R %M" -o "$work/$name.time" \
        env $(environment_of "$variant") "$binary" train "$data" --preset shakespeare-char --n-layer 4 --n-head 4 \
        --n-embd 128 --dropout 0 --eval-every 0 --log-every 1 --device cpu --threads 1 $(config_flags "$config") \
        $([[ $variant == memory-reuse ]] || echo --keep-freed-memory false) \
        --out "$work/$name"
      echo "$config $variant $rep $(sed -n 's/^TIME //p' "$work/$name.time") $work/$name/metrics.jsonl" >>"$rows"
    done
  done
done

table="$work/table.md"
"$python" - "$rows" "$skip" >"$table" <<'PY'
import collections, json, statistics, sys
rows, skip = sys.argv[1], int(sys.argv[2])
runs = collections.defaultdict(list)
for line in open(rows):
    config, variant, rep, wall, user, sys_s, minflt, rss_kb, metrics = line.split()
    steps = [r["dt_ms"] for r in map(json.loads, open(metrics)) if "dt_ms" in r][skip:]
    runs[(config, variant)].append((statistics.median(steps), float(user), float(sys_s), int(minflt), int(rss_kb) / 1024))
print("| config | allocator | step ms (median) | vs glibc's defaults | minor page faults | user s | sys s | peak RSS MiB |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for (config, variant), rs in runs.items():
    med = statistics.median(r[0] for r in rs)
    base = statistics.median(r[0] for r in runs[(config, "glibc-defaults")])
    mean = lambda i: statistics.mean(r[i] for r in rs)
    print(f"| {config} | {variant} | {med:.1f} | {base / med:.2f}x | {mean(3):,.0f} | {mean(1):.1f} | {mean(2):.2f} | {mean(4):.0f} |")
PY
bench_report "CPU training under each allocator policy" "$table" \
  "torch $torch_version, one thread, one run at a time, $repeat run(s) per variant; step ms: median over the steps after the first $skip" \
  "model: \`--preset shakespeare-char --n-layer 4 --n-head 4 --n-embd 128 --dropout 0\`; small: \`$(config_flags small)\`; large: \`$(config_flags large)\`" \
  "memory-reuse: train's default (glibc, mallopt M_MMAP_MAX 0 and M_TRIM_THRESHOLD -1); glibc-defaults: \`--keep-freed-memory false\`; jemalloc/mimalloc: Debian's, LD_PRELOAD, \`--keep-freed-memory false\`; no-decay: MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1"
