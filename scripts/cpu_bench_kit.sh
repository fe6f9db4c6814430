#!/usr/bin/env bash
# Packs what gpu_check.sh's cpu phase needs on a lent GPU node beside the GPU kit: the node has torch but
# no transformers and no network, and its host CPU (an Intel Xeon) is the only Intel CPU this project is
# lent. The tarball holds pydeps/ (transformers and the packages it imports, at the versions of this
# checkout's .venv, as wheels for the node's Python, unpacked) and data/ (GPT-2's vocabulary and Tiny
# Shakespeare from ../shared/data, which the checkout does not carry).
#
# usage: scripts/cpu_bench_kit.sh [--python-version 3.12] [--out DIR]   (default .carry/cpu-bench)
# Writes DIR/cpu-bench.tar.xz (about 35 MiB; a device call carries at most 64 MiB in all, the GPU kit's
# 8 included). On the node, from the checkout's root:
#   tar -xJf .carry/cpu-bench/cpu-bench.tar.xz -C /tmp && scripts/gpu_check.sh --cpu-bench /tmp/cpu-bench ... cpu
# The node's Python was 3.12 on every lent node so far (evidence/gpu-runs/*: /opt/torch/.venv/lib/python3.12).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$repo/.carry/cpu-bench" python_version=3.12
usage_error() { echo "cpu_bench_kit.sh: $*" >&2; exit 2; }
die() { echo "cpu_bench_kit.sh: $*" >&2; exit 1; }
while (( $# )); do
  case "$1" in
    --out) [[ $# -ge 2 && -n $2 ]] || usage_error "--out needs a folder"; out=$2; shift 2 ;;
    --python-version) [[ $# -ge 2 && $2 =~ ^3\.[0-9]+$ ]] || usage_error "--python-version takes 3.N, not '${2:-}'"
      python_version=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) usage_error "unknown argument '$1' (see --help)" ;;
  esac
done
venv_python="$repo/.venv/bin/python"
[[ -x $venv_python ]] || die "$venv_python is missing: run scripts/setup.sh first"
data="$repo/../shared/data"
for f in gpt2/encoder.json gpt2/vocab.bpe tinyshakespeare.txt; do
  [[ -f $data/$f ]] || die "$data/$f is missing (the benchmarks read it)"
done

# What transformers imports (its requirements and huggingface_hub's), without its command line's extras
# (typer, rich, pygments, pydantic) or hf_xet, which a local benchmark never uses: 35 MiB instead of 80.
packages=(transformers tokenizers safetensors huggingface_hub numpy packaging pyyaml regex tqdm filelock fsspec
          typing_extensions httpx2 httpcore2 anyio h11 idna truststore annotated_doc)
pins=()
for p in "${packages[@]}"; do
  v=$("$venv_python" -c 'import importlib.metadata, sys; print(importlib.metadata.version(sys.argv[1]))' "$p" 2>/dev/null) ||
    die "$p is not installed in $venv_python (scripts/setup.sh installs transformers and what it needs)"
  pins+=("$p==$v")
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/cpu-bench/data/gpt2"
"$venv_python" -m pip install --quiet --no-deps --only-binary=:all: --target "$stage/cpu-bench/pydeps" \
  --python-version "$python_version" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  "${pins[@]}" || die "pip could not fetch the wheels for Python $python_version: ${pins[*]}"
rm -rf "$stage/cpu-bench/pydeps/bin"
cp "$data/gpt2/encoder.json" "$data/gpt2/vocab.bpe" "$stage/cpu-bench/data/gpt2/"
cp "$data/tinyshakespeare.txt" "$stage/cpu-bench/data/"
printf 'cpu-bench kit for Python %s, built %s\n%s\n' "$python_version" "$(date -u '+%Y-%m-%d %H:%M UTC')" "${pins[*]}" \
  >"$stage/cpu-bench/KIT.txt"
mkdir -p "$out"
tar -C "$stage" -cf - cpu-bench | xz -T0 -6 >"$out/cpu-bench.tar.xz.new"
mv -f "$out/cpu-bench.tar.xz.new" "$out/cpu-bench.tar.xz"
echo "cpu_bench_kit: $out/cpu-bench.tar.xz ($(du -sh "$out/cpu-bench.tar.xz" | cut -f1))"
cat "$stage/cpu-bench/KIT.txt"
