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


def read_table(path, first, columns, key_of, number):
    """{key_of(cells): the `columns` (by the header's names; the header's first cell is `first`) as numbers}
    in the file's order. Rows whose key is None, or without numbers there, are left out; so is a missing file
    (a run that was skipped or cut off)."""
    rows, col = {}, None
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            if not line.startswith("|"):
                continue
            c = cells(line)
            if c[0] == first and all(name in c for name in columns):
                col = [c.index(name) for name in columns]
                continue
            key = key_of(c) if col else None
            if key is not None:
                try:
                    rows[key] = tuple(number(c[i]) for i in col)
                except (ValueError, IndexError):
                    pass  # a row without numbers (a peer or a kernel that could not run)
    return rows


def read(path):
    """{shape: (fa4rt GB/s, best peer GB/s)}"""
    return read_table(path, "shape", ("fa4rt", "best peer"),
                      lambda c: c[0] if re.match(r"\d+x\d+k? \d+/\d+ sq\d+$", c[0]) else None, int)


def read_all(description, bench, read):
    """The command line of a comparison of `bench` outputs: their column names and tables, each read by `read`."""
    tool = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("outputs", nargs="+", help="%s outputs; the first is the reference" % bench)
    ap.add_argument("--names", help="comma-separated column names (default: the file names)")
    a = ap.parse_args()
    names = a.names.split(",") if a.names else [os.path.splitext(os.path.basename(p))[0] for p in a.outputs]
    if len(names) != len(a.outputs):
        sys.exit("%s: %d names for %d outputs" % (tool, len(names), len(a.outputs)))
    tables = [read(p) for p in a.outputs]
    if not tables[0]:
        sys.exit("%s: no %s rows in %s" % (tool, bench, a.outputs[0]))
    return names, tables


def add_log_ratios(logs, values, reference):
    """logs[i] gains log(values[i] / reference) for each value (a missing one, 0, gains nothing)."""
    for i, x in enumerate(values):
        if x and reference:
            logs[i].append(math.log(x / reference))


def geometric_means(names, logs):
    """Each output's geometric mean ratio and its row count, for the outputs that have rows."""
    return ", ".join("%s %.3f (%d rows)" % (n, math.exp(sum(l) / len(l)), len(l)) for n, l in zip(names, logs) if l)


def main():
    names, tables = read_all(__doc__.split("\n")[0], "bench_decode.py", read)
    width = max(8, max(len(n) for n in names))
    print("| shape | " + " | ".join(names) + " | best peer | " + " | ".join(n + " / best" for n in names) + " |")
    print("|---" * (2 * len(names) + 2) + "|")
    sys.stdout.flush()
    logs = [[] for _ in names]
    for shape, (_, best) in tables[0].items():
        gbs = [t.get(shape, (0, 0))[0] for t in tables]
        add_log_ratios(logs, gbs, best)
        print("| %s | %s | %d | %s |" % (shape, " | ".join("%*d" % (width, g) for g in gbs), best,
                                         " | ".join("%.2f" % (g / best) if best else "-" for g in gbs)))
    print("\ngeometric mean of fa4rt / best peer: " + geometric_means(names, logs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
