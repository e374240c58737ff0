#!/usr/bin/env python3
"""Side by side: the fa4rt column of several bench_attention.py tables (one library each, run in one device
call), with each table's geometric mean against the first and the first table's cuDNN column as a yardstick
(the later tables may come from --fa4rt-only passes).

    FA4_SELF_CHECK=0 FA4_LIB=build-main/libfa4rt.so python3 bench/bench_attention.py base --quick
    FA4_SELF_CHECK=0 FA4_LIB=build-x/libfa4rt.so    python3 bench/bench_attention.py x --quick
    python3 bench/compare_attention.py base.md x.md

(A library copied out of its build has no fa4rt-selfcheck beside it; with the first-use check on, its fast
kernels would then not be taken, so an A/B runs with FA4_SELF_CHECK=0.) Alternate the libraries (base, x, x,
base) to see the run-to-run spread. Rows missing from a table print 0 and stay out of its mean. Standard
library only.
"""
import sys

from compare_decode import add_log_ratios, geometric_means, read_all, read_table


def read(path):
    """{(head_dim, causal, batch x seqlen): (fa4rt TFLOP/s, cuDNN TFLOP/s)}; cuDNN 0 where a pass timed fa4rt
    alone (bench_attention.py --fa4rt-only shows "-")."""
    return read_table(path, "head_dim", ("fa4rt", "cuDNN"), lambda c: tuple(c[:3]) if not c[0].startswith("-") else None,
                      lambda x: 0.0 if x == "-" else float(x))


def main():
    names, tables = read_all(__doc__.split("\n")[0], "bench_attention.py", read)
    print("| head_dim | causal | b x s | " + " | ".join(names) + " | cuDNN (first) |")
    print("|---" * (len(names) + 4) + "|")
    logs = [[] for _ in names]
    for key, (base, cudnn) in tables[0].items():
        tflops = [t.get(key, (0.0, 0.0))[0] for t in tables]
        add_log_ratios(logs, tflops, base)
        print("| %s | %s | %.1f |" % (" | ".join(key), " | ".join("%.1f" % x for x in tflops), cudnn))
    print("\ngeometric mean against %s: %s" % (names[0], geometric_means(names, logs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
