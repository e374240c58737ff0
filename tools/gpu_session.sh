#!/usr/bin/env bash
# One GPU session in one call: GPU tests, the PyTorch oracle test and the benchmarks, on a machine where
# build/ was built elsewhere and carried over (nothing is rebuilt here). Every stage is independent (one
# failing does not stop the rest) and time-limited; logs and results are collected under $OUT.
#
#   tools/gpu_session.sh [STAGE...]      stages (run in this order): info tests selftest oracle serving probe
#                                        variants overhead decode decode-peers decode-ab attention-ab attention
#                                        compile profile (probe, variants, decode-ab, attention-ab and profile, not in all: the paged-load probe,
#                                        build-probe/tma_page_probe built with nvcc beside the build, see
#                                        tools/tma_page_probe.cu; the variants bench on the automatic and the
#                                        portable backend and the ragged/paged bench at seeds 1 and 2; the
#                                        decode and the quick prefill A/B of several libraries below; Nsight Compute's
#                                        stall samples of one prefill call (FA4-cute's too where installed) and
#                                        the kernel durations of a few small decode calls, into logs.tar.gz's
#                                        profile/); groups: all (default),
#                                        bench = overhead decode decode-peers attention compile
# Environment:
#   OUT                    where results go (default ./gpu-out); at most 8 files come back from there:
#                          summary.txt, selftest.md, emulated.txt, bench_attention.{md,json}, bench_compile.json,
#                          decode_ab.md, attention_ab.md, logs.tar.gz (nine in all: run the A/B stages apart from
#                          the full set)
#   FA4_BUILD_DIR          the carried build directory (default build)
#   FA4_COMMIT             commit hash to record in the results (the copy here may have no .git)
#   FA4_CACHE_DIR          kernel cache shared by the stages (default <build>/test-kernel-cache, the tests')
#   GPU_SESSION_BUDGET_S   wall-clock budget of the whole session (default 560); each stage gets
#                          min(its own limit, what is left)
#   GPU_SESSION_QUICK=1    the short attention sweep (3 sequence lengths per head dim)
#   GPU_SESSION_CTEST_J    ctest parallelism (default 8)
#   GPU_SESSION_TESTS_S    the tests stage's limit in seconds (default 330)
#   GPU_SESSION_CTEST_ARGS more ctest arguments for the tests stage, e.g. the sm90 set:
#                          '-R "Sm90|Automatic/ServingShapes|Property|Variant|Window|window|oftcap|Sink" -E Sm100Emulated'
#   GPU_SESSION_AB_LIBS    decode-ab, attention-ab: libfa4rt.so paths, the baseline first (default: the build's alone), e.g.
#                          "build-main/libfa4rt.so build/libfa4rt.so" (copy each variant's library out of its
#                          build, `cp -L build/libfa4rt.so build-x/`, and carry those folders too)
#   GPU_SESSION_AB_FULL=1  attention-ab: the full prefill sweep (6 sequence lengths per head dim) instead of the quick one
#   GPU_SESSION_AB_PREFILL_ROWS  attention-ab: bench_attention.py --rows regex over "head_dim causal bxs" (e.g.
#                          "^(64|256) ", " yes "); default every row of the sweep
#   GPU_SESSION_AB_ROWS    decode-ab: bench_decode.py --rows regex (default "sq1"); the table comes back as
#                          decode_ab.md (bench/compare_decode.py over the libraries' runs)
#   GPU_SESSION_AB_S       decode-ab: each library's limit in seconds (default 150: about 48 rows up to 4k keys;
#                          the 32k and 128k rows take about 4 s each)
#   GPU_SESSION_PROFILE   profile: the prefill call's options (ncu_prefill_call.py; default "--d 128", 1 x 16k
#                          tokens); its lineinfo cubin comes from `fa4rt dump` with the same --d/--dv/--causal
# FA4-cute is a peer of the Python benches (attention, decode; an A/B's first pass) where
# tools/fa4cute_peer.sh installed it on this machine (/tmp/fa4cute, two calls before this one's stages).
set -u
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1
cd "$(dirname "$0")/.." || exit 1
REPO=$(pwd)
BUILD=${FA4_BUILD_DIR:-build}
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/gpu-session-logs.XXXXXX")
BUDGET=${GPU_SESSION_BUDGET_S:-560}
SESSION_START=$(date +%s)
export PYTHONUNBUFFERED=1
[ -d /tmp/fa4cute ] && export PYTHONPATH="$(tools/fa4cute_peer.sh path)${PYTHONPATH:+:$PYTHONPATH}"
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$REPO/$BUILD ;; esac
export FA4RT_LIB=${FA4RT_LIB:-$BUILD_ABS/libfa4rt.so}
export FA4_CACHE_DIR=${FA4_CACHE_DIR:-$BUILD_ABS/test-kernel-cache}
if [ -z "${FA4_COMMIT:-}" ]; then
  FA4_COMMIT=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
