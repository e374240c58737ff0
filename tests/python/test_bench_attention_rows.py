#!/usr/bin/env python3
"""bench/bench_attention.py --rows keeps the sweep's rows whose "head_dim causal batchxseqlen" matches the
regex (what an A/B of a change that touches some rows runs), and every row without it. No GPU needed: the
sweep is built before torch is touched."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import bench_attention  # noqa: E402


def keys(quick, rows=None):
    return [bench_attention.row_key(s) for s in bench_attention.sweep(quick, rows)]


def main():
    every = keys(False)
    assert len(every) == 52 and len(set(every)) == 52, every
    assert len(keys(True)) == 28, keys(True)
    assert keys(False, "^256 yes") == ["256 yes %dx%d" % (16384 // s, s) for s in (512, 1024, 2048, 4096, 8192, 16384)]
    assert keys(True, "GQA .* yes 2x8192") == ["GQA 32q/8kv, 128 yes 2x8192"], keys(True, "GQA .* yes 2x8192")
    assert keys(False, " no 32x512$") == ["64 no 32x512", "128 no 32x512", "256 no 32x512", "192x128 no 32x512"], \
        keys(False, " no 32x512$")
    assert keys(True, "^192x128 yes") == ["192x128 yes 32x512", "192x128 yes 8x2048", "192x128 yes 1x16384"]
    shape = bench_attention.sweep(True, "^192x128 no 32x512")[0]
    assert (shape.head_dim, shape.head_dim_v, shape.heads_q) == (192, 128, 16)
    assert shape.flops == 2 * 32 * 16 * 512 * 512 * (192 + 128), shape.flops
    assert keys(False, "^999") == []
    print("bench_attention --rows: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
