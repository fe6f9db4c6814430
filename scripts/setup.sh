#!/usr/bin/env bash
# Installs everything mygpt-ddp needs and builds it into build/. Idempotent: every step checks
# what is already there and reuses it, so a second run only rebuilds what changed.
#
#   scripts/setup.sh                       apt-get the Debian packages (macOS: brew the Homebrew
#                                          formulae), pip the torch wheel, build
#   scripts/setup.sh --deps-only           only the system packages and the choice of python, then stop
#   scripts/setup.sh --download-deps DIR   (connected machine) store the Debian packages that a node
#                                          with only build-essential, cmake and python3 lacks, as .deb
#   scripts/setup.sh --offline DIR         (node without internet) unpack those .deb files into .deps/
#                                          without root or apt, then build against the node's torch;
#                                          later runs (test.sh, demo.sh) see .deps/ and stay offline
#
# Environment knobs:
#   MYGPT_TORCH_VERSION   pinned torch wheel (default below); LibTorch comes from its share/cmake/Torch
#   Torch_DIR / CMAKE_PREFIX_PATH   an existing LibTorch: skips the virtualenv's torch entirely
#   PYTHON                the python (>= 3.10) whose venv gets the torch wheel (default: python3; on macOS
#                         Homebrew's python@3.12, as a stock Mac's python3 is 3.9, too old for torch);
#                         offline mode: the python whose torch to build against
#   MYGPT_BUILD_TYPE      CMake build type (default Release)
#   MYGPT_JOBS            parallel compile jobs (default: number of cores)
#   MYGPT_BUILD_ALL       offline mode builds only what scripts/gpu_check.sh runs (the binary and the
#                         CUDA tests) unless this is 1
#   MYGPT_BUILD_TARGETS   CMake targets to build (default: all; scripts/demo.sh builds only mygpt-ddp)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
torch_version=${MYGPT_TORCH_VERSION:-2.11.0}
build_type=${MYGPT_BUILD_TYPE:-Release}
# The cores: nproc (GNU), getconf (POSIX, Linux and macOS), sysctl (BSD, macOS).
cpu_count() { nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2; }
jobs=${MYGPT_JOBS:-$(cpu_count)}
venv="$repo/.venv"
deps="$repo/.deps"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }
usage_error() { printf 'setup.sh: %s (usage: setup.sh [--deps-only | --download-deps DIR | --offline DIR])\n' "$*" >&2; exit 2; }

# macOS: Homebrew's formulae for the same (Xcode's command line tools give the compiler and libc++; gloo
# has no formula, so a Mac build's CPU ranks talk over MPI); python@3.12 for the torch wheel.
brew_packages=(cmake pkgconf boost open-mpi googletest pcre2 utf8proc nlohmann-json yaml-cpp python@3.12)
apt_packages=(build-essential cmake libopenmpi-dev openmpi-bin libboost-program-options-dev libgloo-dev
              libgtest-dev libpcre2-dev libutf8proc-dev nlohmann-json3-dev libyaml-cpp-dev
              curl bzip2)  # scripts/fetch_test_data.sh: the tests' public files where ../shared/data is absent
# --- offline route: the Debian packages as .deb files, unpacked into .deps/ without root or apt ----
# What a GPU node is assumed to have already: Debian's required packages (any Debian/Ubuntu system),
# build-essential, cmake and python3 (and, for LibTorch, a python with torch or Torch_DIR).
node_baseline=(build-essential cmake python3)
# Pulled in only by the -dev packages' own dependencies and never used by a C++ build with CMake
# (Fortran MPI bindings, autotools, HTML docs) or by a one-node mpirun (ssh): not stored.
build_only='^(gfortran(-[0-9]+)?|libgfortran-[0-9]+-dev|autoconf|automake(-[0-9.]+)?|autotools-dev|m4|libltdl-dev|libtool|libjs-.*|openssh-client)$'
offline_packages=(libopenmpi-dev openmpi-bin libboost-program-options-dev libgloo-dev libgtest-dev libgmock-dev
                  libpcre2-dev libutf8proc-dev nlohmann-json3-dev libyaml-cpp-dev pkgconf)

