#!/usr/bin/env bash
# The macOS build, proven without a Mac: compiles every translation unit that a Mac build compiles
# (tests and fuzz targets included) for arm64-apple-macos, syntax only, against what a Mac has:
#   - libc++ and the macOS SDK's C headers as the ziglang PyPI package's clang ships them (no libstdc++,
#     no glibc: st_mtim, /proc-only calls, <malloc.h> and friends fail here as they would on a Mac);
#   - the macOS arm64 torch wheel's own headers (torch==2.11.0, macosx_11_0_arm64: no CUDA, with MPS);
#   - Boost as Homebrew has it (1.90, from the cmeel-boost wheel: Debian's 1.74 does not compile under
#     libc++'s C++20, which dropped std::unary_function);
#   - nlohmann-json, GoogleTest, PCRE2, utf8proc and Open MPI's mpi.h from Debian (plain, portable headers);
#   - Arrow's and Parquet's headers from the macOS arm64 pyarrow wheel (as Homebrew's apache-arrow has them),
#     for dataloader/parquet_text_reader.cpp.
# The downloads (~250 MB, four PyPI wheels) and the precompiled torch/torch.h are kept in
# $MYGPT_MAC_CHECK_CACHE (default ~/.cache/mygpt-ddp/mac-check); later runs reuse them.
#
#   scripts/mac_cross_check.sh            every translation unit; exit 1 on any error
#   scripts/mac_cross_check.sh FILE...    just these files (tests/mac_cross_check_test.sh plants one)
# Exit 0 all compiled, 1 a compile error (each failing file and its first errors printed), 77 the
# toolchain could not be downloaded (one line says why: then nothing was checked).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${MYGPT_MAC_CHECK_CACHE:-$HOME/.cache/mygpt-ddp/mac-check}
zig_version=0.17.1
torch_version=2.11.0
boost_version=1.90.0
pyarrow_version=26.0.1
wheel_platform=macosx_11_0_arm64
say() { printf '[mac-check] %s\n' "$*"; }
cpus() { getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2; }
jobs=${MYGPT_JOBS:-$(cpus)}

python=""
for p in "$repo/.venv/bin/python" python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -m pip --version >/dev/null 2>&1; then python=$p; break; fi
done
[[ -n $python ]] || { say "skipped: no python with pip to download the macOS toolchain wheels"; exit 77; }

# fetch_wheel NAME SPEC PLATFORM-ARGS...: downloads SPEC into $cache/dl once; its path in $wheel. (Not
# in a $(...): its exit 77 must end the script.)
fetch_wheel() {
  local name=$1 spec=$2 whl
  shift 2
  whl=$(ls "$cache/dl/$name"-*.whl 2>/dev/null | head -n 1 || true)
  if [[ -z $whl ]]; then
    mkdir -p "$cache/dl"
    if ! "$python" -m pip download -q --no-deps --only-binary=:all: "$@" -d "$cache/dl" "$spec" >"$cache/dl/$name.log" 2>&1; then
      say "skipped: could not download $spec from PyPI (no network? see $cache/dl/$name.log)"
      exit 77
    fi
    whl=$(ls "$cache/dl/$name"-*.whl | head -n 1)
  fi
  wheel=$whl
}

# unpack WHEEL DEST PREFIX: the wheel's members under PREFIX into DEST (whole or not at all).
unpack() {
  local whl=$1 dest=$2 prefix=$3
  [[ -d $dest ]] && return 0
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  "$python" - "$whl" "$dest.tmp" "$prefix" <<'PY'
import os, sys, zipfile
whl, dest, prefix = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        if info.filename.startswith(prefix):
            z.extract(info, dest)
            mode = info.external_attr >> 16
            if mode & 0o111:
                os.chmod(os.path.join(dest, info.filename), 0o755)
PY
  mv "$dest.tmp" "$dest"
}

t0=$SECONDS
fetch_wheel ziglang "ziglang==$zig_version"
unpack "$wheel" "$cache/zig-$zig_version" ziglang/
fetch_wheel torch "torch==$torch_version" --platform "$wheel_platform" --python-version 3.12
unpack "$wheel" "$cache/torch-$torch_version" torch/include/
fetch_wheel cmeel_boost "cmeel-boost==$boost_version" --platform "$wheel_platform" --python-version 3.12
unpack "$wheel" "$cache/boost-$boost_version" cmeel.prefix/include/boost/
fetch_wheel pyarrow "pyarrow==$pyarrow_version" --platform macosx_12_0_arm64 --python-version 3.12
unpack "$wheel" "$cache/pyarrow-$pyarrow_version" pyarrow/include/
zl="$cache/zig-$zig_version/ziglang"
torch_inc="$cache/torch-$torch_version/torch/include"
export ZIG_GLOBAL_CACHE_DIR="$cache/zig-cache" ZIG_LOCAL_CACHE_DIR="$cache/zig-cache"

# Debian's portable headers, one folder each, so that nothing else of /usr/include (glibc) is seen.
others="$cache/debian-headers"
mkdir -p "$others"
for h in /usr/include/nlohmann /usr/include/gtest /usr/include/gmock /usr/include/pcre2.h /usr/include/utf8proc.h /usr/include/yaml-cpp; do
  [[ -e $h ]] && ln -sfn "$h" "$others/${h##*/}"