fi
export FA4_COMMIT

# Stage selection.
ALL_STAGES="info tests selftest oracle serving overhead decode decode-peers attention compile"
selected=""
[ $# -eq 0 ] && set -- all
for arg in "$@"; do
  case "$arg" in
    all) selected="$selected $ALL_STAGES" ;;
    bench) selected="$selected overhead decode decode-peers attention compile" ;;
    info|tests|selftest|oracle|serving|overhead|decode|decode-peers|decode-ab|attention-ab|attention|compile|probe|variants|profile) selected="$selected $arg" ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "unknown stage '$arg' (stages: $ALL_STAGES; groups: all, bench)"; exit 2 ;;
  esac
done
wanted() { case " $selected " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# CMake wrote absolute paths (CTestTestfile.cmake, the discovered test lists, FA4_TEST_CACHE) for the
# source tree it was configured in. If this copy lives elsewhere, make that path point here.
configured_src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
if [ -n "$configured_src" ] && [ "$configured_src" != "$REPO" ]; then
  if [ ! -e "$configured_src" ]; then
    mkdir -p "$(dirname "$configured_src")" && ln -s "$REPO" "$configured_src" &&
      echo "note: linked $configured_src -> $REPO (build/ was configured there)"
  elif [ "$(cd "$configured_src" && pwd -P)" != "$(pwd -P)" ]; then
    echo "WARNING: build/ was configured in $configured_src, which exists and is not this copy; ctest may run stale binaries"
  fi
fi

declare -a SUMMARY=()
FAILED=0

# run_stage NAME LIMIT_S TAIL_LINES KEY_REGEX COMMAND...: runs COMMAND with a timeout, logs everything
# to $LOGS/NAME.log, prints the log's last lines, and records status, seconds and one key line.
run_stage() {
  local name=$1 limit=$2 tail_lines=$3 key_regex=$4
  shift 4
  local left=$((BUDGET - ($(date +%s) - SESSION_START)))
  if [ "$left" -lt 10 ]; then
    SUMMARY+=("$(printf '%-10s %-8s %6s  %s' "$name" "NOT-RUN" "-" "session budget of ${BUDGET}s used up")")
    FAILED=1
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo
  echo "=== $name (limit ${limit}s): $*"
  local start rc status
  start=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  local seconds=$(($(date +%s) - start))
  case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    124|137) status=TIMEOUT ;;
    *) status="FAIL($rc)" ;;
  esac
  case $status in PASS|SKIP) ;; *) FAILED=1 ;; esac
  tail -n "$tail_lines" "$LOGS/$name.log"
  echo "--- $name: $status in ${seconds}s"
  local key
  key=$(grep -E "$key_regex" "$LOGS/$name.log" | tail -n 1 | cut -c1-150)
  SUMMARY+=("$(printf '%-10s %-8s %5ss  %s' "$name" "$status" "$seconds" "$key")")
}

echo "gpu_session: stages:$selected; commit $FA4_COMMIT; build $BUILD; budget ${BUDGET}s; out $OUT"

# shellcheck disable=SC2317  # run through bash -c
stage_info() {
  nvidia-smi -L || return 1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' 2>&1 | tail -n 1
  local problems
  problems=$(ldd "$BUILD/libfa4rt.so" "$BUILD/bench_overhead" 2>&1 | grep -E "not found|GLIBC" || true)
  if [ -n "$problems" ]; then echo "shared-library problems: $problems"; return 1; fi
  echo "libfa4rt.so and the benches resolve all shared libraries"
}
export -f stage_info
export BUILD

if wanted info; then
  run_stage info 30 12 "NVIDIA H|problems|not found" bash -c stage_info
fi

if wanted tests; then
  [ -d "$BUILD/tests" ] || echo "WARNING: $BUILD/tests missing: was the build carried?"
  # The python oracle (label python) has its own stage.
  run_stage tests ${GPU_SESSION_TESTS_S:-330} 40 "tests passed|No tests were found" \
    bash -c "cd '$BUILD' && ctest -L gpu -LE python ${GPU_SESSION_CTEST_ARGS:-} --no-tests=error --output-on-failure --timeout 240 -j ${GPU_SESSION_CTEST_J:-8}; rc=\$?; cp Testing/Temporary/LastTest.log '$LOGS/ctest-LastTest.log' 2>/dev/null; exit \$rc"
fi