# apt_plan STATUS_FILE PACKAGE...: name=version of every package `apt-get install` would unpack on a
# system whose dpkg status is STATUS_FILE (a simulation: nothing is installed).
apt_plan() {
  local status=$1 plan
  shift
  plan=$(apt-get -s -o Dir::State::status="$status" -o Debug::NoLocking=1 install --no-install-recommends "$@" 2>&1) ||
    { printf '%s\n' "$plan" | tail -15 >&2; die "apt-get cannot resolve $*"; }
  printf '%s\n' "$plan" | awk '$1 == "Inst" {v = ($3 ~ /^\[/) ? $4 : $3; sub(/^\(/, "", v); print $2 "=" v}'
}

# apt_status_as_installed PACKAGE...: dpkg status entries that make apt treat these as installed. One
# apt-cache call for all of them (one per package took minutes on a loaded machine: each call loads the
# whole package cache); --no-all-versions gives one record per package, the candidate, as a blank-line
# separated paragraph.
apt_status_as_installed() {
  (($#)) || return 0
  apt-cache show --no-all-versions "$@" |
    awk '/^(Package|Version|Architecture|Multi-Arch|Provides):/ {print; held = 1}
         /^$/ && held {print "Status: install ok installed\n"; held = 0}
         END {if (held) print "Status: install ok installed\n"}'
}

download_deps() {
  local dir=$1 work required round
  command -v apt-get >/dev/null || die "--download-deps runs on a connected Debian/Ubuntu machine (it needs apt-get)"
  mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
  work=$(mktemp -d)
  trap "rm -rf '$work'" EXIT  # expanded now: $work is local to this function
  if ! apt-cache show libopenmpi-dev >/dev/null 2>&1; then
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq || die "apt-get update failed"
  fi
  # The node's packages as apt would choose them on an empty system; then what ours add on top.
  : >"$work/empty"
  required=$(apt-cache dumpavail | awk '/^Package:/{p = $2} /^Priority: required/{print p}' | sort -u)
  # shellcheck disable=SC2086  # one word per package
  apt_plan "$work/empty" $required "${node_baseline[@]}" | cut -d= -f1 >"$work/present"
  for round in 1 2 3 4 5; do
    # shellcheck disable=SC2046
    apt_status_as_installed $(sort -u "$work/present") >"$work/status"
    apt_plan "$work/status" "${offline_packages[@]}" |
      awk -F= 'NR == FNR {present[$1] = 1; next} !present[$1]' "$work/present" - >"$work/needed"
    cut -d= -f1 "$work/needed" | grep -E "$build_only" >"$work/skipped" || break
    cat "$work/skipped" >>"$work/present"  # as if present: neither they nor their own needs are stored
  done
  [ -s "$work/needed" ] || die "apt-get planned no packages to store"
  say "downloading $(wc -l <"$work/needed") packages into $dir"
  mkdir "$work/debs"
  local sandbox=(); [ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
  # shellcheck disable=SC2046
  (cd "$work/debs" && apt-get "${sandbox[@]}" download $(cat "$work/needed") >/dev/null) || die "apt-get download failed"
  # The manifest names this download's files: --offline unpacks exactly these, not older ones in DIR.
  (cd "$work/debs" && ls -- *.deb) >"$work/packages.txt"
  mv -f "$work/debs"/*.deb "$work/packages.txt" "$dir/"
  say "stored $(wc -l <"$dir/packages.txt") .deb files (list: packages.txt); $dir holds $(du -sh "$dir" | cut -f1)"
  say "on the node, from the repository root: scripts/setup.sh --offline $dir"
}

# unpack_deps DIR: the .deb files of DIR/packages.txt (else every DIR/*.deb) into .deps/, with env.sh
# (the variables that relocate Open MPI, PMIx and hwloc there) and wrappers in .deps/bin that set them.
unpack_deps() {
  local dir=$1 debs=() f link target multiarch
  [ -d "$dir" ] || usage_error "--offline: $dir is not a directory"
  command -v dpkg-deb >/dev/null || die "--offline needs dpkg-deb (a Debian/Ubuntu node)"
  if [ -f "$dir/packages.txt" ]; then
    while read -r f; do [ -n "$f" ] && debs+=("$dir/$f"); done <"$dir/packages.txt"
  else
    for f in "$dir"/*.deb; do [ -f "$f" ] && debs+=("$f"); done
  fi
  ((${#debs[@]})) || usage_error "--offline: no .deb files in $dir (fill it with setup.sh --download-deps on a connected machine)"
  local new="$deps.new"
  rm -rf "$new" && mkdir -p "$new/bin"
  for f in "${debs[@]}"; do
    [ -f "$f" ] || die "$f (named in $dir/packages.txt) is missing"
    dpkg-deb -x "$f" "$new" || die "cannot unpack $f"
  done
  # Absolute links to files that now live in .deps/ become relative; others (libz.so) keep pointing
  # at the node's own files.
  while IFS= read -r link; do
    target=$(readlink "$link")
    [ -e "$new$target" ] && ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$new$target")" "$link"
  done < <(find "$new" -type l -lname '/*')
  f=$(cd "$new/usr/lib" && ls -d -- */libmpi.so.* 2>/dev/null | head -n 1) || true
  [ -n "$f" ] || die "$dir holds no Open MPI library (libopenmpi3)"
  multiarch=${f%%/*}
  write_deps_env "$new" "$multiarch"
  rm -rf "$deps" && mv "$new" "$deps"
  say "unpacked ${#debs[@]} packages into $deps ($(du -sh "$deps" | cut -f1))"
}

# write_deps_env PREFIX MULTIARCH: PREFIX/env.sh and the wrappers PREFIX/bin/{mpirun,mpiexec,mpicc,...}.
write_deps_env() {
  local prefix=$1 ma=$2 pkglib pmix name
  pkglib=$(cd "$prefix/usr/lib/$ma/openmpi/lib" && dirname "$(ls -- */mca_*.so | head -n 1)")
  pmix=$(cd "$prefix/usr/lib/$ma" && ls -d -- pmix* 2>/dev/null | head -n 1) || true
  cat >"$prefix/env.sh" <<ENV
# Written by scripts/setup.sh --offline; sourced by scripts/mpi_env.sh and by the wrappers in bin/.
# The Debian packages here were built for /usr: these variables tell Open MPI, PMIx and hwloc where
# their plugins, help texts and default parameters are now.
mygpt_deps=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
mygpt_deps_lib="\$mygpt_deps/usr/lib/$ma"
case ":\$PATH:" in *":\$mygpt_deps/bin:"*) ;; *) export PATH="\$mygpt_deps/bin:\$PATH" ;; esac
case ":\${LD_LIBRARY_PATH:-}:" in
  *":\$mygpt_deps_lib:"*) ;;
  *) export LD_LIBRARY_PATH="\$mygpt_deps_lib:\$mygpt_deps_lib/openmpi/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" ;;
