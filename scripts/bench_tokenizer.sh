#!/usr/bin/env bash
# GPT-2 BPE encoding speed on one core: `mygpt-ddp prepare --tokenizer gpt2` (our C++ tokenizer,
# tokenizer/gpt2_bpe_tokenizer.cpp) next to tiktoken's "gpt2" encoding (encode_ordinary, Rust, one
# thread; scripts/bench/tokenize_tiktoken.py) on the same text and the same encoder.json/vocab.bpe,
# in one invocation. Checks that both produce the same ids (prepare adds one <|endoftext|> in front),
# prints a markdown table and appends it to docs/benchmarks-log.md.
#
# usage: scripts/bench_tokenizer.sh [--input FILE] [--vocab DIR] [--repeat 5] [--core 0] [--no-append]
#
# Every run is a fresh process pinned to --core (taskset), so both tokenizers start cold (ours fills
# its pre-token cache as it goes; tiktoken has none across calls). Per run we record the encode speed
# each side measures in-process (prepare's printed MB/s: encode + shard write, wall clock; tiktoken:
# one encode_ordinary call, wall clock, and also its process CPU time), the whole command's wall and
# CPU time (/usr/bin/time: process start, vocabulary load, read, encode, write), and the same command
# on a one-line file (the fixed cost: start-up + vocabulary load). A third run per side encodes the
# text twice in one process: the second pass shows the speed with a warm pre-token cache (ours: the
# file given twice to prepare; tiktoken: a second encode_ordinary call). Medians (and the best run) over
# --repeat runs per side, alternating which side goes first. On a busy machine trust the CPU-time
# and best-run columns more than the wall-clock medians.
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options input="$repo/../shared/data/tinyshakespeare.txt" vocab="$repo/../shared/data/gpt2" repeat=5 core=0 -- "$@"

twin="$repo/scripts/bench/tokenize_tiktoken.py"
bench_need_built "$repo/build/mygpt-ddp" "$python"
"$python" -c 'import tiktoken' 2>/dev/null || bench_die "tiktoken is not installed in .venv: $python -m pip install tiktoken"
[[ -f "$input" ]] || bench_die "input file $input is missing"
bench_need_vocab "$vocab"
[[ -x /usr/bin/time ]] || bench_die "/usr/bin/time (GNU time) is needed"
input="$(bench_abs_path "$input")"
vocab="$(bench_abs_path "$vocab")"
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c "$core"); fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 RAYON_NUM_THREADS=1

bench_work_dir
binary="$(bench_private_copy "$repo/build/mygpt-ddp")"
printf 'To be, or not to be: that is the question.\n' >"$work/one_line.txt"

tiktoken_version="$("$python" -c 'import tiktoken; print(tiktoken.__version__)')"
python_version="$("$python" -c 'import sys; print(sys.version.split()[0])')"
bytes="$(stat -c %s "$input")"
echo "$(basename "$input"): $bytes bytes | tiktoken $tiktoken_version, Python $python_version"
bench_machine_facts "pinned: ${pin[*]:-no (taskset missing)}"

# time_to FILE CMD...: runs CMD with stdout+stderr to FILE.log and "wall user sys" to FILE.time.
time_to() {
  local file="$1"; shift
  bench_run "$file.log" "'$*'" /usr/bin/time -o "$file.time" -f '%e %U %S' "${pin[@]}" "$@"
}

prepare_cmd=("$binary" prepare --tokenizer gpt2 --vocab "$vocab" --val-tokens 0)
for ((rep = 1; rep <= repeat; rep++)); do
  for side in $(bench_rotate "$rep" cpp py); do
    if [[ $side == cpp ]]; then
      time_to "$work/cpp-$rep" "${prepare_cmd[@]}" --input "$input" --out "$work/shards-$rep"
      time_to "$work/cpp-base-$rep" "${prepare_cmd[@]}" --input "$work/one_line.txt" --out "$work/base-shards-$rep"
      # The same file twice in one process: the second pass finds every pre-token in the cache.
      time_to "$work/cpp-warm-$rep" "${prepare_cmd[@]}" --input "$input" --input "$input" --out "$work/warm-shards-$rep"
      echo "run $rep C++:      $(head -n 1 "$work/cpp-$rep.log") | whole command (wall user sys): $(cat "$work/cpp-$rep.time")"
    else
      # Checked against the shard of run 1 (rep 1 runs C++ first).
      compare=()
      [[ -f "$work/shards-1/train_000000.bin" ]] && compare=(--compare "$work/shards-1/train_000000.bin")
      time_to "$work/py-$rep" "$python" "$twin" --vocab "$vocab" --input "$input" "${compare[@]}"
      time_to "$work/py-base-$rep" "$python" "$twin" --vocab "$vocab" --input "$work/one_line.txt"
      time_to "$work/py-warm-$rep" "$python" "$twin" --vocab "$vocab" --input "$input" --repeat 2
      echo "run $rep tiktoken: $(head -n 1 "$work/py-$rep.log") | whole command (wall user sys): $(cat "$work/py-$rep.time")"
    fi
  done
done

table="$work/table.md"
"$python" - "$work" "$repeat" "$bytes" >"$table" <<'PY'
import json, re, statistics, sys
work, repeat, nbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
med, mb = statistics.median, nbytes / 1e6
def times(path):  # wall, cpu (user + sys)
    wall, user, sys_ = map(float, open(path).read().split()[-3:])
    return wall, user + sys_