if wanted tests; then
  # Every emulated check's error line, the property test's seeds, the self-check verdicts: one file.
  grep -hE "^\[(sm100-emulated|sm100-adversarial|property|self-check|fault)\]" "$LOGS"/ctest-LastTest.log 2>/dev/null \
    > "$OUT/emulated.txt" || true
fi

if wanted selftest; then
  run_stage selftest 240 20 "PASS, .* FAIL|no CUDA" "$BUILD/fa4rt" selftest --out "$OUT/selftest.md"
fi

if wanted oracle; then
  run_stage oracle 120 25 "passed|SKIPPED" python3 tests/python/test_oracle.py
fi

if wanted serving; then
  run_stage serving 150 30 "passed|SKIPPED" python3 tests/python/test_serving.py
fi

if wanted probe; then
  if [ -x build-probe/tma_page_probe ]; then
    run_stage probe 120 14 "^\\| 16 MB \\| 16 " build-probe/tma_page_probe
  else
    SUMMARY+=("$(printf '%-10s %-8s %6s  %s' probe SKIP - "build-probe/tma_page_probe missing (nvcc -arch=sm_90a -O2 -o build-probe/tma_page_probe tools/tma_page_probe.cu -lcuda)")")
  fi
fi

if wanted variants; then
  run_stage variants-auto 120 20 "^\| prefill softcap|SKIPPED" python3 bench/bench_variants.py
  run_stage variants-portable 120 20 "^\| prefill softcap|SKIPPED" env FA4_BACKEND=portable python3 bench/bench_variants.py
  run_stage ragged-seed1 120 6 "^\| (no|yes) |SKIPPED" python3 bench/bench_ragged.py --seed 1
  run_stage ragged-seed2 120 6 "^\| (no|yes) |SKIPPED" python3 bench/bench_ragged.py --seed 2
fi

if wanted overhead; then
  run_stage overhead 60 8 "^RESULT|SKIPPED" "$BUILD/bench_overhead"
  run_stage overhead-split 60 8 "^RESULT|SKIPPED" "$BUILD/bench_overhead" --decode
fi

if wanted decode; then
  run_stage decode 90 30 "^RESULT|SKIPPED" "$BUILD/bench_decode" --pages 16,64,256
fi

if wanted decode-peers; then
  # GPU_SESSION_DECODE_FULL=1: issue 10's whole table (about 8 minutes) instead of its six rows.
  rows=(--quick)
  [ "${GPU_SESSION_DECODE_FULL:-0}" = 1 ] && rows=(--reps 10)
  run_stage decode-peers 560 120 "page 64|SKIPPED" python3 bench/bench_decode.py ${rows[@]+"${rows[@]}"}
  run_stage ragged 120 20 "^\| (no|yes) |SKIPPED" python3 bench/bench_ragged.py
  run_stage variants 120 20 "^\| decode window|SKIPPED" python3 bench/bench_variants.py
fi

if wanted decode-ab; then
  # One bench_decode.py run per library (each measures the peers again), then the libraries side by side.
  ab_logs=()
  ab_names=()
  for lib in ${GPU_SESSION_AB_LIBS:-$BUILD_ABS/libfa4rt.so}; do
    name=ab-$(basename "$(dirname "$lib")")
    run_stage "$name" "${GPU_SESSION_AB_S:-150}" 3 "fa4rt / best peer: median|SKIPPED" env FA4_LIB="$lib" \
      python3 bench/bench_decode.py --pages "" --reps 5 --rows "${GPU_SESSION_AB_ROWS:-sq1}"
    ab_logs+=("$LOGS/$name.log")
    ab_names+=("${name#ab-}")
  done
  (IFS=,; python3 bench/compare_decode.py --names "${ab_names[*]}" "${ab_logs[@]}") >"$OUT/decode_ab.md" 2>&1 &&
    tail -n 1 "$OUT/decode_ab.md"
fi

