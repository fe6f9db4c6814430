#!/usr/bin/env bash
# Serving speed on CPU: `mygpt-ddp serve` answering 1, 4 and 16 concurrent streamed completions
# (continuous batching: one forward pass per token for every stream) next to transformers' generate() with
# the same prompt batched the same way (rows of one batch), on the same GPT-2 124M, greedy, exactly
# --new-tokens per stream, the same torch build (.venv) and thread count. The two sides run in turn, one
# count of streams at a time (which goes first alternates), the server staying up between its turns.
# Reports time to first token, tokens/s (all streams' new tokens / wall time) and tokens per CPU second (the
# server process's user + system time, or transformers' process's: the steadier measure on a shared
# machine), and the batching gain: N streams' tokens/s over one stream's, for each side. Checks that every
# stream's text equals transformers' (failing, with nothing appended, where one differs); prints a markdown
# table and appends it to docs/benchmarks-log.md.
#
# The model: --model DIR, a Hugging Face GPT-2 folder (config.json, model.safetensors), e.g. OpenAI's weights
# fetched as docs/models.md shows; without it a randomly initialized GPT-2 of the 124M shape made by
# transformers (a step's work does not depend on the weights' values). --model-flags shrinks the random model
# (scripts/bench/hf_generate.py make's flags, e.g. "--n-layer 2"), for a quick check of the script itself.
#
# usage: scripts/bench_serve.sh [--new-tokens 32] [--streams 1,4,16] [--threads 1] [--model DIR]
#          [--model-flags "--n-layer 2"] [--prompt TEXT] [--vocab DIR] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options new-tokens=32 streams=1,4,16 threads=1 model="" model-flags="" \
  prompt="The history of the city begins with a small village on the river, where farmers and traders once met" \
  vocab="$repo/../shared/data/gpt2" -- "$@"
