#!/usr/bin/env bash
# GPT-2 124M (`--preset gpt2`) training step time on CPU, C++ vs Python PyTorch, 1 and 2 ranks:
#   C++    1 rank:  mygpt-ddp train SHARDS --preset gpt2 --threads T1
#   C++    N ranks: mpirun -np N mygpt-ddp train ... --threads 1        (MPI all-reduce of gradients)
#   Python 1 rank:  scripts/bench/pytorch_gpt2_cpu.py --threads T1
#   Python N ranks: torchrun --nproc_per_node N scripts/bench/pytorch_gpt2_cpu.py --threads 1 (DDP, gloo)
#   and both Python runs again with --compile (torch.compile),
# in one invocation, on the same torch build (.venv), the same GPT-2 shards (made here with
# `mygpt-ddp prepare` from Tiny Shakespeare), the same seed, batch and fp32 precision. Prints a
# markdown table and appends it to docs/benchmarks-log.md, or fails when the sides' losses disagree.
#
# usage: scripts/bench_gpt2_cpu.sh [--preset gpt2] [--steps 6] [--skip 2] [--batch-size 1] [--seq-len 256]
#          [--threads 2] [--ranks 2] [--model-flags "--n-layer 2"] [--text FILE] [--vocab DIR] [--no-append]
#
# --preset of another family member (nanochat-d4, llama-small, ...): the Python side is then transformers'
# own class for it (scripts/bench/hf_family_train.py), not a twin of ours. Our side first trains the preset
# for one step and `mygpt-ddp export`s it; both sides start from that folder (ours with --init-from), so
# they start from the same weights, and the architecture on the Python side is transformers' reading of it.
# --ranks 1 makes the second row 1 rank x 1 thread (beside 1 rank x --threads): the thread comparison.
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
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options preset=gpt2 steps=6 skip=2 batch-size=1 seq-len=256 threads=2 ranks=2 model-flags="" \
  text="$repo/../shared/data/tinyshakespeare.txt" vocab="$repo/../shared/data/gpt2" -- "$@"
(( steps > skip && skip >= 1 )) || bench_usage_error "need --steps > --skip >= 1"

twin="$repo/scripts/bench/pytorch_gpt2_cpu.py"
[[ $preset == gpt2 ]] || twin="$repo/scripts/bench/hf_family_train.py"
monitor="$repo/scripts/bench/step_cpu_monitor.py"
bench_need_built "$repo/build/mygpt-ddp" "$python"
[[ -f "$text" ]] || bench_die "text file $text is missing"
bench_need_vocab "$vocab"
(( ranks == 1 )) || command -v mpirun >/dev/null || bench_die "mpirun is missing"
# shellcheck source=scripts/mpi_env.sh
source "$repo/scripts/mpi_env.sh"

bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"
bench_machine_facts

shards="$work/shards"
"$binary" prepare --tokenizer gpt2 --vocab "$vocab" --input "$text" --out "$shards" --val-tokens 0 | tail -n 1

# The same flags go to both sides, the schedule spelled out: a short run of ours takes no warmup (the
# twin's default 715 steps made its learning rate 700x smaller and its losses 1.4 apart).
common=(--batch-size "$batch_size" --seq-len "$seq_len" --grad-accum 1 --steps "$steps" --seed 1337
        --lr 6e-4 --min-lr 6e-5 --warmup-steps 0)
# shellcheck disable=SC2206  # model flags are words on purpose
model_words=($model_flags)
# --data-order sequential: the twin reads the stream in order, rank-strided.
cpp_flags=(train "$shards" --device cpu --total-batch-tokens 0 --precision fp32 --eval-every 0
           --log-every 1 --data-order sequential "${common[@]}")
twin_flags=("${common[@]}")
if [[ $preset == gpt2 ]]; then
  cpp_flags+=(--preset gpt2 "${model_words[@]}")
  twin_flags+=("${model_words[@]}")
else
  # Our initial weights, as a Hugging Face folder both sides read (the model flags shape it here only).
  bench_family_folder "$binary" "$preset" "$shards" "$seq_len" "$work/init-hf" "${model_words[@]}"
  # --vocab-size as the folder's: training would pad a Hugging Face vocabulary (50257 -> 50304), and the
  # 47 extra logits move the loss by ~1e-3 against transformers' model of the folder as it is.
  folder_vocab="$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$work/init-hf/config.json")"
  cpp_flags+=(--init-from "$work/init-hf" --vocab-size "$folder_vocab")
  twin_flags+=(--init "$work/init-hf")
