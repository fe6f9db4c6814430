#!/usr/bin/env bash
# Time to the first token on CPU, one thread: `mygpt-ddp generate --max-new-tokens 1` from a Hugging Face
# GPT-2 124M folder and from our own checkpoint of the same model, next to transformers'
# GPT2LMHeadModel.from_pretrained + one generated token (scripts/bench/hf_first_token.py) on the same
# folder, each a fresh process timed whole (process start, load, one token), in one invocation with the
# same torch build (.venv). The folder is a randomly initialized GPT2LMHeadModel(GPT2Config()) saved with
# save_pretrained (scripts/bench/hf_generate.py make; no network); the checkpoint is a one-step `train
# --init-from` of it (a checkpoint holds the optimizer's state too, which generate does not read). Prints
# a markdown table and appends it to docs/benchmarks-log.md.
#
# usage: scripts/bench_load.sh [--reps 3] [--threads 1] [--baseline BINARY] [--model-flags "--n-layer 2"]
#          [--vocab DIR] [--text FILE] [--no-append]
#
# --baseline BINARY also times another build of mygpt-ddp (e.g. one of the main branch) on the same
# files, between the same runs: a before/after comparison on one machine in one run. Times are the
# median over --reps fresh processes of each side (the order rotated each rep), wall clock and process
# CPU (user + sys); on a machine other jobs share, CPU time is the steadier measure.
# --vocab (GPT-2's encoder.json and vocab.bpe) and --text (what the one training step of the checkpoint
# reads) default to ../shared/data's.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options reps=3 threads=1 baseline="" model-flags="" vocab="$repo/../shared/data/gpt2" \
  text="$repo/../shared/data/tinyshakespeare.txt" -- "$@"
[[ $reps =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--reps must be a positive whole number, got '$reps'"
[[ $threads =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--threads must be a positive whole number, got '$threads'"
[[ -z $baseline || -x $baseline ]] || bench_usage_error "--baseline '$baseline' is not an executable"

bench_need_built "$mygpt_bin" "$python"
bench_need_transformers "$python"
bench_need_vocab "$vocab"
vocab="$(bench_abs_path "$vocab")"
text="$(bench_abs_path "$text")"
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"

bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"
[[ -n $baseline ]] && { cp "$baseline" "$work/mygpt-ddp-baseline"; baseline="$work/mygpt-ddp-baseline"; }
bench_machine_facts
# /proc/cpuinfo's model name, and lscpu's view of the same CPU where lscpu exists.
command -v lscpu >/dev/null && lscpu | grep -E '^(Model name|Thread|Core|Socket|L3)' || true

# shellcheck disable=SC2206  # model flags are words on purpose
model_flags_words=($model_flags)
echo "== making the Hugging Face folder (transformers) and our checkpoint of it"
"$python" "$repo/scripts/bench/hf_generate.py" make "$work/hf" "${model_flags_words[@]}"
bench_run "$work/train.log" "checkpoint (train --init-from)" "$binary" train --init-from "$work/hf" \
  --data "$text" --vocab "$vocab" --steps 1 --batch-size 1 --seq-len 16 \
  --eval-steps 1 --out "$work/run" --device cpu --threads "$threads"
prompt="The history of the city begins"
prompt_ids="$("$binary" generate --checkpoint "$work/hf" --vocab "$vocab" --prompt "$prompt" --max-new-tokens 1 \
  --temperature 0 --device cpu --threads "$threads" --print-ids 2>/dev/null | grep -E '^[0-9]+( [0-9]+)*$' | head -n 1)"
prompt_ids="${prompt_ids% *}"  # without the new token
[[ -n $prompt_ids ]] || bench_die "could not read the prompt's ids from generate --print-ids"

# timed NAME COMMAND...: one fresh process; NAME.times gets "wall cpu" seconds per run, NAME.log its output.
timed() {
  local name=$1
  shift
  printf '%q ' "$@" | sed "s| \$||; s|$work|TMP|g; s|$repo/||g; s|$vocab|GPT2_VOCAB|g" >"$work/$name.cmd"
  /usr/bin/time -f '%e %U %S' -o "$work/$name.time" "$@" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; bench_die "the $name run failed"; }
  awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$work/$name.time" >>"$work/$name.times"
}
ours_args=(generate --vocab "$vocab" --prompt "$prompt" --max-new-tokens 1 --temperature 0 --device cpu
           --threads "$threads")
sides=(ours-hf ours-ckpt transformers)
[[ -n $baseline ]] && sides+=(baseline-hf baseline-ckpt)
for rep in $(seq 1 "$reps"); do
  for side in $(bench_rotate "$rep" "${sides[@]}"); do
    echo "== rep $rep: $side"
    case $side in
      ours-hf) timed "$side" "$binary" "${ours_args[@]}" --checkpoint "$work/hf" ;;
      ours-ckpt) timed "$side" "$binary" "${ours_args[@]}" --checkpoint "$work/run" ;;
      baseline-hf) timed "$side" "$baseline" "${ours_args[@]}" --checkpoint "$work/hf" ;;
      baseline-ckpt) timed "$side" "$baseline" "${ours_args[@]}" --checkpoint "$work/run" ;;
      transformers) timed "$side" "$python" "$repo/scripts/bench/hf_first_token.py" "$work/hf" \
                      --prompt-ids "$prompt_ids" --threads "$threads" ;;
    esac
  done
