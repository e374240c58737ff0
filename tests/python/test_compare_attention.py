#!/usr/bin/env python3
"""bench/compare_attention.py reads the fa4rt and cuDNN columns by the table header's names, skips rows
without numbers, keeps the fa4rt numbers of a pass that timed fa4rt alone (peers "-"), and gives each table's
geometric mean against the first table's fa4rt column."""
import math
import os
import sys

from test_compare_decode import compare

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "compare_attention.py")

HEADER = ("| head_dim | causal | batch x seqlen | fa4rt | PyTorch flash | cuDNN | FA4-cute | fa4rt/cuDNN | fa4rt/FA4-cute | check |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n")


def table(rows):
    """rows: (head_dim, causal, shape, fa4rt, cudnn)"""
    text = "# fa4rt attention forward benchmark\n\n- commit: x\n\n" + HEADER
    for d, causal, shape, f, cu in rows:
        text += "| %s | %s | %s | %.1f | 300.0 | %.1f | - | %.2f | - | ok 1e-3 |\n" % (d, causal, shape, f, cu, f / cu)
    text += "| 256 | no | 1x16384 | error: out of memory | 300.0 | 600.0 | - | - | - | - |\n"  # no number: left out
    return text


def fa4rt_only_table(rows):
    """A bench_attention.py --fa4rt-only table: the peers' columns show -."""
    text = "# fa4rt attention forward benchmark\n\n- peers: not timed (--fa4rt-only)\n\n" + HEADER
    for d, causal, shape, f in rows:
        text += "| %s | %s | %s | %.1f | - | - | - | - | - | ok 1e-3 |\n" % (d, causal, shape, f)
    return text


def main():
    base = table([("64", "no", "32x512", 300.0, 400.0), ("GQA 32q/8kv, 128", "yes", "2x8192", 600.0, 550.0)])
    other = table([("64", "no", "32x512", 330.0, 410.0), ("GQA 32q/8kv, 128", "yes", "2x8192", 540.0, 560.0)])
    alone = fa4rt_only_table([("64", "no", "32x512", 360.0), ("GQA 32q/8kv, 128", "yes", "2x8192", 600.0)])
    out = compare(SCRIPT, {"base.md": base, "x.md": other, "skipped.md": None, "alone.md": alone}, "base,x,skipped,alone")
    lines = {tuple(c.strip() for c in l.strip().strip("|").split("|")[:3]): [c.strip() for c in l.strip().strip("|").split("|")]
             for l in out.splitlines() if l.startswith("| ") and not l.startswith("| head_dim")}
    assert lines[("64", "no", "32x512")][3:] == ["300.0", "330.0", "0.0", "360.0", "400.0"], lines
    assert lines[("GQA 32q/8kv, 128", "yes", "2x8192")][3:] == ["600.0", "540.0", "0.0", "600.0", "550.0"], lines
    assert ("256", "no", "1x16384") not in lines, "a row without an fa4rt number must be left out"
    summary = out.strip().splitlines()[-1]
    assert "base 1.000 (2 rows)" in summary, summary
    assert "x %.3f (2 rows)" % math.sqrt(330 / 300 * 540 / 600) in summary, summary
    assert "skipped" not in summary, "a table without rows has no mean"
    assert "alone %.3f (2 rows)" % math.sqrt(360 / 300) in summary, summary
    print("compare_attention: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