esac
export OPAL_PREFIX="\$mygpt_deps/usr" OPAL_EXEC_PREFIX="\$mygpt_deps/usr" OPAL_BINDIR="\$mygpt_deps/usr/bin"
export OPAL_LIBDIR="\$mygpt_deps_lib/openmpi/lib" OPAL_INCLUDEDIR="\$mygpt_deps_lib/openmpi/include"
export OPAL_PKGLIBDIR="\$mygpt_deps_lib/openmpi/lib/$pkglib"
export OPAL_DATAROOTDIR="\$mygpt_deps/usr/share" OPAL_DATADIR="\$mygpt_deps/usr/share"
export OPAL_PKGDATADIR="\$mygpt_deps/usr/share/openmpi" OPAL_SYSCONFDIR="\$mygpt_deps/etc/openmpi"
export HWLOC_PLUGINS_PATH="\$mygpt_deps_lib/hwloc"
# Open MPI's launcher component will not load without an ssh or rsh on the PATH, even for ranks on this
# node, which is all it starts then ("false" is never called for them); across nodes it needs ssh, or
# srun under Slurm.
command -v ssh >/dev/null 2>&1 || command -v rsh >/dev/null 2>&1 || export OMPI_MCA_plm_rsh_agent=false
# Plugins for hardware this node lacks (InfiniPath PSM, netlink) cannot load without their libraries;
# Open MPI ignores them either way, but would print a line per rank saying so.
export OMPI_MCA_mca_base_component_show_load_errors=0
ENV
  if [ -n "$pmix" ]; then
    cat >>"$prefix/env.sh" <<ENV
