#!/usr/bin/env bash
# Prints the CUDA toolkit fa4rt builds against: the first directory that holds include/cuda.h,
# include/nvrtc.h and libnvrtc.so (lib64/, lib/, lib/<multiarch>/ or targets/*/lib/), looking at
#   $CUDA_HOME, $CUDA_PATH (when set, they must hold it), the directory above `nvcc` on PATH,
#   /usr/local/cuda, /usr (Debian's nvidia-cuda-toolkit).
# Otherwise says on stderr what each place lacks and exits 1. Only NVRTC and the headers are needed:
# no nvcc, and no GPU driver (libcuda is loaded at run time).
set -uo pipefail

# What `root` lacks, one item per line; nothing when it is a usable toolkit.
lacks() {
  local root=$1
  [[ -f $root/include/cuda.h ]] || echo "include/cuda.h"
  [[ -f $root/include/nvrtc.h ]] || echo "include/nvrtc.h"
  compgen -G "$root/lib64/libnvrtc.so" >/dev/null || compgen -G "$root/lib/libnvrtc.so" >/dev/null ||
    compgen -G "$root/lib/*-linux-gnu/libnvrtc.so" >/dev/null || compgen -G "$root/targets/*/lib/libnvrtc.so" >/dev/null ||
    echo "libnvrtc.so"
}

for variable in CUDA_HOME CUDA_PATH; do
  root=${!variable:-}
  [[ -n $root ]] || continue
  missing=$(lacks "$root")
  if [[ -z $missing ]]; then echo "$root"; exit 0; fi
  echo "$variable=$root is not a usable CUDA toolkit: it lacks $(echo $missing)" >&2
  exit 1
done

candidates=()
if nvcc=$(command -v nvcc); then candidates+=("$(dirname "$(dirname "$(readlink -f "$nvcc")")")"); fi
candidates+=(/usr/local/cuda /usr)
for root in "${candidates[@]}"; do
  missing=$(lacks "$root")
  if [[ -z $missing ]]; then echo "$root"; exit 0; fi
  report+="  $root lacks $(echo $missing)"$'\n'
done
echo "no CUDA toolkit found (fa4rt needs cuda.h, nvrtc.h and libnvrtc.so):" >&2
echo -n "${report:-}" >&2
echo "Install the CUDA toolkit (NVRTC and headers suffice) and set CUDA_HOME to it." >&2
exit 1