if wanted attention-ab; then
  # The quick prefill sweep per library, in the order A B ... B A (the spread shows in the repeats), then the
  # libraries side by side. FA4_SELF_CHECK=0: a library copied out of its build has no fa4rt-selfcheck
  # beside it, and without the first-use check its fast kernels would not be taken. The peers are timed in
  # the first pass only (their column is the comparison's yardstick); the later passes time fa4rt alone.
  libs=(${GPU_SESSION_AB_LIBS:-$BUILD_ABS/libfa4rt.so})
  order=("${libs[@]}")
  for ((i = ${#libs[@]} - 1; i >= 0; i--)); do order+=("${libs[i]}"); done
  ab_tables=()
  ab_names=()
  sweep=(--quick)
  [ "${GPU_SESSION_AB_FULL:-0}" = 1 ] && sweep=()
  [ -n "${GPU_SESSION_AB_PREFILL_ROWS:-}" ] && sweep+=(--rows "$GPU_SESSION_AB_PREFILL_ROWS")
  for lib in "${order[@]}"; do
    name=att-$((${#ab_tables[@]} + 1))-$(basename "$(dirname "$lib")")
    peers=()
    [ ${#ab_tables[@]} -gt 0 ] && peers=(--fa4rt-only)
    run_stage "$name" 90 3 "wrote|SKIPPED" env FA4_LIB="$lib" FA4_SELF_CHECK=0 \
      python3 bench/bench_attention.py "$LOGS/$name" ${sweep[@]+"${sweep[@]}"} ${peers[@]+"${peers[@]}"}
    ab_tables+=("$LOGS/$name.md")
    ab_names+=("${name#att-}")
  done
  (IFS=,; python3 bench/compare_attention.py --names "${ab_names[*]}" "${ab_tables[@]}") >"$OUT/attention_ab.md" 2>&1 &&
    tail -n 1 "$OUT/attention_ab.md"
fi

if wanted attention; then
  quick=()
  [ "${GPU_SESSION_QUICK:-0}" = 1 ] && quick=(--quick)
  run_stage attention 200 50 "rows have|wrote|SKIPPED" python3 bench/bench_attention.py "$OUT/bench_attention" ${quick[@]+"${quick[@]}"}
fi

if wanted compile; then
  # NVRTC only: bf16 configurations, stopped after a 60 s budget (the full list runs fine on a CPU box).
  run_stage compile 90 8 "^RESULT" "$BUILD/bench_compile" --filter /bf16/ --budget-s 60 --json "$OUT/bench_compile.json"
fi

# shellcheck disable=SC2317  # run through bash -c
stage_profile() {
  local dir=$LOGS/profile args dump=() a
  read -r -a args <<<"${GPU_SESSION_PROFILE:---d 128}"
  if ! command -v ncu >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIPPED: profile needs ncu and a GPU"
    return 77
  fi
  mkdir -p "$dir" || return 1
  # fa4rt dump takes the head dims and --causal of the call's options (the rest are shapes).
  for ((a = 0; a < ${#args[@]}; ++a)); do
    case ${args[a]} in
      --d|--dv) dump+=("${args[a]}" "${args[a + 1]}") ;;
      --causal) dump+=(--causal) ;;
    esac
  done
  tools/ncu_stalls.sh "$dir/fa4rt" "${args[@]}" || return 1
  "$BUILD/fa4rt" dump --out "$dir/dump" --arch 90 --backend sm90 --lineinfo "${dump[@]}" >/dev/null || return 1
  python3 tools/stall_report.py "$dir/fa4rt.sass.csv" "$dir"/dump/*.cubin >"$dir/fa4rt.stalls.txt" || return 1
  head -n 30 "$dir/fa4rt.stalls.txt"
  if [ -d /tmp/fa4cute ]; then
    NCU_KERNEL=flash_fwd tools/ncu_stalls.sh "$dir/fa4cute" "${args[@]}" --peer fa4cute || return 1
  fi
  # Small decode calls are latency-bound: each kernel's duration (decode, combine; cuDNN's beside them).
  local shape
  for shape in "1 1024 8 1" "1 4096 8 1" "8 1024 8 1" "1 1024 32 8" "64 4096 8 1"; do
    read -r -a shape <<<"$shape"
    echo "== batch ${shape[0]} kv ${shape[1]} heads ${shape[2]}/${shape[3]}"
    FA4_SELF_CHECK=0 ncu --metrics gpu__time_duration.sum,launch__grid_size --csv python3 tools/ncu_decode_call.py \
      --batch "${shape[0]}" --kv "${shape[1]}" --hq "${shape[2]}" --hkv "${shape[3]}" 2>&1 | grep '^"' | cut -c1-300
  done >"$dir/decode_kernels.csv"
  rm -f "$dir"/*.ncu-rep
}
export -f stage_profile
export LOGS

if wanted profile; then
  run_stage profile 300 30 "^samples|SKIPPED" bash -c stage_profile
fi

total=$(($(date +%s) - SESSION_START))
{
  echo
  echo "=== summary (commit $FA4_COMMIT, $(date -u '+%Y-%m-%d %H:%M UTC'), total ${total}s)"
  printf '%-10s %-8s %6s  %s\n' stage status time "key line"
  for line in ${SUMMARY[@]+"${SUMMARY[@]}"}; do echo "$line"; done
} | tee "$OUT/summary.txt"
tar -C "$LOGS" -czf "$OUT/logs.tar.gz" . && rm -rf "$LOGS"
echo "results in $OUT:" "$OUT"/*
exit $FAILED