export PMIX_PREFIX="\$mygpt_deps_lib/$pmix" PMIX_EXEC_PREFIX="\$mygpt_deps_lib/$pmix"
export PMIX_LIBDIR="\$mygpt_deps_lib/$pmix/lib" PMIX_PKGLIBDIR="\$mygpt_deps_lib/$pmix/lib/pmix"
export PMIX_DATADIR="\$mygpt_deps_lib/$pmix/share" PMIX_PKGDATADIR="\$mygpt_deps_lib/$pmix/share/pmix"
ENV
  fi
  # Debian reaches these through /etc/alternatives, which dpkg-deb -x does not make.
  for name in mpirun:mpirun.openmpi mpiexec:mpiexec.openmpi mpicc:mpicc.openmpi mpicxx:mpicxx.openmpi \
              ompi_info:ompi_info pkg-config:pkgconf; do
    [ -e "$prefix/usr/bin/${name#*:}" ] || continue
    printf '#!/usr/bin/env bash\n# %s from .deps/ (scripts/setup.sh --offline), with the environment it needs there.\nsource "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../env.sh"\nexec "$mygpt_deps/usr/bin/%s" "$@"\n' \
      "${name#*:}" "${name#*:}" >"$prefix/bin/${name%%:*}"
    chmod +x "$prefix/bin/${name%%:*}"
  done
}

# node_torch_prefix: the CMake prefix of the LibTorch in .venv's or the node's python (offline: no pip).
node_torch_prefix() {
  local py
  for py in "$venv/bin/python" "${PYTHON:-python3}"; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null && return 0
  done
  return 1
}

deps_only=""
case "${1:-}" in
  "") ;;
  --deps-only) deps_only=1 ;;
  --download-deps) [ $# -eq 2 ] || usage_error "--download-deps needs one directory"
                   download_deps "$2"; exit 0 ;;
  --offline) [ $# -eq 2 ] || usage_error "--offline needs the directory --download-deps filled"
             unpack_deps "$2" ;;
  # For scripts/gpu_kit.sh: env.sh and the Open MPI wrappers for a tree laid out as Debian's (PREFIX/usr/...).
  --write-deps-env) [ $# -eq 3 ] || usage_error "--write-deps-env needs PREFIX and MULTIARCH"
                    write_deps_env "$2" "$3"; exit 0 ;;
  *) usage_error "unknown argument '$1'" ;;
esac
offline=""
[ -f "$deps/env.sh" ] && offline=1
macos=""
[ "$(uname -s)" = Darwin ] && macos=1

# python_at_least_310 PY: whether PY runs and is Python 3.10 or newer (torch 2.11 has no wheel for less).
python_at_least_310() {
  "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1
}

