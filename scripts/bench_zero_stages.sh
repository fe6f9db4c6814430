#!/usr/bin/env bash
# ZeRO stages on CPU ranks (issue 65): `--zero 0/1/2/3` at 1, 2 and 4 ranks under mpirun, on a GPT of about
# 100M parameters (14 layers, 768 wide, character vocabulary: 99,306,240 parameters), a few steps of a tiny
# batch (1 x 64 tokens, one intra-op thread per rank). For each run:
# - per-rank peak RSS above the process's own floor (the peak RSS of `mygpt-ddp --help`), over steps 1..3
#   (the steady state: the peak is reset by /proc/PID/clear_refs when step 0 is logged,
#   scripts/bench/rank_peak_probe.py) and over the whole run (start-up included, where --zero 3 still builds
#   the model whole before sharding it);
# - CPU time per step and rank (user + system of each rank over steps 1..3): the machine is shared, so
#   wall-clock step times say more about the other jobs than about this one;
# - bytes each rank sent per step, measured by Open MPI's own counter (the pml monitoring component:
#   every byte every rank sends to each peer, collectives included), a run of 4 steps minus a run of 1 step
#   over 3, so start-up (the initial broadcast, the configuration check) cancels; against the theory for
#   Psi = 4 bytes x parameters: 2 Psi (N-1)/N for an all-reduce (--zero 0, 1, 2) and 3 Psi (N-1)/N for
#   --zero 3 (two all-gathers of the parameters, forward and backward, and a reduce-scatter: 1.5x);
# - `plan`'s estimate of the peak per rank against the measured steady peak (whole, floor included);
# - the largest loss difference from --zero 0 on the same ranks.
# No checkpoint is written (--checkpoint-every 0 --final-checkpoint false). By default `train` keeps the
# memory it frees for reuse (launcher/memory_reuse.h), so the start-up's peak stays resident through every
# step; --keep-freed-memory false hands large freed blocks back, and the steps' own peak shows. Prints a
# markdown table and appends it to docs/benchmarks-log.md.
#
# usage: scripts/bench_zero_stages.sh [--ranks 1,2,4] [--zeros 0,1,2,3] [--n-layer 14] [--n-embd 768]
#          [--keep-freed-memory true|false] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options ranks=1,2,4 zeros=0,1,2,3 n-layer=14 n-embd=768 keep-freed-memory=true -- "$@"
[[ $keep_freed_memory == true || $keep_freed_memory == false ]] ||
  bench_usage_error "--keep-freed-memory must be true or false, got '$keep_freed_memory'"
