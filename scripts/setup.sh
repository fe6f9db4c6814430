#!/usr/bin/env bash
# Installs everything mygpt-ddp needs and builds it into build/. Idempotent: every step checks
# what is already there and reuses it, so a second run only rebuilds what changed.
#
# Environment knobs:
#   MYGPT_TORCH_VERSION   pinned torch wheel (default below); LibTorch comes from its share/cmake/Torch
#   Torch_DIR / CMAKE_PREFIX_PATH   an existing LibTorch: skips the virtualenv's torch entirely
#   MYGPT_BUILD_TYPE      CMake build type (default Release)
#   MYGPT_JOBS            parallel compile jobs (default: number of cores)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
torch_version=${MYGPT_TORCH_VERSION:-2.11.0}
build_type=${MYGPT_BUILD_TYPE:-Release}
jobs=${MYGPT_JOBS:-$(nproc)}
venv="$repo/.venv"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# --- system packages (Debian): compiler, CMake, Open MPI, Boost.Program_options, GoogleTest, PCRE2, JSON
apt_packages=(build-essential cmake libopenmpi-dev openmpi-bin libboost-program-options-dev
              libgtest-dev libpcre2-dev nlohmann-json3-dev)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || die "missing packages (${missing[*]}) and no apt-get to install them"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  say "installing ${missing[*]}"
  $sudo apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
fi

# --- LibTorch: a user-provided one wins; otherwise the pinned PyPI wheel in a project-local venv
torch_prefix="${Torch_DIR:-}"
if [ -z "$torch_prefix" ] && [ -n "${CMAKE_PREFIX_PATH:-}" ] && ls "${CMAKE_PREFIX_PATH%%:*}"/*/Torch/TorchConfig.cmake >/dev/null 2>&1; then
  torch_prefix="${CMAKE_PREFIX_PATH%%:*}"
fi
if [ -z "$torch_prefix" ]; then
  python=${PYTHON:-python3}
  command -v "$python" >/dev/null || die "python3 is needed to install the torch wheel (or set Torch_DIR)"
  if [ ! -x "$venv/bin/python" ]; then
    say "creating virtualenv $venv"
    "$python" -m venv "$venv" || die "could not create a virtualenv (apt-get install python3-venv)"
  fi
  have=$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
  if [ "$have" != "$torch_version" ]; then
    say "installing torch==$torch_version (LibTorch and its CUDA libraries; a few GB, once)"
    "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$venv/bin/python" -m pip install -q "torch==$torch_version" numpy || die "pip install torch==$torch_version failed"
  fi
  # transformers + safetensors: the reference the Hugging Face weight tests compare with (they skip without it).
  if ! "$venv/bin/python" -c 'import transformers, safetensors' >/dev/null 2>&1; then
    say "installing transformers and safetensors (reference for the Hugging Face weight tests)"
    "$venv/bin/python" -m pip install -q transformers safetensors \
      || say "warning: pip install transformers safetensors failed; the transformers comparison tests will skip"
  fi
  # matplotlib: scripts/plot_run.py draws a run's curves (its test skips without it).
  if ! "$venv/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
    say "installing matplotlib (scripts/plot_run.py)"
    "$venv/bin/python" -m pip install -q matplotlib || say "warning: pip install matplotlib failed; plots are off"
  fi
  torch_prefix=$("$venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
fi
say "LibTorch from $torch_prefix"

# --- configure + build (CMake reuses its cache; only changed files recompile)
cmake_args=(-S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE="$build_type" -DCMAKE_PREFIX_PATH="$torch_prefix")
[ -d /usr/local/cuda ] && cmake_args+=(-DCUDAToolkit_ROOT=/usr/local/cuda)
if [ ! -f "$repo/build/CMakeCache.txt" ] || [ "$repo/CMakeLists.txt" -nt "$repo/build/CMakeCache.txt" ]; then
  say "configuring"
  cmake "${cmake_args[@]}" >"$repo/build.configure.log" 2>&1 || { tail -30 "$repo/build.configure.log" >&2; die "cmake configure failed (full log: build.configure.log)"; }
  grep '^-- mygpt-ddp' "$repo/build.configure.log" || true
fi
say "building with $jobs jobs"
cmake --build "$repo/build" -j "$jobs" || die "build failed"
say "ready: $repo/build/mygpt-ddp"
