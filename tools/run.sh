#!/usr/bin/env bash
# The two set-up commands of README.md:
#   tools/run.sh main   build, then compile and plan every sm_100a kernel into the disk cache (no GPU needed;
#                       on a GPU machine it prewarms for that GPU instead)
#   tools/run.sh test   build, then run the whole test suite (GPU tests say SKIPPED without a GPU)
# Installs the build dependencies from Debian's packages first when they are missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
[[ $mode == main || $mode == test ]] || { echo "usage: tools/run.sh main|test" >&2; exit 2; }

missing=()
for pkg in cmake g++ make python3 libspdlog-dev libxxhash-dev libgtest-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then echo "missing packages: ${missing[*]} (install them, or run as root)" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[[ -x /usr/local/cuda/bin/nvcc || -f /usr/local/cuda/include/nvrtc.h ]] || {
  echo "the CUDA toolkit (NVRTC, cuda.h) is expected in /usr/local/cuda" >&2; exit 1; }

jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"

if [[ $mode == main ]]; then
  exec ./build/fa4rt prewarm ${FA4_ARCH:+--arch "$FA4_ARCH"}
fi
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 1500