[[ $ranks =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bench_usage_error "--ranks must be counts like 1,2,4, got '$ranks'"
[[ $zeros =~ ^[0-3](,[0-3])*$ ]] || bench_usage_error "--zeros must be stages like 0,1,2,3, got '$zeros'"
[[ $n_layer =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--n-layer must be a positive whole number, got '$n_layer'"
[[ $n_embd =~ ^[1-9][0-9]*$ && $((n_embd % 12)) -eq 0 ]] ||
  bench_usage_error "--n-embd must be a positive multiple of 12 (12 heads), got '$n_embd'"
[[ ,$zeros, == *,0,* ]] || bench_usage_error "--zeros must include 0: the other stages are compared with it"

bench_need_built "$mygpt_bin" "$python"
[[ -x /usr/bin/time ]] || bench_die "/usr/bin/time is missing (apt-get install time)"
# shellcheck source=mpi_env.sh
source "$repo/scripts/mpi_env.sh"
command -v mpirun >/dev/null || bench_die "mpirun is missing (Open MPI)"
ompi_info 2>/dev/null | grep -q "pml: monitoring" ||
  bench_die "Open MPI's pml monitoring component is missing (ompi_info lists no 'pml: monitoring'): it counts the bytes sent"
bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"
probe="$repo/scripts/bench/rank_peak_probe.py"
bench_machine_facts >"$work/facts"
cat "$work/facts"
lscpu_model="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)"
echo "lscpu: ${lscpu_model:-(no lscpu)}"

"$python" - "$work/train.txt" <<'PY'
import random, sys
rng = random.Random(0)
words = ["the", "king", "shall", "not", "speak", "of", "thee", "my", "lord", "and", "her", "grace", "to", "be"]
with open(sys.argv[1], "w") as f:
    f.write("".join(" ".join(rng.choice(words) for _ in range(8)).capitalize() + ".\n" for _ in range(20000)))
PY

model=(--preset tiny --n-layer "$n_layer" --n-embd "$n_embd" --n-head 12 --block-size 64 --dropout 0)
batch=(--batch-size 1 --seq-len 64 --grad-accum 1)
common=(--log-every 1 --threads 1 --seed 1337 --warmup-steps 1 --eval-every 0 --checkpoint-every 0
        --final-checkpoint false --device cpu --keep-freed-memory "$keep_freed_memory")
/usr/bin/time -f "%M" -o "$work/floor.kib" "$binary" --help >/dev/null
floor_kib=$(tail -n 1 "$work/floor.kib")
echo "floor: mygpt-ddp --help peaks at $((floor_kib / 1024)) MiB"

# run NAME RANKS ZERO STEPS [probe]: mpirun -np RANKS with Open MPI's byte counter on; with `probe`, every
# rank through rank_peak_probe.py (window: the steps after step 0).
run() {
  local name=$1 n=$2 zero=$3 steps=$4 with_probe=${5:-}
  local wrap=()
  [[ -n $with_probe ]] && wrap=("$python" "$probe" --watch "$work/$name.out" --from-step 0 --to-step $((steps - 1))
                                --report "$work/$name.probe" --)
  env OMP_NUM_THREADS=1 "${MYGPT_MPIRUN[@]}" -np "$n" --mca pml_monitoring_enable 2 \
    --mca pml_monitoring_enable_output 3 --mca pml_monitoring_filename "$work/$name.mon" \
    "${wrap[@]}" "$binary" train "$work/train.txt" "${model[@]}" "${batch[@]}" "${common[@]}" --zero "$zero" \
    --steps "$steps" --out "$work/$name" >"$work/$name.out" 2>"$work/$name.err" ||
    { tail -n 20 "$work/$name.err" >&2; bench_die "the $name run failed"; }
}

IFS=, read -r -a rank_list <<<"$ranks"
IFS=, read -r -a zero_list <<<"$zeros"
for n in "${rank_list[@]}"; do
  for zero in "${zero_list[@]}"; do
    echo "== $n rank(s), --zero $zero"
    run "np${n}_zero${zero}" "$n" "$zero" 4 probe
    ((n > 1)) && run "np${n}_zero${zero}_1step" "$n" "$zero" 1
    "$binary" plan "$work/train.txt" "${model[@]}" "${batch[@]}" --device cpu --threads 1 --zero "$zero" \
      --keep-freed-memory "$keep_freed_memory" --ranks "$n" >"$work/np${n}_zero${zero}.plan"
  done
done

table="$work/table.md"
"$python" - "$work" "$floor_kib" "$ranks" "$zeros" >"$table" <<'PY'
import glob, json, os, re, sys
work, floor_kib, ranks, zeros = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4].split(",")
MiB = 2**20
floor = floor_kib / 1024

def probes(name):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(work, name + ".probe", "rank*.json")))]

def sent_bytes(name):
    """Bytes each rank sent (Open MPI's pml monitoring: the 'I' lines, collectives' point-to-point traffic)."""
    sent = {}
    for path in glob.glob(os.path.join(work, name + ".mon.*.prof")):
        for line in open(path):
            m = re.match(r"[IE]\t(\d+)\t(\d+)\t(\d+) bytes", line)
            if m:
                sent[int(m.group(1))] = sent.get(int(m.group(1)), 0) + int(m.group(3))
    return sent

def losses(name):
    return [json.loads(l)["loss"] for l in open(os.path.join(work, name, "metrics.jsonl")) if '"loss"' in l]

def plan_total(name):
    return float(re.search(r"^\s*total\s+([\d.]+) MiB", open(os.path.join(work, name + ".plan")).read(), re.M).group(1))

