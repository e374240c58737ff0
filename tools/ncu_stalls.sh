#!/usr/bin/env bash
# Where one prefill or decode kernel's warps wait: Nsight Compute's warp-state and source counters (PC sampling)
# for one call of tools/ncu_prefill_call.py (or ncu_decode_call.py), exported as CSV: PREFIX.details.csv (the sections) and
# PREFIX.sass.csv (stall samples per SASS instruction, by address). tools/stall_report.py joins the latter with the lineinfo
# SASS of `fa4rt dump --lineinfo` (same NVRTC, same code) to sum the samples per source line and role.
#   tools/ncu_stalls.sh PREFIX [ncu_prefill_call.py options, e.g. --d 256 --causal]
#   tools/ncu_stalls.sh PREFIX --decode [ncu_decode_call.py options, e.g. --batch 256 --kv 4096 --hq 8 --hkv 1]
# NCU_KERNEL: another kernel name regex (a peer's, e.g. flash_fwd for FA4-cute's with --peer fa4cute).
set -eu
prefix=$1
shift
here=$(dirname "$0")
call=ncu_prefill_call.py kernel=fa4_sm90
if [ "${1:-}" = --decode ]; then
  call=ncu_decode_call.py kernel=fa4_portable_decode
  shift
fi
FA4_SELF_CHECK=0 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SourceCounters -k "regex:${NCU_KERNEL:-$kernel}" -c 1 --launch-skip 1 -f -o "$prefix" \
  python3 "$here/$call" "$@"
ncu --import "$prefix.ncu-rep" --page details --csv > "$prefix.details.csv"
ncu --import "$prefix.ncu-rep" --page source --print-source sass --csv > "$prefix.sass.csv"
