#!/usr/bin/env python3
"""What a variant costs: fa4rt with a sliding window, softcapping or attention sinks against the same call
without it, on the work each does (target: within 5%).

Prefill: 1 x 16384 tokens, 16 heads, head_dim 128, bf16, TFLOP/s over the (query, key) pairs each call
computes: 4 * d * pairs (a window counts only the pairs inside it; its baseline is causal, the window's
right side), and for the window rows also over the blocks the kernel visits (issue 11's measure: the pairs
of every block not skipped, masked or not; the tiles come from `fa4rt plan` beside FA4_LIB). Decode: 64
sequences x 4096 keys, GQA 32/8, num_splits 0 with a workspace, K+V GB/s over the keys each call reads (a
window's: the last window_left + 1; its baselines: all 4096 keys, and a cache of just the 2048 keys it
reads, the same work). Times: each row's two calls in alternation (peers_env.paired_ms_per_call: CUDA events
around 5 calls, the median of 10), so a drift of the clocks weighs on both alike. Every output is finite (a
NaN or inf fails the row).

    FA4_LIB=build/libfa4rt.so python3 bench/bench_variants.py [--d 64|128|256] [--prefill-only]

--d: the prefill rows' head dim (2048 / d heads, so the same 16k tokens and model width; default 128).
"""

import argparse
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import fa4rt  # noqa: E402  (needs only ctypes)
import peers_env  # noqa: E402


def paired_ms(torch, with_it, without):
    """(ms of with_it, ms of without), timed in alternation (peers_env); both outputs must be finite."""
    ms = peers_env.paired_ms_per_call(torch, with_it, without)
    for call in (with_it, without):
        if not bool(torch.isfinite(call()).all()):
            raise RuntimeError("non-finite output")
    return ms


def plan_tiles(d):
    """(tile_m, tile_n) of the causal, windowed prefill Plan the library picks, from `fa4rt plan`; None
    when the tool is not beside the library."""
    tool = os.path.join(os.path.dirname(os.path.abspath(os.environ.get("FA4_LIB", "build/libfa4rt.so"))), "fa4rt")
    if not os.path.exists(tool):
        return None
    backend = os.environ.get("FA4_BACKEND", "auto")
    text = subprocess.run([tool, "plan", "--backend", backend, "--d", str(d), "--causal", "--window"],
                          capture_output=True, text=True).stdout
    m = re.search(r"tiles (\d+) \(q rows\) x (\d+) \(k rows\)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def visited_pairs(s, left, tiles):
    """(query, key) pairs of the blocks a bottom-right (left, 0) window visits over s x s (left < 0:
    causal): per tile of rows, from the block of its first row's first key to its last row's last key."""
    tile_m, tile_n = tiles
    pairs = 0
    for m0 in range(0, s, tile_m):
        m1 = min(s, m0 + tile_m)
        lo = 0 if left < 0 else max(0, m0 - left)
        pairs += (m1 - m0) * ((m1 - 1) // tile_n - lo // tile_n + 1) * tile_n
    return pairs


def row(name, value, base, unit):
    print("| %s | %.1f %s | %.1f %s | %.3f |" % (name, value, unit, base, unit, value / base), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--d", type=int, default=128, help="prefill head dim (2048 / d heads)")
    parser.add_argument("--prefill-only", action="store_true", help="skip the decode rows")
    args = parser.parse_args()
    env = peers_env.torch_or_skip()
    if env is None:
        return 77
    torch = env[0]
    attn = fa4rt.Attention()
    print("fa4rt %s, torch %s, %s\n" % (fa4rt.version(), torch.__version__, torch.cuda.get_device_name()))
    print("| variant | with it | without | ratio |\n|---|---|---|---|")

    # Prefill.
    s, d = 16384, args.d
    h = 2048 // d
    q, k, v = (torch.randn(1, s, h, d, device="cuda").to(torch.bfloat16) for _ in "qkv")
    sinks = torch.randn(h, device="cuda")
    out = torch.empty_like(q)
    full_pairs, causal_pairs = s * s, s * (s + 1) // 2
    left = 4095
    window_pairs = sum(min(t, left) + 1 for t in range(s))

    def run(**kw):
        return lambda: attn.run(q, k, v, out=out, **kw)

    def prefill_row(name, pairs, base_pairs, kw, base_kw):
        ms, base_ms = paired_ms(torch, run(**kw), run(**base_kw))
        row(name, 4 * d * h * pairs / ms / 1e9, 4 * d * h * base_pairs / base_ms / 1e9, "TFLOP/s")
        return ms, base_ms

    prefill_row("prefill softcap 30", full_pairs, full_pairs, dict(softcap=30.0), {})
    prefill_row("prefill sinks", full_pairs, full_pairs, dict(sinks=sinks), {})
    window_ms, causal_ms = prefill_row("prefill window (4095, 0) vs causal", window_pairs, causal_pairs,
                                       dict(window=(left, 0)), dict(causal=True))
    tiles = plan_tiles(d)
    if tiles:
        row("prefill window vs causal, visited blocks (%dx%d tiles)" % tiles,
            4 * d * h * visited_pairs(s, left, tiles) / window_ms / 1e9,
            4 * d * h * visited_pairs(s, -1, tiles) / causal_ms / 1e9, "TFLOP/s")
    prefill_row("prefill all three, causal", window_pairs, causal_pairs,
                dict(window=(left, 0), softcap=30.0, sinks=sinks), dict(causal=True))

    if args.prefill_only:
        return 0

    # Decode.
    b, keys, hq, hkv, d = 64, 4096, 32, 8, 128
    q = torch.randn(b, 1, hq, d, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(b, keys, hkv, d, device="cuda").to(torch.bfloat16) for _ in "kv")
    sinks = torch.randn(hq, device="cuda")
    out = torch.empty_like(q)
    ws = torch.empty(attn.workspace_size(q, k, v, num_splits=0), dtype=torch.uint8, device="cuda")

    def decode_row(name, read_keys, kw, base_keys, base_kv=None):
        bk, bv = base_kv or (k, v)
        ms, base_ms = paired_ms(torch, lambda: attn.run(q, k, v, out=out, num_splits=0, workspace=ws, **kw),
                                lambda: attn.run(q, bk, bv, out=out, num_splits=0, workspace=ws))
        row(name, 2 * b * read_keys * hkv * d * 2 / ms / 1e6, 2 * b * base_keys * hkv * d * 2 / base_ms / 1e6, "GB/s")

    decode_row("decode softcap 30", keys, dict(softcap=30.0), keys)
    decode_row("decode sinks", keys, dict(sinks=sinks), keys)
    decode_row("decode window (2047, -1) vs all 4096 keys", 2048, dict(window=(2047, -1)), keys)
    # The same work without a window: a cache of the 2048 keys the window reads.
    decode_row("decode window (2047, -1) vs a 2048-key cache", 2048, dict(window=(2047, -1)), 2048,
               (k[:, -2048:].contiguous(), v[:, -2048:].contiguous()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