fi

# run NAME WORLD THREADS SIDE: one benchmark run; leaves NAME.jsonl (per-step metrics) and NAME.log.
run() {
  local name="$1" world="$2" t="$3" side="$4" compile=""
  [[ $side == py-compiled ]] && compile=--compile
  echo "== $side, $world rank(s) x $t thread(s)"
  local -a cmd
  if [[ $side == cpp ]]; then
    if (( world == 1 )); then cmd=("$binary" "${cpp_flags[@]}" --threads "$t" --out "$work/$name")
    else cmd=("${MYGPT_MPIRUN[@]}" -np "$world" "$binary" "${cpp_flags[@]}" --threads "$t" --out "$work/$name"); fi
  else
    if (( world == 1 )); then cmd=("$python" "$twin")
    else cmd=("$torchrun" --standalone --nproc_per_node "$world" "$twin"); fi
    cmd+=(--data "$shards" --threads "$t" --skip-steps "$skip" --metrics "$work/$name.jsonl" "${twin_flags[@]}" $compile)
  fi
  echo "\$ OMP_NUM_THREADS=$t ${cmd[*]}" >"$work/$name.cmd"
  # The CPU window: from the end of step skip-1 to the end of the last step, the steps the median covers.
  cmd=("$python" "$monitor" --from-step "$((skip - 1))" --to-step "$((steps - 1))" -- "${cmd[@]}")
  OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t" bench_run "$work/$name.log" "$side on $world rank(s)" "${cmd[@]}"
  if [[ $side == cpp ]]; then
    cp "$work/$name/metrics.jsonl" "$work/$name.jsonl"
    rm -rf "${work:?}/$name"  # the final checkpoint: 1.5 GB for gpt2
  fi
  grep -E '^step +[0-9]+ \|' "$work/$name.log" | sed 's/ | mfu.*//' | tail -n "$steps"
  grep '^CPU_WINDOW' "$work/$name.log" || true
}

start_s=$SECONDS
# The second row: --ranks ranks of one thread each (with --ranks 1, one rank of one thread).
run cpp-1 1 "$threads" cpp
run py-1 1 "$threads" py
run pyc-1 1 "$threads" py-compiled
run pyc-n "$ranks" 1 py-compiled  # alternate which side goes first
run py-n "$ranks" 1 py
run cpp-n "$ranks" 1 cpp
elapsed_s=$((SECONDS - start_s))

table="$work/table.md"
# A speed ratio counts only where the sides train the same thing: every run's losses must follow the
# C++ run's step by step. fp32 on both sides, summed in other orders: after a few steps the losses of
# such twins differ by ~1e-6 (measured when this benchmark was written: 9.5e-07); a bound of 1e-4 of the
# loss (a thousand times fp32's rounding of it) passes any honest reordering and fails a changed recipe,
# a different batch or a missed warmup (those move the loss by 1e-2 to 1).
"$python" - "$work" "$skip" "$batch_size" "$seq_len" "$ranks" "$threads" >"$table" 2>"$work/loss_check.txt" <<'PY' || loss_check_failed=1
import json, statistics, sys
work, skip, batch, seq, ranks, threads = sys.argv[1], *map(int, sys.argv[2:])
def steps(name):
    return [r for r in map(json.loads, open(f"{work}/{name}.jsonl")) if "loss" in r]
def cpu_window(name):
    lines = [l for l in open(f"{work}/{name}.log") if l.startswith("CPU_WINDOW ")]
    return json.loads(lines[-1][len("CPU_WINDOW "):]) if lines else None
