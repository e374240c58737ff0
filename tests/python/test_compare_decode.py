#!/usr/bin/env python3
"""bench/compare_decode.py reads the fa4rt and best-peer columns by the table header's names (not by position),
skips log lines and rows without numbers, and prints each output's ratios to the first output's best peer."""
import math
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "compare_decode.py")

HEADER = ("| shape | fa4rt | fa4rt by batch | sdpa flash | cuDNN | FA4-cute | best peer | fa4rt/best | by batch/best | check |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n")


def table(rows):
    """rows: (shape, fa4rt, by_batch, flash, cudnn, best)"""
    text = "fa4rt 0.2.0 (x), torch ...\n\n" + HEADER
    for shape, f, b, fl, cu, best in rows:
        text += "[00:00:00.000] [fa4rt] [info] compiled something\n"
        text += "| %s | %d | %d | %d | %d | n/a | %d | %.2f | %.2f | ok |\n" % (shape, f, b, fl, cu, best, f / best, b / best)
    text += "| 1x1k 64/8 sq1 | n/a | n/a | 10 | 20 | n/a | 20 | - | - | skipped |\n"  # no fa4rt number: left out
    return text


def compare(script, files, names):
    """The script's output over `files` ({file name: text}, written in order to a temporary folder; a name
    without text is a file that does not exist)."""
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, text in files.items():
            paths.append(os.path.join(d, name))
            if text is not None:
                with open(paths[-1], "w") as f:
                    f.write(text)
        return subprocess.run([sys.executable, script, *paths, "--names", names], capture_output=True, text=True,
                              check=True).stdout


def main():
    base = table([("1x1k 32/8 sq1", 400, 500, 390, 550, 550), ("64x4k 8/1 sq1", 3300, 3500, 2600, 3600, 3600)])
    other = table([("1x1k 32/8 sq1", 440, 500, 400, 560, 560), ("64x4k 8/1 sq1", 3000, 3400, 2500, 3700, 3700)])
    out = compare(SCRIPT, {"base.txt": base, "x.txt": other}, "base,x")
    lines = {l.split("|")[1].strip(): [c.strip() for c in l.strip().strip("|").split("|")] for l in out.splitlines()
             if l.startswith("| ") and "sq1" in l}
    # Ratios against the first output's best peer (550 and 3600), whatever the second output's peers read.
    assert lines["1x1k 32/8 sq1"][1:] == ["400", "440", "550", "0.73", "0.80"], lines["1x1k 32/8 sq1"]
    assert lines["64x4k 8/1 sq1"][1:] == ["3300", "3000", "3600", "0.92", "0.83"], lines["64x4k 8/1 sq1"]
    assert "1x1k 64/8 sq1" not in lines, "a row without an fa4rt number must be left out"
    want = {"base": math.sqrt(400 / 550 * 3300 / 3600), "x": math.sqrt(440 / 550 * 3000 / 3600)}
    summary = out.strip().splitlines()[-1]
    for name, g in want.items():
        assert "%s %.3f (2 rows)" % (name, g) in summary, (summary, name, g)
    print("compare_decode: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