# --- system packages (Debian): compiler, CMake, Open MPI, Boost.Program_options, GoogleTest, PCRE2,
# utf8proc, JSON.
# Offline, .deps/ holds them instead (env.sh puts its mpirun and libraries on the paths).
missing=()
if [ -n "$macos" ]; then
  # Bash 3.2 (macOS's own) calls an empty array unbound under set -u: only ever expanded when non-empty.
  command -v brew >/dev/null 2>&1 ||
    die "macOS needs Homebrew (the brew command) for cmake, boost, open-mpi, googletest, pcre2, utf8proc, nlohmann-json, yaml-cpp and python@3.12; install it, then rerun"
  for p in "${brew_packages[@]}"; do
    brew list --versions "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "brew install ${missing[*]}"
    brew install "${missing[@]}" || die "brew install ${missing[*]} failed"
  fi
  brew_prefix=$(brew --prefix)
  # Homebrew's python@3.12 unless PYTHON names another; never the stock /usr/bin/python3 (3.9).
  [ -n "${PYTHON:-}" ] || PYTHON="$(brew --prefix python@3.12)/bin/python3.12"
else
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
if [ -n "$macos" ]; then
  :
elif [ -n "$offline" ]; then
  say "offline: Debian packages from $deps (rm -rf .deps to go back to apt-get)"
  source "$deps/env.sh"