def collect(side):
    d = {k: [] for k in ("wall", "cpu", "base_wall", "base_cpu")}
    for r in range(1, repeat + 1):
        w, c = times(f"{work}/{side}-{r}.time"); d["wall"].append(w); d["cpu"].append(c)
        w, c = times(f"{work}/{side}-base-{r}.time"); d["base_wall"].append(w); d["base_cpu"].append(c)
    return d
cpp, py = collect("cpp"), collect("py")
cpp.update(mbs=[], tokens=set())
for r in range(1, repeat + 1):
    log = open(f"{work}/cpp-{r}.log").read()
    cpp["mbs"].append(float(re.search(r"([0-9.]+) MB/s", log).group(1)))
    cpp["tokens"].add(int(re.search(r"wrote \d+ val and (\d+) train tokens", log).group(1)))
# The warm run read the file twice; prepare prints the cumulative MB/s after each: X, then Y. The
# second pass took 2 mb / Y - mb / X seconds.
cpp["warm"] = []
for r in range(1, repeat + 1):
    x, y = map(float, re.findall(r"([0-9.]+) MB/s", open(f"{work}/cpp-warm-{r}.log").read())[:2])
    cpp["warm"].append(1 / max(2 / y - 1 / x, 1e-9))
py.update(mbs=[], mbs_cpu=[], tokens=set(), identical=[])
for r in range(1, repeat + 1):
    res = json.loads([l for l in open(f"{work}/py-{r}.log") if l.startswith("RESULT ")][-1][7:])
    py["mbs"].append(mb / res["encode_s"][0])
    py["mbs_cpu"].append(mb / res["encode_cpu_s"][0])
    py["tokens"].add(res["tokens"])
    if "ids_identical" in res: py["identical"].append(res["ids_identical"])
py["warm"] = [mb / json.loads([l for l in open(f"{work}/py-warm-{r}.log") if l.startswith("RESULT ")][-1][7:])["encode_s"][1]
              for r in range(1, repeat + 1)]
cpp_tokens, py_tokens = sorted(cpp["tokens"]), sorted(py["tokens"])
same_count = len(cpp_tokens) == 1 and len(py_tokens) == 1 and cpp_tokens[0] == py_tokens[0] + 1
identical = bool(py["identical"]) and all(py["identical"])
def row(name, d, tokens, cpu_col):
    return (f"| {name} | {tokens} | {med(d['mbs']):.2f} / {max(d['mbs']):.2f} | {cpu_col} "
            f"| {med(d['warm']):.2f} / {max(d['warm']):.2f} "
            f"| {med(d['base_wall']):.2f} / {med(d['base_cpu']):.2f} | {med(d['wall']):.2f} / {min(d['wall']):.2f} "
            f"| {med(d['cpu']):.2f} / {min(d['cpu']):.2f} |")
print("| tokenizer | tokens | encode MB/s, wall: median / best | encode MB/s, CPU time: median / best "
      "| second pass in the same process (warm cache), MB/s, wall: median / best | one-line file (start-up + vocab load): wall s / CPU s | whole command, wall s: median / best "
      "| whole command, CPU s: median / best |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
print(row("C++ `mygpt-ddp prepare`", cpp, f"{', '.join(map(str, cpp_tokens))} (incl. 1 EOT)", "n/a (prepare prints wall only)"))
print(row("tiktoken `encode_ordinary`", py, ", ".join(map(str, py_tokens)),
          f"{med(py['mbs_cpu']):.2f} / {max(py['mbs_cpu']):.2f}"))
print(f"| C++ / tiktoken | {'same count' if same_count else 'COUNTS DIFFER'}, ids {'identical' if identical else 'NOT identical / unchecked'} "
      f"| {med(cpp['mbs']) / med(py['mbs']):.2f}x / {max(cpp['mbs']) / max(py['mbs']):.2f}x speed "
      f"| C++ best wall vs tiktoken best CPU: {max(cpp['mbs']) / max(py['mbs_cpu']):.2f}x "
      f"| {med(cpp['warm']) / med(py['warm']):.2f}x / {max(cpp['warm']) / max(py['warm']):.2f}x speed "
      f"| {med(cpp['base_wall']) / med(py['base_wall']):.2f}x / {med(cpp['base_cpu']) / med(py['base_cpu']):.2f}x time "
      f"| {med(cpp['wall']) / med(py['wall']):.2f}x / {min(cpp['wall']) / min(py['wall']):.2f}x time "
      f"| {med(cpp['cpu']) / med(py['cpu']):.2f}x / {min(cpp['cpu']) / min(py['cpu']):.2f}x time |")
if not (same_count and identical):
    print("\nbench_tokenizer.sh: the two tokenizers disagree", file=sys.stderr)
    sys.exit(3)
PY
bench_report "GPT-2 BPE tokenizer, C++ vs tiktoken" "$table" \
  "versions: tiktoken $tiktoken_version (Python $python_version, .venv), mygpt-ddp linked against torch $torch_version; both read \`$(basename "$vocab")/encoder.json\` + \`vocab.bpe\`" \
  "input: \`$(basename "$input")\`, $bytes bytes, one document; every run a fresh process pinned to one core (\`${pin[*]:-unpinned}\`), $repeat runs per side alternating which goes first, medians" \
  "C++: \`mygpt-ddp prepare --tokenizer gpt2 --vocab DIR --input FILE --out TMP --val-tokens 0\` (its printed MB/s covers encode + shard write; warm: \`--input FILE --input FILE\`, the second pass from the two cumulative rates); tiktoken: \`scripts/bench/tokenize_tiktoken.py\`, one \`encode_ordinary(text)\` call (warm: the second of \`--repeat 2\`)"