log = open(os.path.join(work, "np%s_zero0.out" % ranks[0])).read()
P = int(re.search(r"\| (\d+) parameters", log).group(1))
psi = 4 * P
unit = 4 * 12 * int(re.search(r"(\d+) wide", log).group(1)) ** 2  # one block's weights, fp32 (biases aside)
state = {"0": lambda n: 16 * P, "1": lambda n: 8 * P + 8 * P / n, "2": lambda n: 4 * P + 12 * P / n,
         "3": lambda n: 16 * P / n + 2 * unit}
print("| ranks | --zero | peak RSS above floor per rank, steps 1-3, MiB (max; each rank) | whole run, MiB (max) | "
      "model state per rank + 2 units at --zero 3, MiB | plan's estimate / measured steps 1-3 peak, MiB | "
      "CPU s per step per rank (mean) | sent per step per rank, MiB (mean) | theory, MiB | measured / theory | "
      "max loss diff vs --zero 0 |")
print("|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|")
above = {}
for n in ranks:
    N = int(n)
    for z in zeros:
        name = f"np{n}_zero{z}"
        pr = probes(name)
        if len(pr) != N or any("window_peak_kib" not in p for p in pr):
            raise SystemExit(f"{name}: a rank's probe did not see the window of steps (probes: {pr})")
        steady = [p["window_peak_kib"] / 1024 - floor for p in pr]
        whole = [p["whole_run_peak_kib"] / 1024 - floor for p in pr]
        above[(N, z)] = (max(steady), max(whole))
        cpu = sum(p["cpu_s_per_step"] for p in pr) / N
        if N > 1:
            four, one = sent_bytes(name), sent_bytes(name + "_1step")
            per_step = sum((four.get(r, 0) - one.get(r, 0)) / 3 for r in range(N)) / N
            theory = (3 if z == "3" else 2) * psi * (N - 1) / N
            sent = f"{per_step / MiB:.1f} | {theory / MiB:.1f} | {per_step / theory:.3f}"
        else:
            sent = "0 | 0 | -"
        measured_total = max(p["window_peak_kib"] for p in pr) / 1024
        diff = max(abs(a - b) for a, b in zip(losses(name), losses(f"np{n}_zero0")))
        print(f"| {N} | {z} | {max(steady):.0f} ({' / '.join(f'{x:.0f}' for x in steady)}) | {max(whole):.0f} | "
              f"{state[z](N) / MiB:.0f} | {plan_total(name):.0f} / {measured_total:.0f} "
              f"({(plan_total(name) - measured_total) / measured_total * 100:+.0f}%) | {cpu:.2f} | {sent} | {diff:.1e} |")
print()
print(f"(model: {P} parameters, Psi = {psi / MiB:.0f} MiB of fp32 weights; floor: `mygpt-ddp --help` peaks at "
      f"{floor:.0f} MiB; one unit (a block's weights) {unit / MiB:.0f} MiB)")
if ("4" in ranks) and "0" in zeros and "3" in zeros:
    (s0, w0), (s3, w3) = above[(4, "0")], above[(4, "3")]
    print()
    print(f"Issue 65's goal, 4 ranks, --zero 3 at most half of --zero 0 above the floor: steps 1-3 {s3:.0f} / {s0:.0f} "
          f"MiB = {s3 / s0:.2f} ({'met' if s3 <= s0 / 2 else 'MISSED'}); whole run {w3:.0f} / {w0:.0f} MiB = "
          f"{w3 / w0:.2f} ({'met' if w3 <= w0 / 2 else 'MISSED'})")
PY

bench_report "ZeRO stages on CPU ranks: peak RSS, CPU time and bytes sent per step, --zero ${zeros//,/\/} at ${ranks//,/\/} ranks, --keep-freed-memory $keep_freed_memory" \
  "$table" \
  "lscpu: ${lscpu_model:-(no lscpu)}; $(head -c 200 "$work/facts" | sed 's/ | load average.*//')" \
  "each run: \`OMP_NUM_THREADS=1 mpirun -np N --mca pml_monitoring_enable 2 ... python scripts/bench/rank_peak_probe.py ... -- mygpt-ddp train TMP/train.txt ${model[*]} ${batch[*]} ${common[*]} --zero Z --steps 4\`, and the same with \`--steps 1\` for the bytes (4 steps minus 1, over 3)" \
  "CPU time, not wall: the machine is shared (load at start: $load)"