print("| ranks x threads | C++ step ms (median) | C++ tok/s | Python eager step ms | Python compiled step ms "
      "| C++/eager speed | C++/compiled speed | C++ / eager / compiled CPU s per step, all ranks "
      "| C++ / eager / compiled step ms, fastest | C++ grad all-reduce wait ms | max abs loss diff (eager, compiled) "
      "| loss step 0 -> last |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
rate, mismatches = {}, []
for tag, world, t in (("1", 1, threads), ("n", ranks, 1)):
    runs = {k: steps(f"{k}-{tag}") for k in ("cpp", "py", "pyc")}
    dt = {k: [r["dt_ms"] for r in v[skip:]] for k, v in runs.items()}
    med = {k: statistics.median(v) for k, v in dt.items()}
    tokens = batch * seq * world
    rate[tag] = {k: tokens / (m / 1000) for k, m in med.items()}
    dloss = {}
    for k in ("py", "pyc"):
        pairs = list(zip(runs["cpp"], runs[k]))
        dloss[k] = max(abs(a["loss"] - b["loss"]) for a, b in pairs)
        bound = max(1e-4 * abs(a["loss"]) for a, _ in pairs)
        if len(pairs) != len(runs["cpp"]) or dloss[k] > bound:
            mismatches.append(f"{world} rank(s), {'eager' if k == 'py' else 'compiled'}: losses differ by up to "
                              f"{dloss[k]:.2e} (bound {bound:.1e}): the sides do not train the same thing")
    cw = {k: cpu_window(f"{k}-{tag}") for k in runs}
    cpu_col = " / ".join(f"{cw[k]['cpu_s_per_step']:.2f}" if cw[k] else "n/a" for k in runs)
    print(f"| {world} x {t} | {med['cpp']:.0f} | {rate[tag]['cpp']:.1f} | {med['py']:.0f} | {med['pyc']:.0f} "
          f"| {med['py'] / med['cpp']:.2f} | {med['pyc'] / med['cpp']:.2f} | {cpu_col} "
          f"| {' / '.join(f'{min(dt[k]):.0f}' for k in runs)} "
          f"| {statistics.median(r.get('sync_wait_ms', 0.0) for r in runs['cpp'][skip:]):.0f} "
          f"| {dloss['py']:.1e}, {dloss['pyc']:.1e} | {runs['cpp'][0]['loss']:.4f} -> {runs['cpp'][-1]['loss']:.4f} |")
print(f"\n{ranks} rank(s) x 1 thread vs 1 rank x {threads} threads, tok/s: C++ {rate['n']['cpp'] / rate['1']['cpp']:.2f}x, "
      f"Python eager {rate['n']['py'] / rate['1']['py']:.2f}x, compiled {rate['n']['pyc'] / rate['1']['pyc']:.2f}x")
for m in mismatches:
    print(m, file=sys.stderr)
sys.exit(1 if mismatches else 0)
PY
if [[ ${loss_check_failed:-0} == 1 ]]; then
  cat "$table"
  cat "$work/loss_check.txt" >&2
  bench_die "the losses disagree: no speed ratio is reported (nothing appended to docs/benchmarks-log.md)"
fi
model_line="$(grep -m1 '^model:' "$work/cpp-1.log" || true)"
run_commands=()
for name in cpp-1 py-1 pyc-1 cpp-n py-n pyc-n; do
  run_commands+=("${name}: \`$(sed "s|$work/mygpt-ddp|build/mygpt-ddp|g; s|$work|TMP|g; s|$repo/||g" "$work/$name.cmd" | cut -c 3-)\`")
done
echo "(the six runs took ${elapsed_s} s)"
python_side="Python DDP over gloo under torchrun; compiled: torch.compile around the DDP module (inductor, C++ code)"
title="GPT-2 124M CPU training step, C++ vs PyTorch eager and torch.compile, 1 and $ranks ranks"
if [[ $preset != gpt2 ]]; then
  python_side="Python: transformers $("$python" -c 'import transformers; print(transformers.__version__)') $(grep -m1 -o '[A-Za-z]*ForCausalLM' "$work/py-1.log"), SDPA attention, loaded from the folder \`mygpt-ddp export\` wrote of our preset after one step (ours: --init-from the same folder); compiled: torch.compile around the loss module (inductor, C++ code)"
  title="$preset CPU training step, C++ vs transformers eager and torch.compile, 1 x $threads and $ranks x 1 threads"
fi
bench_report "$title" "$table" \
  "the six runs took ${elapsed_s} s" \
  "versions: torch $torch_version for both sides (.venv)${mpi_version:+, $mpi_version}; $python_side${OMP_WAIT_POLICY:+; OMP_WAIT_POLICY=$OMP_WAIT_POLICY in the environment of every run}" \
  "${model_line:-model: $preset preset}; batch $batch_size x $seq_len per rank, grad accum 1, fp32, seed 1337, $steps steps, median over steps $skip..$((steps - 1)); data: GPT-2 shards from \`mygpt-ddp prepare\` of $(basename "$text") (--val-tokens 0)" \
  "${run_commands[@]}"
