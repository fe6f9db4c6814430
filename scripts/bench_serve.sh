#!/usr/bin/env bash
# Serving speed on CPU: `mygpt-ddp serve` answering 1, 4 and 16 concurrent streamed completions
# (continuous batching: one forward pass per token for every stream) next to transformers' generate() with
# the same prompt batched the same way (rows of one batch), on the same randomly initialized GPT-2
# 124M-shaped model (made by transformers, saved in Hugging Face's layout, which `serve` reads), greedy,
# exactly --new-tokens per stream, the same torch build (.venv) and thread count. Reports time to first
# token, tokens/s (all streams' new tokens / wall time) and tokens per CPU second (the server process's CPU
# time, or transformers' process's: the steadier measure on a shared machine), and the batching gain: N
# streams' tokens/s over one stream's. Prints a markdown table and appends it to docs/benchmarks-log.md.
#
# usage: scripts/bench_serve.sh [--new-tokens 64] [--streams 1,4,16] [--threads 1] [--model-flags "--n-layer 2"]
#          [--prompt TEXT] [--vocab DIR] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options new-tokens=64 streams=1,4,16 threads=1 model-flags="" \
  prompt="The history of the city begins with a small village on the river, where farmers and traders once met" \
  vocab="$repo/../shared/data/gpt2" -- "$@"
[[ $new_tokens =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--new-tokens must be a positive whole number, got '$new_tokens'"
[[ $streams =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || bench_usage_error "--streams must be counts like 1,4,16, got '$streams'"
[[ $threads =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--threads must be a positive whole number, got '$threads'"

bench_need_built "$mygpt_bin" "$python"
bench_need_transformers "$python"
bench_need_vocab "$vocab"
vocab="$(bench_abs_path "$vocab")"
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"
facts="$(bench_machine_facts)"
echo "$facts"
max_streams=$(tr ',' '\n' <<<"$streams" | sort -n | tail -n 1)

# shellcheck disable=SC2206  # model flags are words on purpose
model_flags_words=($model_flags)
"$python" "$repo/scripts/bench/hf_generate.py" make "$work/hf" "${model_flags_words[@]}"
model_note="GPT2LMHeadModel(GPT2Config(${model_flags:-124M shape: 12 layers, 12 heads, 768 wide, 1024 positions, vocab 50257})), random weights (seed 1)"
prompt_ids="$("$binary" generate --checkpoint "$work/hf" --vocab "$vocab" --prompt "$prompt" --max-new-tokens 0 \
  --print-ids --device cpu | tail -n 1)"

echo "== mygpt-ddp serve: $streams concurrent streams of $new_tokens tokens"
"$binary" serve --checkpoint "$work/hf" --vocab "$vocab" --port 0 --device cpu --threads "$threads" \
  --max-batch "$max_streams" --model-name bench >"$work/serve.out" 2>"$work/serve.err" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 600); do grep -q '^serving on ' "$work/serve.out" && break; sleep 0.1; done
url=$(awk '/^serving on / { print $3; exit }' "$work/serve.out")
[[ -n $url ]] || { cat "$work/serve.err" >&2; bench_die "the server did not start"; }
bench_run "$work/serve.log" "serve" "$python" "$repo/scripts/bench/serve_bench.py" serve "$url" bench "$server" \
  --text "$prompt" --prompt-ids "$prompt_ids" --new-tokens "$new_tokens" --streams "$streams"
grep '^serve:' "$work/serve.log"
kill -TERM "$server"
wait "$server" || bench_die "the server did not exit 0 on SIGTERM"

echo "== transformers generate(): batches of $streams rows"
bench_run "$work/hf.log" "transformers" "$python" "$repo/scripts/bench/serve_bench.py" hf "$work/hf" \
  --prompt-ids "$prompt_ids" --new-tokens "$new_tokens" --streams "$streams" --threads "$threads"
grep '^transformers:' "$work/hf.log"

table="$work/table.md"
"$python" - "$work" >"$table" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def result(name):
    return json.loads([l for l in open(f"{work}/{name}.log") if l.startswith("RESULT ")][-1][7:])
ours, hf = result("serve"), result("hf")
print("| concurrent streams | serve: first token, median s | serve: tok/s | serve: tok per CPU s | batching gain (tok/s; per CPU s) "
      "| transformers: first token s | transformers: tok/s | transformers: tok per CPU s | serve vs transformers (tok/s; per CPU s) |")
print("|---:|---:|---:|---:|---|---:|---:|---:|---|")
one = ours[min(ours, key=int)]
for n in sorted(ours, key=int):
    o, h = ours[n], hf[n]
    print(f"| {n} | {statistics.median(o['ttft_s']):.3f} | {o['tok_per_s']:.1f} | {o['tok_per_cpu_s']:.1f} "
          f"| {o['tok_per_s'] / one['tok_per_s']:.2f}x; {o['tok_per_cpu_s'] / one['tok_per_cpu_s']:.2f}x "
          f"| {h['ttft_s'][0]:.3f} | {h['tok_per_s']:.1f} | {h['tok_per_cpu_s']:.1f} "
          f"| {o['tok_per_s'] / h['tok_per_s']:.2f}x; {o['tok_per_cpu_s'] / h['tok_per_cpu_s']:.2f}x |")
PY
bench_report "Serving on CPU: mygpt-ddp serve (continuous batching) vs transformers generate() batched, $threads thread(s)" "$table" \
  "$facts" \
  "versions: torch $torch_version on both sides (.venv); transformers $("$python" -c 'import transformers; print(transformers.__version__)')" \
  "model: $model_note; prompt: \"$prompt\" ($(wc -w <<<"$prompt_ids") GPT-2 tokens), greedy, $new_tokens new tokens per stream" \
  "serve: streamed /v1/completions started together, --max-batch $max_streams; first token = request sent to first text chunk; tok/s = all new tokens / wall time of the whole set; CPU = the server process's (/proc)" \
  "transformers: generate() on the prompt repeated in one batch of N rows; first token = a generate() of 1 token; CPU = its process's"
