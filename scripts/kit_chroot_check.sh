#!/usr/bin/env bash
# Tries the GPU kit (scripts/gpu_kit.sh) on a bare system of the GPU node's kind, without a GPU: a chroot
# with no Debian package of ours (no Open MPI, Boost, GoogleTest, ...) and a torch from pip, as on a lent
# GPU machine (python3 there is the one with torch). Needs root. Make the chroot once, for example:
#   debootstrap --variant=minbase --include=python3,python3-venv,procps bookworm ROOT http://deb.debian.org/debian
#   chroot ROOT python3 -m venv /opt/torch/.venv && chroot ROOT /opt/torch/.venv/bin/pip install torch==2.11.0
# Then, from the checkout, after scripts/gpu_kit.sh:  scripts/kit_chroot_check.sh ROOT
# It copies the checkout's tracked files and the kit tarball into ROOT/repo and checks, inside:
#   1. gpu_check.sh --kit loads the kit (torch found, every library resolves) and stops at the missing GPU
#   2. the kit's mpirun starts two CPU ranks of the kit's binary (Open MPI and its plugins from the kit)
#   3. with a fake nvidia-smi and --device cpu, gpu_check.sh runs its run and nccl phases through the kit
set -uo pipefail
root=${1:?usage: kit_chroot_check.sh CHROOT [TORCH_VENV_BIN (default /opt/torch/.venv/bin)]}
venv_bin=${2:-/opt/torch/.venv/bin}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -f $repo/.carry/gpu-kit/gpu-kit.tar.gz ]] || { echo "kit_chroot_check.sh: .carry/gpu-kit/gpu-kit.tar.gz is missing: run scripts/gpu_kit.sh" >&2; exit 2; }
[[ -x $root$venv_bin/python3 ]] || { echo "kit_chroot_check.sh: $root$venv_bin/python3 is missing" >&2; exit 2; }
rm -rf "$root/repo" && mkdir -p "$root/repo/.carry/gpu-kit"
(cd "$repo" && git ls-files -z | xargs -0 cp --parents -t "$root/repo")
cp "$repo/.carry/gpu-kit/gpu-kit.tar.gz" "$root/repo/.carry/gpu-kit/"
mounted=()
for m in proc sys dev dev/shm; do
  mkdir -p "$root/$m"
  mount --bind "/$m" "$root/$m" && mounted=("$root/$m" "${mounted[@]}")
done
trap 'for m in "${mounted[@]}"; do umount "$m"; done' EXIT
echo "Debian packages of ours in the chroot: $(chroot "$root" dpkg -l 2>/dev/null | awk '/^ii/ {print $2}' | grep -cE 'openmpi|boost|gtest|gmock|nlohmann|pcre2-dev|utf8proc|pkgconf')"
chroot "$root" env -i HOME=/root PATH="$venv_bin:/usr/sbin:/usr/bin:/sbin:/bin" bash -c '
cd /repo
rm -rf /tmp/gpu-kit && tar -xzf .carry/gpu-kit/gpu-kit.tar.gz -C /tmp || exit 1
result() { if [ "$1" -eq 0 ]; then echo "PASS  $2"; else echo "FAIL  $2"; fi; }
echo "== 1. gpu_check.sh --kit without a GPU"
scripts/gpu_check.sh --kit /tmp/gpu-kit tests >/tmp/1.out 2>/tmp/1.err; rc=$?
cat /tmp/1.err
[ $rc -eq 2 ] && grep -q "no NVIDIA GPU visible" /tmp/1.err; result $? "the kit loads and the missing GPU is reported (exit $rc)"
echo "== 2. the kit'"'"'s mpirun, two CPU ranks"
rm -rf /tmp/np2 /tmp/evidence
( source /tmp/gpu-kit/gpu_env.sh && mpirun --oversubscribe --bind-to none -np 2 /tmp/gpu-kit/build/mygpt-ddp train builtin:sort \
    --preset tiny --device cpu --threads 1 --steps 20 --eval-every 0 --out /tmp/np2 ) >/tmp/2.out 2>&1; rc=$?
grep -E "world:|^step +19" /tmp/2.out; [ $rc -ne 0 ] && tail -5 /tmp/2.out
result $rc "mpirun -np 2 of the kit binary on CPU"
echo "== 3. gpu_check.sh --kit --device cpu run nccl, with a fake nvidia-smi"
mkdir -p /tmp/fake && printf "#!/bin/sh\ncase \"\$*\" in -L) echo \"GPU 0: fake (UUID: GPU-0)\";; *name*) echo fake;; *) echo 0;; esac\n" >/tmp/fake/nvidia-smi
chmod +x /tmp/fake/nvidia-smi
PATH=/tmp/fake:$PATH scripts/gpu_check.sh --kit /tmp/gpu-kit --device cpu --out /tmp/evidence run nccl >/tmp/3.out 2>&1; rc=$?
grep -E "^(PASS|FAIL|SKIP|TIMEOUT) " /tmp/evidence/summary.txt
result $rc "gpu_check.sh run nccl through the kit"
'
