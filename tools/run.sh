#!/usr/bin/env bash
# The two set-up commands of README.md:
#   tools/run.sh main   build the library and the fa4rt tool only, then `fa4rt prewarm`: compile every kernel
#                       for one arch (FA4_ARCH, else the GPU's, else sm_100) into the disk cache, showing the
#                       cache directory and size, [i/N] progress and one Plan per backend (no GPU needed)
#   tools/run.sh test   build everything, run the whole test suite, then list why skipped tests skipped
# CUDA: tools/cuda_root.sh (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda, /usr). Other build
# dependencies are checked by their files; missing ones are installed from Debian's packages when running as
# root with apt-get, else listed (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
[[ $mode == main || $mode == test ]] || { echo "usage: tools/run.sh main|test" >&2; exit 2; }

cuda=$(tools/cuda_root.sh)

# Include directories the compiler searches (plus the usual ones when there is no compiler yet).
include_dirs() {
  command -v g++ >/dev/null && g++ -xc++ -E -Wp,-v - </dev/null 2>&1 | sed -n 's/^ \(\/.*\)/\1/p'
  echo /usr/local/include
  echo /usr/include
}
have_header() {
  local dir
  while read -r dir; do [[ -f $dir/$1 ]] && return 0; done < <(include_dirs)
  return 1
}
have_command() { command -v "$1" >/dev/null; }

# "check what Debian-package" triples; `main` needs no tests, so no GoogleTest, C compiler or Python.
needs=("have_command cmake cmake" "have_command g++ g++" "have_command make make"
       "have_header spdlog/spdlog.h libspdlog-dev" "have_header xxhash.h libxxhash-dev")
[[ $mode == test ]] && needs+=("have_command gcc gcc" "have_command python3 python3" "have_header gtest/gtest.h libgtest-dev")
missing=() packages=()
for need in "${needs[@]}"; do
  read -r check what package <<<"$need"
  $check "$what" || { missing+=("$what ($package)"); packages+=("$package"); }
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]] || ! have_command apt-get; then
    echo "missing build dependencies: ${missing[*]}" >&2
    echo "install them (the Debian packages are in parentheses), or run this as root on Debian" >&2
    exit 1
  fi
  echo "installing ${packages[*]} (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${packages[@]}" >/dev/null
fi

jobs=$(nproc)
args=(-DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$cuda")
if [[ $mode == main ]]; then
  have_header gtest/gtest.h || args+=(-DFA4_BUILD_TESTS=OFF)  # main builds no tests: do not require GoogleTest
  cmake -S . -B build "${args[@]}" >/dev/null
  cmake --build build -j"$jobs" --target tool_fa4rt
  exec ./build/fa4rt prewarm ${FA4_ARCH:+--arch "$FA4_ARCH"}
fi

cmake -S . -B build "${args[@]}" -DFA4_BUILD_TESTS=ON -DFA4_BUILD_TOOLS=ON >/dev/null
cmake --build build -j"$jobs"
status=0
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 1500 || status=$?

# Why skipped tests skipped, grouped by reason with a count and one example, from ctest's log of this run: the
# reason is GTEST_SKIP's message (the line after gtest's "file:line: Skipped") or a "SKIPPED: reason" line (the
# Python tests).
log=build/Testing/Temporary/LastTest.log
if [[ -f $log ]]; then
  awk '
    /^[0-9]+\/[0-9]+ Test: / { name = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", name); sub(/  # .*/, "", name);
                               reason = ""; skip_regex = 0; message_next = 0; next }
    message_next { message_next = 0; if (reason == "" && $0 !~ /^\[  SKIPPED \]/) { reason = $0; sub(/^SKIPPED: /, "", reason) } }
    /: Skipped$/ { message_next = 1 }
    /^SKIPPED: / && reason == "" { reason = substr($0, 10) }
    /^Skip regular expression found/ { skip_regex = 1 }
    / end time: / && name != "" {
      if (reason != "" || skip_regex) {
        r = reason != "" ? reason : "(no reason printed)"
        count[r]++; if (!(r in example)) example[r] = name
      }
      name = ""
    }
    END { for (r in count) printf "%d\t%s\t%s\n", count[r], r, example[r] }' "$log" | sort -t$'\t' -k1,1nr >build/skipped.tsv
  if [[ -s build/skipped.tsv ]]; then
    echo "skipped tests: $(awk -F'\t' '{ n += $1 } END { print n }' build/skipped.tsv), by reason:"
    awk -F'\t' '{ printf "  %5d  %s\n         e.g. %s\n", $1, $2, $3 }' build/skipped.tsv
  fi
fi
exit $status
