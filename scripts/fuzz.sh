#!/usr/bin/env bash
# Fuzzes the parsers of untrusted files with libFuzzer + AddressSanitizer + UBSan (Debian's clang):
# token files (llm.c/npy/raw), GPT-2's encoder.json + vocab.bpe, HellaSwag jsonl/text, --config files,
# safetensors files (checkpoints and Hugging Face weights are safetensors; their checksums and names are
# checked by the unit tests), checkpoint metadata up to the model it builds (claims against tensors), and
# the request bodies `serve` reads (OpenAI's chat and completions JSON).
# Builds tests/fuzz into build-fuzz/ (incremental), writes small valid seed files, replays the committed
# regressions (tests/fuzz/regressions/<target>/), runs each target for N seconds and prints executions
# and findings. Exit status 1 on any finding (crash, sanitizer report, leak, timeout), 0 otherwise;
# 77 when no clang with libFuzzer is installed (then nothing ran).
#
# usage: scripts/fuzz.sh [--seconds N] [TARGET...]
#        (targets: token_file gpt2_vocab hellaswag config_file api_request safetensors checkpoint; the last two need .venv's torch)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
seconds=30
targets=()
while (( $# )); do
  case "$1" in
    --seconds) [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds needs a whole number" >&2; exit 2; }
               seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1'" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
(( ${#targets[@]} )) || targets=(token_file gpt2_vocab hellaswag config_file api_request safetensors checkpoint)

clang=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z $clang ]] || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: no clang with libFuzzer (apt-get install clang-14): fuzzing skipped"
  exit 77
fi
build="$repo/build-fuzz"
# The safetensors target links the venv's LibTorch; without one it is left out.
torch_dir=$("$repo/.venv/bin/python" -c 'import torch.utils, os; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))' 2>/dev/null || true)
if [[ ! -f $build/CMakeCache.txt ]]; then
  CXX=$clang cmake -S "$repo/tests/fuzz" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${torch_dir:+-DTorch_DIR="$torch_dir"} \
    ${torch_dir:+-DCUDAToolkit_ROOT=/usr/local/cuda} >"$build.configure.log" 2>&1 ||
    { tail -20 "$build.configure.log" >&2; echo "fuzz.sh: configuring build-fuzz failed" >&2; exit 1; }
fi
cmake --build "$build" -j "${MYGPT_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu)}" >/dev/null || { echo "fuzz.sh: building the fuzzers failed" >&2; exit 1; }

# --- seeds: small valid inputs of each kind (the first byte of some targets picks a file name) ---------
seeds="$build/seeds"
rm -rf "$seeds" && mkdir -p "$seeds"/{token_file,gpt2_vocab,hellaswag,config_file,api_request,safetensors,checkpoint}
python3 - "$seeds" <<'PY'
import json, struct, sys
root = sys.argv[1]
def put(target, name, data):
    open(f"{root}/{target}/{name}", "wb").write(data)
ids = [(i * 7) % 60 for i in range(40)]
llmc = struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)) + struct.pack(f"<{len(ids)}H", *ids)
header = "{'descr': '<u2', 'fortran_order': False, 'shape': (40,), }"
header += " " * (118 - len(header)) + "\n"
npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack("<40H", *ids)
put("token_file", "llmc", b"\x00" + llmc)
put("token_file", "npy", b"\x01" + npy)
put("token_file", "raw", b"\x02" + struct.pack("<40H", *ids))
encoder = {chr(c): i for i, c in enumerate(range(ord("!"), ord("~") + 1))}
encoder.update({"\u0120": len(encoder), "he": len(encoder) + 1, "<|endoftext|>": len(encoder) + 2})
put("gpt2_vocab", "small", json.dumps(encoder).encode() + b"\x00" + b"#version: 0.2\nh e\n")
example = {"ctx": "A man sits", "endings": ["a", "b", "c", "d"], "label": 2}
put("hellaswag", "jsonl", b"\x01" + (json.dumps(example) + "\n").encode() * 2)
put("hellaswag", "text", b"\x00" + b"A man sits\na\nb\nc\nd\n2\n")
header = json.dumps({"__metadata__": {"k": "v"},
                     "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                     "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
                     "c": {"dtype": "BOOL", "shape": [2], "data_offsets": [22, 24]}}).encode()
put("safetensors", "small", struct.pack("<Q", len(header)) + header + bytes(range(22)) + b"\x00\x01")
# A checkpoint's metadata (NUL-separated) describing the fuzz target's fixed tensors.
model = "vocab_size=16\nblock_size=8\nn_layer=1\nn_head=2\nn_embd=8\ndropout=0\nbias=1\n"
put("checkpoint", "tiny", "\0".join(["format=mygpt-ddp checkpoint", "format_version=3", "model_config=" + model,
                                     "tokenizer_kind=char", "tokenizer_data=abcdefghijklmnop", "step=1",
                                     "run_config=steps=1\n"]).encode())
chat = {"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
        "max_tokens": 5, "temperature": 0.5, "top_p": 0.9, "top_k": 3, "seed": 1, "stop": ["a", "b"], "n": 1,
        "stream": True, "stream_options": {"include_usage": True}}
put("api_request", "chat", b"\x00" + json.dumps(chat).encode())
put("api_request", "completion", b"\x01" + json.dumps({"model": "m", "prompt": ["p"], "stop": "x", "echo": False}).encode())
put("config_file", "good", b"steps = 5\nlr = 0.01\nflag = true\nmode = second\ninputs = a\ninputs = b\nsize = 3\n# note\n")
PY

status=0
printf '%-12s %12s %8s  %s\n' target executions seconds findings
for target in "${targets[@]}"; do
  binary="$build/fuzz_$target"
  if [[ ($target == safetensors || $target == checkpoint) && ! -x $binary ]]; then
    printf '%-12s %12s %8s  %s\n' "$target" "-" "-" "skipped: no LibTorch in .venv"
    continue
  fi
  [[ -x $binary ]] || { echo "fuzz.sh: unknown target '$target'" >&2; exit 2; }
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  artifacts="$build/findings/$target/"
  mkdir -p "$artifacts"
  log="$build/$target.log"
  regressions="$repo/tests/fuzz/regressions/$target"
  findings=0
  if [[ -d $regressions ]] && compgen -G "$regressions/*" >/dev/null; then
    "$binary" -runs=0 "$regressions" >"$build/$target.regressions.log" 2>&1 || { findings=1; echo "regression failed: see $build/$target.regressions.log"; }
  fi
  # Leaks count as findings; inputs are small, so 2 s per input is already a hang.
  "$binary" -max_total_time="$seconds" -timeout=2 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "$corpus" "$seeds/$target" >"$log" 2>&1 || findings=1
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  found=$(find "$artifacts" -type f | wc -l)
  (( found > 0 )) && findings=1
  printf '%-12s %12s %8s  %s\n' "$target" "$runs" "$seconds" "$( ((findings)) && echo "FOUND: see $log and $artifacts" || echo none)"
  (( findings )) && status=1
done
exit $status
