#!/usr/bin/env bash
# Where one prefill kernel's warps wait: Nsight Compute's warp-state and source counters (PC sampling) for one
# call of tools/ncu_prefill_call.py, exported as CSV: PREFIX.details.csv (the sections) and PREFIX.sass.csv
# (stall samples per SASS instruction, by address). tools/stall_report.py joins the latter with the lineinfo
# SASS of `fa4rt dump --lineinfo` (same NVRTC, same code) to sum the samples per source line and role.
#   tools/ncu_stalls.sh PREFIX [ncu_prefill_call.py options, e.g. --d 256 --causal]
set -eu
prefix=$1
shift
here=$(dirname "$0")
FA4_SELF_CHECK=0 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SourceCounters -k regex:fa4_sm90 -c 1 --launch-skip 1 -f -o "$prefix" \
  python3 "$here/ncu_prefill_call.py" "$@"
ncu --import "$prefix.ncu-rep" --page details --csv > "$prefix.details.csv"
ncu --import "$prefix.ncu-rep" --page source --print-source sass --csv > "$prefix.sass.csv"
