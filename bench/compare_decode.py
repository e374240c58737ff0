#!/usr/bin/env python3
"""Side by side: the fa4rt column of several bench_decode.py outputs (one library each, run in one device call),
as GB/s and as a ratio to the best peer of the first output, with each output's geometric mean ratio.

    FA4_LIB=build/libfa4rt.so   python3 bench/bench_decode.py --pages "" --reps 5 > base.txt
    FA4_LIB=build-x/libfa4rt.so python3 bench/bench_decode.py --pages "" --reps 5 > x.txt
    python3 bench/compare_decode.py base.txt x.txt

The peers run again in every output; the first output's best peer is the one yardstick, so the ratios differ
only by fa4rt's numbers. Rows missing from an output print 0 and stay out of its mean. Standard library only.
"""
import argparse
import math
import os
import re
import sys


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read(path):
    """{shape: (fa4rt GB/s, best peer GB/s)} in the file's order, by the table header's column names."""
    rows, col = {}, None
    with open(path) as f:
        for line in f:
            if not line.startswith("|"):
                continue
            c = cells(line)
            if c[0] == "shape" and "fa4rt" in c and "best peer" in c:
                col = (c.index("fa4rt"), c.index("best peer"))
            elif col and re.match(r"\d+x\d+k? \d+/\d+ sq\d+$", c[0]):
                try:
                    rows[c[0]] = (int(c[col[0]]), int(c[col[1]]))
                except (ValueError, IndexError):
                    pass  # a row without numbers (a peer that could not run)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outputs", nargs="+", help="bench_decode.py outputs; the first is the reference")
    ap.add_argument("--names", help="comma-separated column names (default: the file names)")
    a = ap.parse_args()
    names = a.names.split(",") if a.names else [os.path.splitext(os.path.basename(p))[0] for p in a.outputs]
    if len(names) != len(a.outputs):
        sys.exit("compare_decode: %d names for %d outputs" % (len(names), len(a.outputs)))
    tables = [read(p) for p in a.outputs]
    if not tables[0]:
        sys.exit("compare_decode: no bench_decode.py rows in %s" % a.outputs[0])
    width = max(8, max(len(n) for n in names))
    print("| shape | " + " | ".join(names) + " | best peer | " + " | ".join(n + " / best" for n in names) + " |")
    print("|---" * (2 * len(names) + 2) + "|")
    sys.stdout.flush()
    logs = [[] for _ in names]
    for shape, (_, best) in tables[0].items():
        gbs = [t.get(shape, (0, 0))[0] for t in tables]
        for i, g in enumerate(gbs):
            if g and best:
                logs[i].append(math.log(g / best))
        print("| %s | %s | %d | %s |" % (shape, " | ".join("%*d" % (width, g) for g in gbs), best,
                                         " | ".join("%.2f" % (g / best) if best else "-" for g in gbs)))
    print("\ngeometric mean of fa4rt / best peer: " +
          ", ".join("%s %.3f (%d rows)" % (n, math.exp(sum(l) / len(l)), len(l)) for n, l in zip(names, logs) if l))
    return 0


if __name__ == "__main__":
    sys.exit(main())