elif ((${#missing[@]})); then
  command -v apt-get >/dev/null || die "missing packages (${missing[*]}) and no apt-get to install them"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  say "installing ${missing[*]}"
  $sudo apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
fi

if [ -n "$deps_only" ]; then
  python=${PYTHON:-python3}
  python_at_least_310 "$python" || die "$python is not a Python 3.10 or newer (torch $torch_version needs one): set PYTHON to one"
  say "system packages ready; python for the venv: $python"
  exit 0
fi

# --- LibTorch: a user-provided one wins; otherwise the pinned PyPI wheel in a project-local venv
torch_prefix="${Torch_DIR:-}"
if [ -z "$torch_prefix" ] && [ -n "${CMAKE_PREFIX_PATH:-}" ] && ls "${CMAKE_PREFIX_PATH%%:*}"/*/Torch/TorchConfig.cmake >/dev/null 2>&1; then
  torch_prefix="${CMAKE_PREFIX_PATH%%:*}"
fi
if [ -z "$torch_prefix" ] && [ -n "$offline" ]; then
  torch_prefix=$(node_torch_prefix) || die "offline: no LibTorch found: set Torch_DIR=<libtorch>/share/cmake/Torch, or PYTHON to a python that can import torch"
fi
if [ -z "$torch_prefix" ]; then
  python=${PYTHON:-python3}
  command -v "$python" >/dev/null || die "python3 is needed to install the torch wheel (or set Torch_DIR)"
  if [ ! -x "$venv/bin/python" ]; then
    python_at_least_310 "$python" ||
      die "$python is older than Python 3.10 and has no torch $torch_version wheel: set PYTHON to a newer one"
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
  # rustbpe + tiktoken: the references of `tokenizer train` (nanochat's trainer and encoder; its tests skip without them).
  if ! "$venv/bin/python" -c 'import rustbpe, tiktoken' >/dev/null 2>&1; then
    say "installing rustbpe and tiktoken (reference for the tokenizer trainer's tests)"
    "$venv/bin/python" -m pip install -q rustbpe tiktoken \
      || say "warning: pip install rustbpe tiktoken failed; the rustbpe comparison tests will skip"
  fi
  # pyarrow: its wheel carries Arrow's C++ Parquet library and headers, which `prepare` reads Parquet with
  # (cmake/parquet.cmake; Debian 12 has no libparquet-dev). tiktoken, the reference of its tests, comes above.
  if ! "$venv/bin/python" -c 'import pyarrow' >/dev/null 2>&1; then
    say "installing pyarrow (Parquet input for prepare)"
    "$venv/bin/python" -m pip install -q pyarrow \
      || say "warning: pip install pyarrow failed; prepare is built without Parquet input"
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
prefix_path=$torch_prefix
[ -n "$macos" ] && prefix_path+=";$brew_prefix"  # Boost, GTest, nlohmann_json, PCRE2's and utf8proc's .pc from Homebrew
[ -n "$offline" ] && prefix_path+=";$deps/usr"  # after LibTorch: Boost, GTest, nlohmann_json from .deps/
cmake_args=(-S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE="$build_type" -DCMAKE_PREFIX_PATH="$prefix_path")
# A unity build (CMake compiles each target's sources in batches of 8, one translation unit each): every
# file repeats LibTorch's template instantiations, which dominate the build (~30 CPU s a file even with the
# precompiled header; 4 test files alone 116 s, together 50 s), so a clean build takes about half the CPU
# time. Editing one file then recompiles its batch: MYGPT_UNITY_BUILD=0 for file-at-a-time builds. Each
# file still compiles alone: the Mac check compiles them one by one.
cmake_args+=(-DCMAKE_UNITY_BUILD="$([ "${MYGPT_UNITY_BUILD:-1}" = 0 ] && echo OFF || echo ON)" -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)
if [ -d /usr/local/cuda ]; then
  cmake_args+=(-DCUDAToolkit_ROOT=/usr/local/cuda)
  # CMake's CUDA compiler check needs nvcc on the PATH (seen failing without, in a chroot trial).
  command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
fi
if [ -n "$offline" ]; then
  # MPI and pkg-config through the wrappers; the .pc files say prefix=/usr, hence the redefinition.
  # The libraries' folders go into the binaries as DT_RPATH, which finds libmpi and Boost; Debian's
  # libmpi names /usr/lib/.../openmpi/lib in its own RUNPATH, so its dependencies (libopen-rte, ...)
  # need .deps/env.sh's LD_LIBRARY_PATH: scripts/mpi_env.sh sources it, and by hand `source .deps/env.sh`.
  cmake_args+=(-DMPI_C_COMPILER="$deps/bin/mpicc" -DMPIEXEC_EXECUTABLE="$deps/bin/mpirun"
               -DPKG_CONFIG_EXECUTABLE="$deps/bin/pkg-config" "-DPKG_CONFIG_ARGN=--define-variable=prefix=$deps/usr"
               "-DCMAKE_BUILD_RPATH=$mygpt_deps_lib;$mygpt_deps_lib/openmpi/lib"
               -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags)
fi
# A change of these arguments (going offline, another LibTorch) configures afresh.
args_stamp="$repo/build/setup-cmake-args.txt"
if [ ! -f "$repo/build/CMakeCache.txt" ] || [ "$repo/CMakeLists.txt" -nt "$repo/build/CMakeCache.txt" ] ||
   [ "$(cat "$args_stamp" 2>/dev/null)" != "${cmake_args[*]}" ]; then
  say "configuring"
  [ -f "$args_stamp" ] && [ "$(cat "$args_stamp")" != "${cmake_args[*]}" ] && rm -f "$repo/build/CMakeCache.txt"
  cmake "${cmake_args[@]}" >"$repo/build.configure.log" 2>&1 || { tail -30 "$repo/build.configure.log" >&2; die "cmake configure failed (full log: build.configure.log)"; }
  grep '^-- mygpt-ddp' "$repo/build.configure.log" || true
  printf '%s' "${cmake_args[*]}" >"$args_stamp"
fi
targets=()
# A GPU node's time is short (a lent machine: 10 minutes a call): offline, only what the GPU check runs;
# scripts/demo.sh names its own targets (the binary only).
if [ -n "${MYGPT_BUILD_TARGETS:-}" ]; then
  for target in $MYGPT_BUILD_TARGETS; do targets+=(--target "$target"); done
elif [ -n "$offline" ] && [ "${MYGPT_BUILD_ALL:-0}" != 1 ]; then
  targets=(--target gpu_check_binaries)
fi
say "building ${MYGPT_BUILD_TARGETS:-${targets[1]:-everything}} with $jobs jobs"
cmake --build "$repo/build" -j "$jobs" ${targets[@]+"${targets[@]}"} || die "build failed"
say "ready: $repo/build/mygpt-ddp"