done
mpi_inc=$(ls -d /usr/lib/*/openmpi/include 2>/dev/null | head -n 1 || true)
for h in nlohmann gtest pcre2.h utf8proc.h yaml-cpp; do
  [[ -e $others/$h ]] || { say "error: /usr/include/$h is missing (scripts/setup.sh installs it)"; exit 1; }
done
[[ -n $mpi_inc ]] || { say "error: Open MPI's headers are missing (scripts/setup.sh installs libopenmpi-dev)"; exit 1; }

# The generated header a Mac's CMake would write (cmake/build_config.h.in).
gen="$cache/generated"
mkdir -p "$gen/mygpt"
version=$(sed -n 's/^project(mygpt-ddp .*VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
sed "s/@PROJECT_VERSION@/$version/" "$repo/cmake/build_config.h.in" >"$gen/mygpt/build_config.h.new"
cmp -s "$gen/mygpt/build_config.h.new" "$gen/mygpt/build_config.h" 2>/dev/null ||
  mv "$gen/mygpt/build_config.h.new" "$gen/mygpt/build_config.h"
rm -f "$gen/mygpt/build_config.h.new"
# The chat page's header, as serving/CMakeLists.txt's configure_file writes it (the page inside the template).
python3 -c 'import sys; t = open(sys.argv[1]).read(); p = open(sys.argv[2]).read()
open(sys.argv[3], "w").write(t.replace("@MYGPT_CHAT_PAGE@", p))' \
  "$repo/serving/chat_page.h.in" "$repo/serving/chat_page.html" "$gen/mygpt/chat_page.h"

# zig bundles the macOS SDK's <math.h>, which (with C++20's modules feature on) asks <float.h> for INFINITY
# and NAN alone (__need_infinity_nan), with LLVM's libc++, whose <float.h> include guard then hides either
# that part or the rest (FLT_MAX) from whatever includes it next. Apple's own SDK and libc++ go together;
# here the partial request goes straight to clang's builtin <float.h>, which serves it without its guard.
float_shim="$cache/float-shim"
mkdir -p "$float_shim"
cat >"$float_shim/float.h.new" <<SHIM
/* Written by scripts/mac_cross_check.sh (see there). */
#if defined(__need_infinity_nan)
#include "$zl/lib/include/float.h"
#else
#include_next <float.h>
#endif
SHIM
mv "$float_shim/float.h.new" "$float_shim/float.h"

# Clang's own driver (zig's `c++` wrapper cannot do -fsyntax-only), with zig's libc++ and macOS headers
# and the libc++ configuration zig itself passes for this target (`zig c++ -target aarch64-macos -###`).
flags=(--driver-mode=g++ -target arm64-apple-macosx11.0 -std=c++20 -Wall -Wextra -fsyntax-only
  -nostdinc -nostdinc++ -isystem "$float_shim"
  -isystem "$zl/lib/libcxx/include" -isystem "$zl/lib/libcxxabi/include" -isystem "$zl/lib/include"
  -isystem "$zl/lib/libc/include/any-darwin-any"
  -D_LIBCPP_ABI_VERSION=1 -D_LIBCPP_ABI_NAMESPACE=__1 -D_LIBCPP_HAS_THREADS=1 -D_LIBCPP_HAS_MONOTONIC_CLOCK
  -D_LIBCPP_HAS_TERMINAL -D_LIBCPP_HAS_MUSL_LIBC=0 -D_LIBCPP_HAS_VENDOR_AVAILABILITY_ANNOTATIONS=0
  -D_LIBCPP_HAS_FILESYSTEM=1 -D_LIBCPP_HAS_RANDOM_DEVICE -D_LIBCPP_HAS_LOCALIZATION -D_LIBCPP_HAS_UNICODE
  -D_LIBCPP_HAS_WIDE_CHARACTERS -D_LIBCPP_HAS_NO_STD_MODULES -D_LIBCPP_PSTL_BACKEND_SERIAL
  -D_LIBCPP_HARDENING_MODE=_LIBCPP_HARDENING_MODE_NONE
  -D_LIBCPP_ASSERTION_SEMANTIC_DEFAULT=_LIBCPP_ASSERTION_SEMANTIC_IGNORE
  -isystem "$torch_inc" -isystem "$torch_inc/torch/csrc/api/include"
  -isystem "$cache/boost-$boost_version/cmeel.prefix/include" -isystem "$others" -isystem "$mpi_inc"
  -isystem "$cache/pyarrow-$pyarrow_version/pyarrow/include"
  -I "$repo" -I "$gen"
  # What the CMake targets define (distributed/, tests/); harmless for the rest.
  -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 '-DMYGPT_SHARED_DATA_DIR="/shared/data"'
  '-DMYGPT_TORCH_PYTHON="python3"' '-DMYGPT_HF_REFERENCE_SCRIPT="hf_reference.py"'
  '-DMYGPT_MUON_REFERENCE_SCRIPT="muon_reference.py"')

# The flags as a response file (clang's @FILE, GNU quoting), so that xargs passes just the file.
rsp="$cache/flags.rsp"
for a in "${flags[@]}"; do printf '%s\n' "$a" | sed 's/[\\"'"'"' ]/\\&/g'; done >"$rsp.new"
mv "$rsp.new" "$rsp"

# The precompiled torch/torch.h, as CMake's target_precompile_headers gives every room on a Mac too; named
# after the flags it was made with (a PCH must match them). Its templates are instantiated once, in it
# (as CMake does for clang): else every file would instantiate them again (2-3 s more a file).
pch="$cache/torch-$torch_version-$(cksum <"$rsp" | cut -d' ' -f1).pch"
if [[ ! -f $pch || ! -f $pch.h ]]; then  # (a PCH of an older version of this script shares one header: made again)
  say "precompiling torch/torch.h for arm64-apple-macos (once)"
  t=$SECONDS
  # Its own header beside it, written once: a PCH records its header's mtime, and a header shared by the
  # PCHs of several checkouts (their flags differ in include paths) would be rewritten by each, making the
  # others unusable ("has been modified since the precompiled header was built").
  printf '#include <torch/torch.h>\n' >"$pch.h"
  grep -vx -- -fsyntax-only "$rsp" >"$pch.rsp"
  "$zl/zig" clang "@$pch.rsp" -fpch-instantiate-templates -x c++-header "$pch.h" -o "$pch.tmp" &&
    mv "$pch.tmp" "$pch" || { say "error: torch/torch.h does not compile for macOS"; exit 1; }
  say "precompiled in $((SECONDS - t)) s"
fi

# --- which files: every .cpp of the rooms, tests and benchmarks, less those only CUDA, NCCL or Gloo
# builds compile (a Mac has none of them: CMakeLists.txt compiles their *_unavailable.cpp instead).
cuda_only='^(model/(lm_loss|layer_norm)_cuda\.cpp|distributed/(nccl_communicator|nccl_watchdog|gloo_communicator)\.cpp|launcher/cuda_probe\.cpp|trainer/cuda_graph_step\.cpp|tests/cuda/.*)$'
# SKIP_PRECOMPILE_HEADERS in model/ and dataloader/CMakeLists.txt
no_pch='^(model/(gelu_tanh_cpu|lm_loss_cpu)_kernels\.cpp|dataloader/parquet_text_reader\.cpp)$'
files=()
if (( $# )); then
  for f in "$@"; do
    [[ -f $f ]] || { say "error: $f is not a file"; exit 2; }
    files+=("$(cd "$(dirname "$f")" && pwd)/${f##*/}")
  done
else
  while IFS= read -r f; do
    [[ $f =~ $cuda_only ]] || files+=("$repo/$f")
  done < <(cd "$repo" && git ls-files --cached --others --exclude-standard -- '*.cpp' | grep -E '^(common|tokenizer|model|dataloader|eval|distributed|trainer|inference|serving|launcher|tests|scripts/bench)/')
fi
say "compiling ${#files[@]} translation units for arm64-apple-macos with $jobs jobs"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export MAC_CHECK_ZIG="$zl/zig" MAC_CHECK_RSP="$rsp" MAC_CHECK_PCH="$pch" MAC_CHECK_LOGS="$logs"
export MAC_CHECK_REPO="$repo" MAC_CHECK_NO_PCH="$no_pch"
# One file: its compiler output in $logs (named after its path), and an .err marker when it failed.
check_one() {
  local f=$1 rel log
  rel=${f#"$MAC_CHECK_REPO"/}
  log="$MAC_CHECK_LOGS/${rel//\//__}.log"
  if [[ $rel =~ $MAC_CHECK_NO_PCH ]]; then
    "$MAC_CHECK_ZIG" clang "@$MAC_CHECK_RSP" "$f" >"$log" 2>&1 || : >"${log%.log}.err"
  else
    "$MAC_CHECK_ZIG" clang "@$MAC_CHECK_RSP" -include-pch "$MAC_CHECK_PCH" "$f" >"$log" 2>&1 || : >"${log%.log}.err"
  fi
}
export -f check_one
t=$SECONDS
printf '%s\0' "${files[@]}" | xargs -0 -n 1 -P "$jobs" bash -c 'check_one "$1"' _

failed=0
for err in "$logs"/*.err; do
  [[ -e $err ]] || continue
  failed=$((failed + 1))
  log=${err%.err}.log
  name=${log##*/}; name=${name%.log}
  say "FAILED: ${name//__//}"
  grep -E 'error:' "$log" | head -n 5 | sed 's/^/    /'
done
# Warnings do not fail the check (the Linux build holds the code to -Wall -Wextra); the first few are shown.
warnings=$(cat "$logs"/*.log 2>/dev/null | grep -c 'warning:' || true)
if (( warnings > 0 )); then
  say "$warnings warning(s) for macOS:"
  cat "$logs"/*.log | grep 'warning:' | head -n 10 | sed 's/^/    /'
fi
say "${#files[@]} translation units, $failed failed; compile $((SECONDS - t)) s, total $((SECONDS - t0)) s"
(( failed == 0 ))
