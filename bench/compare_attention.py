#!/usr/bin/env python3
"""Side by side: the fa4rt column of several bench_attention.py tables (one library each, run in one device
call), with each table's geometric mean against the first and the first table's cuDNN column as a yardstick.

    FA4_SELF_CHECK=0 FA4_LIB=build-main/libfa4rt.so python3 bench/bench_attention.py base --quick
    FA4_SELF_CHECK=0 FA4_LIB=build-x/libfa4rt.so    python3 bench/bench_attention.py x --quick
    python3 bench/compare_attention.py base.md x.md

(A library copied out of its build has no fa4rt-selfcheck beside it; with the first-use check on, its fast
kernels would then not be taken, so an A/B runs with FA4_SELF_CHECK=0.) Alternate the libraries (base, x, x,
base) to see the run-to-run spread. Rows missing from a table print 0 and stay out of its mean. Standard
library only.
"""
import argparse
import math
import os
import sys


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read(path):
    """{(head_dim, causal, batch x seqlen): (fa4rt TFLOP/s, cuDNN TFLOP/s)} in the table's order."""
    rows, col = {}, None
    if not os.path.exists(path):  # a run that was skipped (no PyTorch or GPU) or cut off before its table
        return rows
    with open(path) as f:
        for line in f:
            if not line.startswith("|"):
                continue
            c = cells(line)
            if c[0] == "head_dim" and "fa4rt" in c and "cuDNN" in c:
                col = (c.index("fa4rt"), c.index("cuDNN"))
            elif col and len(c) > max(col) and c[0] and not c[0].startswith("-"):
                try:
                    rows[(c[0], c[1], c[2])] = (float(c[col[0]]), float(c[col[1]]))
                except ValueError:
                    pass  # a row without numbers (an error in its place)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", nargs="+", help="bench_attention.py .md outputs; the first is the reference")
    ap.add_argument("--names", help="comma-separated column names (default: the file names)")
    a = ap.parse_args()
    names = a.names.split(",") if a.names else [os.path.splitext(os.path.basename(p))[0] for p in a.tables]
    if len(names) != len(a.tables):
        sys.exit("compare_attention: %d names for %d tables" % (len(names), len(a.tables)))
    tables = [read(p) for p in a.tables]
    if not tables[0]:
        sys.exit("compare_attention: no bench_attention.py rows in %s" % a.tables[0])
    print("| head_dim | causal | b x s | " + " | ".join(names) + " | cuDNN (first) |")
    print("|---" * (len(names) + 4) + "|")
    logs = [[] for _ in names]
    for key, (base, cudnn) in tables[0].items():
        tflops = [t.get(key, (0.0, 0.0))[0] for t in tables]
        for i, x in enumerate(tflops):
            if x and base:
                logs[i].append(math.log(x / base))
        print("| %s | %s | %.1f |" % (" | ".join(key), " | ".join("%.1f" % x for x in tflops), cudnn))
    print("\ngeometric mean against %s: " % names[0] +
          ", ".join("%s %.3f (%d rows)" % (n, math.exp(sum(l) / len(l)), len(l)) for n, l in zip(names, logs) if l))
    return 0


if __name__ == "__main__":
    sys.exit(main())