[[ $new_tokens =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--new-tokens must be a positive whole number, got '$new_tokens'"
[[ $streams =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bench_usage_error "--streams must be counts like 1,4,16, got '$streams'"
[[ $threads =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--threads must be a positive whole number, got '$threads'"
[[ -z $model || -z $model_flags ]] || bench_usage_error "--model-flags shapes the random model: not with --model"
[[ -z $model || ( -f $model/config.json && -f $model/model.safetensors ) ]] ||
  bench_usage_error "--model $model must be a Hugging Face folder with config.json and model.safetensors"

bench_need_built "$mygpt_bin" "$python"
bench_need_transformers "$python"
bench_need_vocab "$vocab"
vocab="$(bench_abs_path "$vocab")"
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"
bench_machine_facts >"$work/facts"  # not in a subshell: it sets cpus, cpu_model, load, torch_version for bench_report
facts="$(cat "$work/facts")"
echo "$facts"
lscpu_model="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)"
echo "lscpu: ${lscpu_model:-(no lscpu)}"
max_streams=$(tr ',' '\n' <<<"$streams" | sort -n | tail -n 1)

if [[ -n $model ]]; then
  model="$(bench_abs_path "$model")"
  model_note="$(basename "$model") ($(wc -c <"$model/model.safetensors") bytes of model.safetensors)"
else
  # shellcheck disable=SC2206  # model flags are words on purpose
  model_flags_words=($model_flags)
  model="$work/hf"
  "$python" "$repo/scripts/bench/hf_generate.py" make "$model" "${model_flags_words[@]}"
  model_note="GPT2LMHeadModel(GPT2Config(${model_flags:-124M shape: 12 layers, 12 heads, 768 wide, 1024 positions, vocab 50257})), random weights (seed 1)"
fi
prompt_ids="$("$binary" generate --checkpoint "$model" --vocab "$vocab" --prompt "$prompt" --max-new-tokens 0 \
  --print-ids --device cpu | tail -n 1)"

"$binary" serve --checkpoint "$model" --vocab "$vocab" --port 0 --device cpu --threads "$threads" \
  --max-batch "$max_streams" --model-name bench >"$work/serve.out" 2>"$work/serve.err" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 600); do grep -q '^serving on ' "$work/serve.out" && break; sleep 0.1; done
url=$(awk '/^serving on / { print $3; exit }' "$work/serve.out")
[[ -n $url ]] || { cat "$work/serve.err" >&2; bench_die "the server did not start"; }

# side NAME N: one side's turn at N concurrent streams; its RESULT line goes to NAME-N.log.
side() {
  local name=$1 n=$2 warm_up=()
  if [[ $name == serve ]]; then
    [[ -f $work/warm ]] || { warm_up=(--warm-up); touch "$work/warm"; }
    bench_run "$work/serve-$n.log" "serve ($n streams)" "$python" "$repo/scripts/bench/serve_bench.py" serve "$url" \
      bench "$server" --text "$prompt" --new-tokens "$new_tokens" --streams "$n" "${warm_up[@]}"
  else
    bench_run "$work/hf-$n.log" "transformers ($n rows)" "$python" "$repo/scripts/bench/serve_bench.py" hf "$model" \
      --prompt-ids "$prompt_ids" --vocab "$vocab" --new-tokens "$new_tokens" --streams "$n" --threads "$threads"
  fi
  grep -E '^(serve|transformers):' "$work/$name-$n.log"
}
turn=0
for n in ${streams//,/ }; do
  turn=$((turn + 1))
  echo "== $n concurrent stream(s) of $new_tokens tokens: mygpt-ddp serve and transformers generate(), in turn"
  for name in $(bench_rotate "$turn" serve hf); do side "$name" "$n"; done
done
kill -TERM "$server"
wait "$server" || bench_die "the server did not exit 0 on SIGTERM"

table="$work/table.md"
"$python" - "$work" "$streams" >"$table" <<'PY' || texts_differ=1
import json, statistics, sys
work, counts = sys.argv[1], [int(n) for n in sys.argv[2].split(",")]
def result(name, n):
    return json.loads([l for l in open(f"{work}/{name}-{n}.log") if l.startswith("RESULT ")][-1][7:])
ours = {n: result("serve", n) for n in counts}
hf = {n: result("hf", n) for n in counts}
one = min(counts)
same = all(set(ours[n]["texts"]) == set(hf[n]["texts"]) and len(set(hf[n]["texts"])) == 1 for n in counts)
print("| concurrent streams | serve: first token s, median (max) | serve: tok/s | serve: tok per CPU s "
      f"| serve: batching gain over {one} stream, wall; CPU | transformers: first token s | transformers: tok/s "
      "| transformers: tok per CPU s | transformers: batching gain, wall; CPU | serve / transformers, wall; CPU |")
print("|---:|---:|---:|---:|---|---:|---:|---:|---|---|")
for n in counts:
    o, h = ours[n], hf[n]
    print(f"| {n} | {statistics.median(o['ttft_s']):.3f} ({max(o['ttft_s']):.3f}) | {o['tok_per_s']:.1f} "
          f"| {o['tok_per_cpu_s']:.1f} | {o['tok_per_s'] / ours[one]['tok_per_s']:.2f}x; "
          f"{o['tok_per_cpu_s'] / ours[one]['tok_per_cpu_s']:.2f}x | {h['ttft_s'][0]:.3f} | {h['tok_per_s']:.1f} "
          f"| {h['tok_per_cpu_s']:.1f} | {h['tok_per_s'] / hf[one]['tok_per_s']:.2f}x; "
          f"{h['tok_per_cpu_s'] / hf[one]['tok_per_cpu_s']:.2f}x "
          f"| {o['tok_per_s'] / h['tok_per_s']:.2f}x; {o['tok_per_cpu_s'] / h['tok_per_cpu_s']:.2f}x |")
print()
print("every stream's text " + ("equals transformers' (greedy)" if same else "DIFFERS from transformers'") +
      f": {hf[one]['texts'][0]!r}")
sys.exit(0 if same else 1)  # a speed of different work is no figure
PY
if [[ ${texts_differ:-0} == 1 ]]; then
  cat "$table"
  bench_die "the served texts differ from transformers': no speed is reported (nothing appended to docs/benchmarks-log.md)"
fi
bench_report "Serving on CPU: mygpt-ddp serve (continuous batching) vs transformers generate() batched, $threads thread(s)" "$table" \
  "lscpu: ${lscpu_model:-(no lscpu)}; $facts" \
  "versions: torch $torch_version on both sides (.venv); transformers $("$python" -c 'import transformers; print(transformers.__version__)')" \
  "model: $model_note; prompt: \"$prompt\" ($(wc -w <<<"$prompt_ids") GPT-2 tokens), greedy, $new_tokens new tokens per stream; OMP_NUM_THREADS=$threads" \
  "in turn: for each count of streams the two sides one after the other (who goes first alternates), the server up throughout" \
  "serve: \`build/mygpt-ddp serve --checkpoint MODEL --vocab GPT2_VOCAB --port 0 --device cpu --threads $threads --max-batch $max_streams\`, then N streamed /v1/completions started together (scripts/bench/serve_bench.py serve); first token = request sent to first text chunk; tok/s = all new tokens / wall time of the set; CPU = the server process's user + system time (/proc) over it" \
  "transformers: generate() on the prompt's ids repeated in one batch of N rows (scripts/bench/serve_bench.py hf); first token = the wall time of a generate() of 1 token of that batch; CPU = its process's user + system time"
