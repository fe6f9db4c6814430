# shellcheck shell=bash
# The environment of a GPU kit (scripts/gpu_kit.sh copies this file into the kit as gpu_env.sh); source
# it on the node. It finds the node's torch (the rules of scripts/torch_python.sh: PYTHON, else python3),
# checks that it is the torch the kit was built against, puts that torch's libraries and the CUDA and NCCL
# libraries beside it (site-packages/nvidia/*/lib) on the library path after the kit's own and before the
# node's, checks that
# every library of the kit's binaries resolves, and defines kit_ctest_dir. Returns 1 with one line
# saying what is wrong otherwise.
kit_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kit_node_library_path=${LD_LIBRARY_PATH:-}  # the node's own: it goes after torch's (see kit_setup)
# shellcheck source=/dev/null
source "$kit_dir/env.sh"  # Open MPI, PMIx and hwloc relocated into the kit (written by setup.sh)
# CUDA errors on a node's first contact: the whole LibTorch message, not its first line only; NCCL's
# warnings in every log (gpu_check.sh's NCCL phase asks for INFO).
export MYGPT_FULL_ERRORS=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# shellcheck source=scripts/torch_python.sh
source "$kit_dir/src/scripts/torch_python.sh"
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# kit_torch_libs PYTHON: the folders of that Python's torch libraries, ':'-separated (no import of torch).
kit_torch_libs() {
  "$1" -c 'import importlib.util, pathlib
torch = pathlib.Path(importlib.util.find_spec("torch").submodule_search_locations[0])
dirs = [torch / "lib"] + sorted(p for p in (torch.parent / "nvidia").glob("**/lib") if p.is_dir())
print(":".join(str(d) for d in dirs))'
}
# kit_torch_version PYTHON: torch.__version__ read from its version.py.
kit_torch_version() {
  "$1" -c 'import importlib.util, pathlib
ns = {}
exec((pathlib.Path(importlib.util.find_spec("torch").submodule_search_locations[0]) / "version.py").read_text(), ns)
print(ns["__version__"])'
}

kit_setup() {
  local want have libs missing
  PYTHON=$(torch_python "$kit_dir") || return 1
  export PYTHON
  want=$(sed -n 's/^torch //p' "$kit_dir/KIT.txt")
  have=$(kit_torch_version "$PYTHON") || { echo "gpu kit: cannot read the torch version of $PYTHON" >&2; return 1; }
  if [ "$have" != "$want" ]; then
    echo "gpu kit: built against torch $want, but $PYTHON has torch $have (LibTorch's C++ ABI changes between versions): build on the node with scripts/setup.sh --offline" >&2
    return 1
  fi
  libs=$(kit_torch_libs "$PYTHON") || { echo "gpu kit: cannot locate the torch of $PYTHON" >&2; return 1; }
  # The kit's libraries, then torch's and the CUDA and NCCL beside it, then the node's own: a CUDA toolkit
  # or another NCCL on the node's path must not stand in for the ones this torch was built with.
  local kit_part=${LD_LIBRARY_PATH:-}
  [ -n "$kit_node_library_path" ] && kit_part=${kit_part%"$kit_node_library_path"}
  kit_part=${kit_part%:}
  LD_LIBRARY_PATH=${kit_part:+$kit_part:}$libs${kit_node_library_path:+:$kit_node_library_path}
  export LD_LIBRARY_PATH
  missing=$(ldd "$kit_dir/build/mygpt-ddp" "$kit_dir"/build/tests/* 2>&1 | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
  if [ -n "$missing" ]; then
    echo "gpu kit: libraries found neither in the kit nor beside the torch of $PYTHON: $missing" >&2
    return 1
  fi
}

# kit_ctest_dir DIR: the kit's CTest files with this node's paths, in DIR (printed), for ctest --test-dir.
kit_ctest_dir() {
  mkdir -p "$1" || return 1
  local f
  for f in "$kit_dir"/ctest/*; do
    # torchrun beside the node's python (the one-rank NCCL job without MPI).
    sed -e "s|@KIT@|$kit_dir|g" -e "s|@PYTHON@|$PYTHON|g" -e "s|@TORCHRUN@|$(dirname "$PYTHON")/torchrun|g" "$f" \
      >"$1/$(basename "$f")"
  done
  # The CTest files name the discovered-tests file by its place in the kit.
  sed -i "s|$kit_dir/ctest/|$1/|g" "$1"/*
  echo "$1"
}

kit_setup
