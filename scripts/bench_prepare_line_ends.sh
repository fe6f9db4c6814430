#!/usr/bin/env bash
# `mygpt-ddp prepare` (GPT-2 BPE) and `tokenizer train` on one plain-text document of --mb MB with each kind of
# line end: LF (Tiny Shakespeare repeated), the same text with CRLF, and CJK lines (Chinese, Japanese, Korean
# words and punctuation; most lines end and start with a non-ASCII character). A document is read in pieces cut
# at its line ends where the tokenizer restarts (tokenizer/line_cuts.h), so memory stays flat and --threads
# works, whatever the line ends; a text without such places is read whole, on one thread. Per input and
# command: peak RSS and CPU seconds (user + sys; the wall time of a shared machine is no figure).
# MYGPT_BIN=PATH measures another build (an older one, for a before/after).
#
# usage: scripts/bench_prepare_line_ends.sh [--input FILE] [--vocab DIR] [--mb 50] [--threads 2] [--no-append]
set -euo pipefail
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench/common.sh"

bench_options input="$repo/../shared/data/tinyshakespeare.txt" vocab="$repo/../shared/data/gpt2" mb=50 threads=2 -- "$@"
bench_need_built "$mygpt_bin" "$python"
[[ -f "$input" ]] || bench_die "input file $input is missing"
bench_need_vocab "$vocab"
[[ -x /usr/bin/time ]] || bench_die "/usr/bin/time (GNU time) is needed"
bench_work_dir
binary="$(bench_private_copy "$mygpt_bin")"

"$python" - "$input" "$mb" "$work" <<'PY'
import random, sys
source, mb, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(source, encoding="utf-8").read()
lf = (text * (mb * 1_000_000 // len(text.encode()) + 1)).encode()[: mb * 1_000_000]
lf = lf[: lf.rfind(b"\n") + 1]
open(f"{work}/lf.txt", "wb").write(lf)
open(f"{work}/crlf.txt", "wb").write(lf.replace(b"\n", b"\r\n"))
rng = random.Random(1)
words = ["中文", "汉字", "测试", "你好", "世界", "日本語", "ひらがな", "カタカナ", "한국어", "東京", "京都", "研究", "。", "、",
         "「", "」", "！", "？", "（", "）"]
lines, size = [], 0
while size < mb * 1_000_000:
    line = "".join(rng.choice(words) for _ in range(rng.randint(4, 40))) + "\n"
    lines.append(line)
    size += len(line.encode())
open(f"{work}/cjk.txt", "w", encoding="utf-8").write("".join(lines))
PY
built_at="$(git -C "$(dirname "$mygpt_bin")" log -1 --format=%h 2>/dev/null || echo unknown)"
bench_machine_facts "binary $mygpt_bin (commit $built_at); texts of $mb MB"
export OMP_NUM_THREADS=1

table="$work/table.md"
{
  echo "| input | MB | command | peak RSS | CPU s (user+sys) |"
  echo "|---|---|---|---|---|"
} >"$table"
for name in lf crlf cjk; do
  file="$work/$name.txt"
  mb_file=$(awk -v b="$(wc -c <"$file")" 'BEGIN { printf "%.0f", b / 1e6 }')
  for command in prepare "tokenizer train"; do
    rm -rf "$work/out"
    if [[ $command == prepare ]]; then
      args=(prepare "$file" --vocab "$vocab" --out "$work/out" --threads "$threads" --val-tokens 0 --quiet)
    else
      args=(tokenizer train "$file" --vocab-size 300 --out "$work/out" --threads "$threads" --quiet)
    fi
    /usr/bin/time -f "%M %U %S" -o "$work/time" "$binary" "${args[@]}" >"$work/run.log" 2>&1 ||
      { cat "$work/run.log" >&2; bench_die "$command on $name.txt failed"; }
    read -r kb user sys <"$work/time"
    awk -v n="$name.txt" -v mb="$mb_file" -v c="$command" -v kb="$kb" -v u="$user" -v s="$sys" \
      'BEGIN { printf "| %s | %s | %s | %.0f MiB | %.1f |\n", n, mb, c, kb / 1024, u + s }' >>"$table"
  done
done
bench_report "prepare and tokenizer train on LF, CRLF and CJK text" "$table" \
  "binary: $mygpt_bin (commit $built_at)" \
  "One document per input; prepare with GPT-2's BPE, tokenizer train with --vocab-size 300, both --threads $threads."