done
# The process start alone, for scale: LibTorch's libraries loaded and nothing else.
/usr/bin/time -f '%e %U %S' -o "$work/start.time" "$binary" --help >/dev/null 2>&1 || true

table="$work/table.md"
"$python" - "$work" "${sides[@]}" >"$table" <<'PY'
import json, statistics, sys
work, sides = sys.argv[1], sys.argv[2:]
names = {"ours-hf": "mygpt-ddp generate, HF folder", "ours-ckpt": "mygpt-ddp generate, our checkpoint",
         "baseline-hf": "baseline build, HF folder", "baseline-ckpt": "baseline build, our checkpoint",
         "transformers": "transformers from_pretrained + generate"}
print("| side (1 new token, greedy) | runs | wall s, median | wall s, best | CPU s, median | notes |")
print("|---|---:|---:|---:|---:|---|")
for side in sides:
    runs = [tuple(map(float, line.split())) for line in open(f"{work}/{side}.times")]
    note = ""
    if side == "transformers":
        r = json.loads([l for l in open(f"{work}/{side}.log") if l.startswith("RESULT ")][-1][7:])
        note = (f"transformers {r['transformers']}, last run: import {r['import_s']:.2f} s, "
                f"from_pretrained {r['load_s']:.2f} s, token {r['token_s']:.2f} s")
    wall = [w for w, _ in runs]
    print(f"| {names[side]} | {len(runs)} | {statistics.median(wall):.2f} | {min(wall):.2f} "
          f"| {statistics.median([c for _, c in runs]):.2f} | {note} |")
start = open(f"{work}/start.time").read().split()
print(f"| mygpt-ddp --help (process start only) | 1 | {float(start[0]):.2f} | | {float(start[1]) + float(start[2]):.2f} | |")
PY
run_commands=()
for side in "${sides[@]}"; do run_commands+=("$side: \`$(sed "s|TMP/mygpt-ddp-baseline|BASELINE|; s|TMP/mygpt-ddp|build/mygpt-ddp|" "$work/$side.cmd")\`"); done
bench_report "Time to the first token on CPU, $threads thread(s): mygpt-ddp generate vs transformers from_pretrained" \
  "$table" \
  "versions: torch $torch_version on both sides (.venv); transformers $("$python" -c 'import transformers; print(transformers.__version__)')" \
  "model: GPT2LMHeadModel(GPT2Config(${model_flags:-124M shape})), random weights, save_pretrained (fp32 safetensors, 475 MiB); checkpoint: one step of train --init-from it" \
  "each run a fresh process, timed whole by /usr/bin/time (wall, user + sys); OMP_NUM_THREADS=$threads" \
  "${run_commands[@]}"
