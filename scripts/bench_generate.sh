#!/usr/bin/env bash
# Greedy generation speed on CPU, one thread: `mygpt-ddp generate` (KV cache, model/kv_cache.h) next to
# transformers' GPT2LMHeadModel.generate() (its KV cache; scripts/bench/hf_generate.py), in one
# invocation, on the same randomly initialized GPT-2 124M-shaped model (made by transformers and saved
# in Hugging Face's layout, which `generate --checkpoint` reads), the same prompt ids and the same torch
# build (.venv). Also our uncached path (`--kv-cache false`) once, for scale. Checks that both sides
# produce the same token ids (failing, with nothing appended, where they differ), prints a markdown
# table and appends it to docs/benchmarks-log.md.
#
# usage: scripts/bench_generate.sh [--preset gpt2] [--new-tokens 200] [--reps 3] [--threads 1] [--uncached-tokens 50]
#          [--prompt TEXT] [--model-flags "--n-layer 2"] [--vocab DIR] [--text FILE] [--no-append]
#
# --preset of another family member (nanochat-d4, nanochat-d12, llama-small, ...): the model is then ours
# (our initialization, one training step on GPT-2 shards of --text), written by `mygpt-ddp export`; both
# sides read that folder, transformers with its own class for it (AutoModelForCausalLM). --model-flags
# are then our train's shape flags.
#
# tok/s = new tokens / the wall time of the generation call (prompt read included, model load and
# process start not): ours is generate's --timing line, transformers' a perf_counter around
# generate() after one untimed warm-up call. tok/s per CPU second divides by the process's CPU time
# over the same call instead: on a machine other jobs share it is the steadier measure of the work. Ours runs once per rep (a fresh process each), transformers
# --reps times in one process, between our first and later runs. --uncached-tokens 0 skips the uncached
# run; --model-flags (hf_generate.py make's flags, e.g. "--n-layer 2") shrinks the model, for a quick
# check of the script itself.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options preset=gpt2 new-tokens=200 reps=3 threads=1 uncached-tokens=50 model-flags="" \
  prompt="The history of the city begins with a small village on the river, where farmers and traders once met" \
  vocab="$repo/../shared/data/gpt2" text="$repo/../shared/data/tinyshakespeare.txt" -- "$@"
