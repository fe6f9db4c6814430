#!/usr/bin/env bash
# Packs a prebuilt GPU kit, so that a GPU machine reached briefly and without network (a rented node, a
# cluster's debug partition; docs/GPU_SESSION.md) starts testing within a minute instead of building: the CUDA build's binary and CUDA test
# binary (stripped), the CTest definitions of the `cuda` tests, the scripts those tests run, and the
# runtime libraries a node with only python3 + torch lacks (Open MPI with its plugins, help texts and
# mpirun; PMIx; hwloc; libevent; Boost.Program_options; PCRE2; utf8proc; ...: whatever ldd lists that the
# node does not provide). The kit holds no torch, CUDA or NCCL: its gpu_env.sh finds the node's torch (scripts/torch_python.sh) and puts that torch's libraries, and the
# CUDA and NCCL libraries beside it (site-packages/nvidia/*/lib), on the library path, after checking
# that the node's torch is the version the kit was built against and that every library resolves.
#
# usage: scripts/gpu_kit.sh [--out DIR]     (default .carry/gpu-kit; .carry/ is git-ignored)
# Writes DIR/gpu-kit.tar.gz, the one file to carry there (the kit's tree is staged in
# build/gpu-kit). On the node, from the checkout's root:
#   tar -xzf .carry/gpu-kit/gpu-kit.tar.gz -C /tmp && scripts/gpu_check.sh --kit /tmp/gpu-kit
# Builds (only) the two targets first, in build/, which must be configured with a CUDA LibTorch.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$repo/.carry/gpu-kit"
die() { echo "gpu_kit.sh: $*" >&2; exit 1; }
while (( $# )); do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { echo "gpu_kit.sh: --out needs a folder" >&2; exit 2; }; out=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "gpu_kit.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
build="$repo/build"
cache="$build/CMakeCache.txt"
[[ -f $cache ]] || die "build/ is not configured: run scripts/setup.sh first"
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -n 1; }
jobs=${MYGPT_JOBS:-$(nproc)}
cmake --build "$build" -j "$jobs" --target gpu_check_binaries >/dev/null || die "building the binary and the CUDA tests failed"
bin="$build/mygpt-ddp"
tests_bins=()
for f in "$build"/tests/mygpt_cuda*; do [[ -x $f && -f $f ]] && tests_bins+=("$f"); done
(( ${#tests_bins[@]} )) || die "no CUDA test executables (build/tests/mygpt_cuda*)"
linked=$(ldd "$bin")  # captured: grep -q ending a pipe early would fail it under pipefail
grep -q 'libtorch_cuda' <<<"$linked" || die "$bin is not linked with CUDA (build/ was configured with a CPU LibTorch)"
grep -q 'libnccl' <<<"$linked" || die "$bin has no NCCL backend (nccl.h was not found at configure time)"

# Libraries the node provides: its torch with CUDA and NCCL beside it (pip wheels), the CUDA toolkit, the
# driver, and the C/C++ runtime (a node's own is newer than ours; shipping ours could break its torch).
node_provides='/(torch|nvidia)/|/usr/local/cuda|/(libc|libm|libdl|libpthread|librt|libutil|libstdc\+\+|libgcc_s|libcuda|libnvidia-[a-z-]*)\.so|/ld-linux'
# Hardware transports a one-node job does not use (shared memory and TCP are enough) and whose libraries
# weigh tens of MiB (libfabric, UCX, verbs, PSM, netlink; hwloc's XML/X11 plugins pull in ICU): plugins
# needing them stay out; Open MPI only loads the plugins it finds.
heavy='/(libucp|libuct|libucs|libucm|libfabric|libibverbs|librdmacm|libpsm[^/]*|libnl-[^/]*|libxml2|libicu[^/]*|libX11|libxcb|libcuda)\.so'
ma=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
lib="/usr/lib/$ma"

# closure FILE...: every library FILE needs (ldd's resolved paths), one per line.
closure() { ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u; }
copy_lib() {  # copy_lib PATH: into the kit under its place below /usr/lib/<multiarch>
  local path=$1 rel
  case "$path" in
    */openmpi/lib/*) rel="openmpi/lib/${path##*/openmpi/lib/}" ;;
    */pmix2/lib/*) rel="pmix2/lib/${path##*/pmix2/lib/}" ;;
    *) rel=$(basename "$path") ;;
  esac
  mkdir -p "$new/usr/lib/$ma/$(dirname "$rel")"
  cp -L "$path" "$new/usr/lib/$ma/$rel"
}

kit="$build/gpu-kit"
new="$kit.new"
rm -rf "$new"
mkdir -p "$new/bin" "$new/build/tests" "$new/ctest" "$new/usr/bin" "$new/etc" "$new/usr/share" "$new/src"
strip --strip-unneeded -o "$new/build/mygpt-ddp" "$bin"
for f in "${tests_bins[@]}"; do strip --strip-unneeded -o "$new/build/tests/$(basename "$f")" "$f"; done

# Open MPI as Debian lays it out (scripts/setup.sh's env.sh relocates it with OPAL_*/PMIX_* variables).
ompi_plugins=$(ls "$lib"/openmpi/lib/openmpi3/mca_*.so)
pmix_plugins=$(ls "$lib"/pmix2/lib/pmix/*.so 2>/dev/null || true)
kept=()
for plugin in $ompi_plugins $pmix_plugins; do
  if grep -qE "$heavy" <<<"$(closure "$plugin")"; then continue; fi
  kept+=("$plugin")
done
cp -L /usr/bin/orterun "$new/usr/bin/mpirun.openmpi"
ln -s mpirun.openmpi "$new/usr/bin/mpiexec.openmpi"  # one program under both names (the CTest files say mpiexec)
[[ -x /usr/bin/orted ]] && cp -L /usr/bin/orted "$new/usr/bin/orted"
cp -r /etc/openmpi "$new/etc/openmpi"
cp -r /usr/share/openmpi "$new/usr/share/openmpi"
mkdir -p "$new/usr/lib/$ma/pmix2"
[[ -d $lib/pmix2/share ]] && cp -r "$lib/pmix2/share" "$new/usr/lib/$ma/pmix2/share"
for plugin in "${kept[@]}"; do copy_lib "$plugin"; done
closure "$bin" "${tests_bins[@]}" /usr/bin/orterun "${kept[@]}" | grep -vE "$node_provides" | grep -vE "$heavy" |
  while read -r path; do copy_lib "$path"; done
# Open MPI opens a few of its libraries by name at run time (not in any ldd list).
for extra in "$lib"/openmpi/lib/libmca_common_{sm,monitoring,ompio}.so*; do [[ -e $extra ]] && copy_lib "$extra"; done
"$repo/scripts/setup.sh" --write-deps-env "$new" "$ma"

# The CTest definitions of the `cuda` tests, with this machine's paths as placeholders that gpu_env.sh's
# kit_ctest_dir fills in on the node; and the test scripts they run.
python=$(cache_value MYGPT_TORCH_PYTHON)
mpiexec=$(cache_value MPIEXEC_EXECUTABLE)
torchrun=$(cache_value MYGPT_TORCHRUN)
placeholders() { sed -e "s|$python|@PYTHON@|g" ${torchrun:+-e "s|$torchrun|@TORCHRUN@|g"} -e "s|$mpiexec|@KIT@/bin/mpiexec|g" -e "s|$build|@KIT@/build|g" -e "s|$repo|@KIT@/src|g"; }
grep -E 'mygpt_cuda|\[=\[cuda_' "$build/tests/CTestTestfile.cmake" | placeholders >"$new/ctest/CTestTestfile.cmake"
for f in "$build/tests/mygpt_cuda"*"["*.cmake; do placeholders <"$f" >"$new/ctest/$(basename "$f")"; done
ls "$new/ctest/"*_tests.cmake >/dev/null 2>&1 || die "no CUDA tests listed in build/tests (did the discovery step run?)"
# The discovered-tests files are read from the kit's ctest/ folder (the binaries stay in build/tests).
sed -i -E 's#@KIT@/build/tests/(mygpt_cuda[a-z_]*\[)#@KIT@/ctest/\1#g' "$new/ctest/"*
mkdir -p "$new/src/tests/mpi" "$new/src/scripts"
cp -r "$repo/tests/cuda" "$new/src/tests/"
cp "$repo/tests/lib.sh" "$new/src/tests/"
cp "$repo/tests/mpi/compare_runs.py" "$new/src/tests/mpi/"
cp "$repo/scripts/mpi_env.sh" "$repo/scripts/torch_python.sh" "$new/src/scripts/"
cp "$repo/scripts/gpu_kit_env.sh" "$new/gpu_env.sh"

torch_version=$("$python" -c 'import importlib.util, pathlib; d = pathlib.Path(importlib.util.find_spec("torch").submodule_search_locations[0]); exec((d / "version.py").read_text()); print(__version__)')
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$repo" status --porcelain 2>/dev/null | grep -qv '^??' && echo " (with uncommitted changes)" || true)
{
  echo "mygpt-ddp GPU kit of commit $commit$dirty, built $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "torch $torch_version"
  echo "$(mpirun --version 2>&1 | head -n 1)"
  echo "libraries carried: $(find "$new/usr/lib" -name '*.so*' | wc -l); Open MPI plugins kept: ${#kept[@]} of $(echo $ompi_plugins $pmix_plugins | wc -w)"
} >"$new/KIT.txt"
rm -rf "$kit" && mv "$new" "$kit"
mkdir -p "$out"
tar -czf "$out/gpu-kit.tar.gz.new" -C "$build" gpu-kit && mv -f "$out/gpu-kit.tar.gz.new" "$out/gpu-kit.tar.gz"
echo "gpu_kit: $kit ($(du -sh "$kit" | cut -f1)) packed into $out/gpu-kit.tar.gz ($(du -sh "$out/gpu-kit.tar.gz" | cut -f1))"
cat "$kit/KIT.txt"