[[ $new_tokens =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--new-tokens must be a positive whole number, got '$new_tokens'"
[[ $reps =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--reps must be a positive whole number, got '$reps'"
[[ $threads =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--threads must be a positive whole number, got '$threads'"
[[ $uncached_tokens =~ ^[0-9]+$ ]] || bench_usage_error "--uncached-tokens must be a whole number, got '$uncached_tokens'"

twin="$repo/scripts/bench/hf_generate.py"
bench_need_built "$mygpt_bin" "$python"
bench_need_transformers "$python"
bench_need_vocab "$vocab"
vocab="$(bench_abs_path "$vocab")"
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"

bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"
bench_machine_facts

# shellcheck disable=SC2206  # model flags are words on purpose
model_flags_words=($model_flags)
if [[ $preset == gpt2 ]]; then
  "$python" "$twin" make "$work/hf" "${model_flags_words[@]}"
  model_note="GPT2LMHeadModel(GPT2Config(${model_flags:-124M shape: 12 layers, 12 heads, 768 wide, 1024 positions, vocab 50257})), random weights (seed 1), saved with save_pretrained"
else
  [[ -f "$text" ]] || bench_die "text file $text is missing"
  "$binary" prepare --tokenizer gpt2 --vocab "$vocab" --input "$text" --out "$work/shards" --val-tokens 0 | tail -n 1
  bench_family_folder "$binary" "$preset" "$work/shards" 64 "$work/hf" "${model_flags_words[@]}"
  model_note="ours: --preset $preset $model_flags (our initialization, one AdamW step on GPT-2 shards of $(basename "$text")), written by \`mygpt-ddp export\`; transformers reads it as $("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["architectures"][0])' "$work/hf/config.json")"
fi
ours=("$binary" generate --checkpoint "$work/hf" --vocab "$vocab" --prompt "$prompt" --temperature 0
      --device cpu --threads "$threads" --print-ids --timing)

# ours NAME NEW_TOKENS [FLAGS...]: one run of ours; NAME.log holds its ids and timing line.
ours() {
  local name=$1 tokens=$2
  shift 2
  echo "== ours ($name): $tokens new tokens"
  # As a shell reads it back: a word with spaces (the prompt) in single quotes, one with a quote in %q's form.
  local word words=()
  for word in "${ours[@]}" --max-new-tokens "$tokens" "$@"; do
    if [[ $word == *"'"* ]]; then words+=("$(printf '%q' "$word")")
    elif [[ $word =~ [[:space:]] || -z $word ]]; then words+=("'$word'")
    else words+=("$word"); fi
  done
  echo "${words[*]}" >"$work/$name.cmd"
  bench_run "$work/$name.log" "ours ($name)" "${ours[@]}" --max-new-tokens "$tokens" "$@"
  grep '^timing:' "$work/$name.log"
}

ours cached-1 "$new_tokens"
# The prompt as ours tokenized it (its ids line is prompt + new ids): transformers gets the same ids.
read -ra first_ids <<<"$(grep -E '^[0-9]+( [0-9]+)*$' "$work/cached-1.log" | head -n 1)"
prompt_ids="${first_ids[*]:0:${#first_ids[@]}-new_tokens}"
echo "== transformers: $reps x $new_tokens new tokens"
echo "$python scripts/bench/hf_generate.py run TMP/hf --prompt-ids \"...\" --new-tokens $new_tokens --reps $reps --threads $threads" >"$work/hf.cmd"
bench_run "$work/hf.log" "transformers" "$python" "$twin" run "$work/hf" --prompt-ids "$prompt_ids" \
  --new-tokens "$new_tokens" --reps "$reps" --threads "$threads"
grep '^transformers:' "$work/hf.log"
for ((rep = 2; rep <= reps; rep++)); do ours "cached-$rep" "$new_tokens"; done
(( uncached_tokens > 0 )) && ours uncached "$uncached_tokens" --kv-cache false

table="$work/table.md"
"$python" - "$work" "$reps" "$new_tokens" "$uncached_tokens" >"$table" <<'PY' || ids_differ=1
import json, re, statistics, sys
work, reps, new_tokens, uncached_tokens = sys.argv[1], *map(int, sys.argv[2:])
def ours(name):
    text = open(f"{work}/{name}.log").read()
    m = re.search(r"^timing: .*: ([0-9.]+) new tokens/s per sample, ([0-9.]+) per CPU second", text, re.M)
    ids = [int(t) for t in re.search(r"^[0-9]+( [0-9]+)*$", text, re.M).group(0).split()]
    return float(m.group(1)), float(m.group(2)), ids
hf = json.loads([l for l in open(f"{work}/hf.log") if l.startswith("RESULT ")][-1][len("RESULT "):])
runs = [ours(f"cached-{r}") for r in range(1, reps + 1)]
med = statistics.median
hf_wall, hf_cpu = med(hf["tok_per_s"]), med(hf["tok_per_cpu_s"])
same = all(ids == hf["ids"] for _, _, ids in runs)
prompt_tokens = len(hf["ids"]) - new_tokens
print(f"| side (1 prompt of {prompt_tokens} tokens, greedy) | new tokens | runs | tok/s, median | tok/s, best "
      "| tok/s per CPU second, median | speed vs transformers: wall / CPU time | token ids |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
def row(side, tokens, rates, cpu_rates, note):
    print(f"| {side} | {tokens} | {len(rates)} | {med(rates):.1f} | {max(rates):.1f} | {med(cpu_rates):.1f} "
          f"| {med(rates) / hf_wall:.2f}x / {med(cpu_rates) / hf_cpu:.2f}x | {note} |")
row("mygpt-ddp generate (KV cache)", new_tokens, [r[0] for r in runs], [r[1] for r in runs],
    "equal to transformers'" if same else "DIFFER from transformers'")
row(f"transformers {hf['transformers']} generate() (KV cache)", new_tokens, hf["tok_per_s"], hf["tok_per_cpu_s"], "")
if uncached_tokens:
    rate, cpu_rate, ids = ours("uncached")
    row("mygpt-ddp generate --kv-cache false", uncached_tokens, [rate], [cpu_rate],
        "a prefix of transformers'" if ids == hf["ids"][:len(ids)] else "DIFFER from transformers'")
    same = same and ids == hf["ids"][:len(ids)]
sys.exit(0 if same else 1)  # a speed of different work is no figure
PY
if [[ ${ids_differ:-0} == 1 ]]; then
  cat "$table"
  bench_die "our token ids differ from transformers': no speed is reported (nothing appended to docs/benchmarks-log.md)"
fi
run_commands=()
for name in cached-1 hf uncached; do
  [[ -f $work/$name.cmd ]] && run_commands+=("${name}: \`$(sed "s|$work/mygpt-ddp|build/mygpt-ddp|g; s|$work|TMP|g; s|$repo/||g; s|$vocab|GPT2_VOCAB|g" "$work/$name.cmd")\`")
done
bench_report "Greedy generation on CPU ($preset), $threads thread(s): mygpt-ddp generate vs transformers generate()" "$table" \
  "versions: torch $torch_version on both sides (.venv); transformers $("$python" -c 'import transformers; print(transformers.__version__)')" \
  "model: $model_note; prompt: \"$prompt\" (GPT-2 BPE, GPT2_VOCAB = shared/data/gpt2)" \
  "OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads; tok/s = new tokens / wall time (or process CPU time) of the generation call (prompt read included, load not)" \
  "${run_commands[@]}"
