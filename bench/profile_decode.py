#!/usr/bin/env python3
"""Where a decode call's time goes: per-kernel GPU time (torch.profiler, CUPTI) of fa4rt's decode kernel and
its combine, for a few of issue 10's rows (bf16, d128), with num_splits 0 (batch-invariant and
split_by_batch) and 1. Each kernel's time is its own start to end: the combine, a programmatic dependent
launch, starts while the decode kernel runs and waits for it, so the sum overstates the call's wall time
(bench_decode.py measures that). It found the combine's 4 waves at ~120 registers
(bench/results/2026-12-01-h200-decode-splits.md, section 4).

    FA4_LIB=build/libfa4rt.so python3 bench/profile_decode.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import fa4rt  # noqa: E402
from torch.profiler import profile, ProfilerActivity  # noqa: E402

attn = fa4rt.Attention()
D = 128
for b, s, hq, hkv, sq in [(1, 1024, 8, 1, 1), (1, 1024, 32, 8, 1), (8, 1024, 8, 1, 1), (1, 4096, 8, 1, 1),
                          (8, 8192, 32, 8, 1), (64, 4096, 32, 8, 1), (16, 16384, 32, 8, 4), (1, 32768, 8, 1, 1)]:
    q = torch.randn(b, sq, hq, D, device="cuda").bfloat16()
    k = torch.randn(b, s, hkv, D, device="cuda").bfloat16()
    v = torch.randn(b, s, hkv, D, device="cuda").bfloat16()
    out = torch.empty(b, sq, hq, D, device="cuda", dtype=torch.bfloat16)
    for splits, bb in ((0, False), (0, True), (1, False)):
        ws = attn.workspace_size(q, k, v, out=out, num_splits=splits, split_by_batch=bb)
        w = torch.empty(ws, dtype=torch.uint8, device="cuda") if ws else None
        for _ in range(3):
            attn.run(q, k, v, out=out, num_splits=splits, workspace=w, split_by_batch=bb)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                attn.run(q, k, v, out=out, num_splits=splits, workspace=w, split_by_batch=bb)
            torch.cuda.synchronize()
        ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        per = {}
        for e in ev:
            per.setdefault(e.name[:40], []).append(e.device_time)
        kb = 2 * b * s * hkv * D * 2
        tot = sum(sum(x) for x in per.values()) / 10
        print("%dx%d %d/%d sq%d splits %d%s: %s | total %.1f us = %.0f GB/s" % (
            b, s, hq, hkv, sq, splits, " by batch" if bb else "", ", ".join("%s %.1f us" % (n, sum(t) / len(t)) for n, t in per.items()), tot, kb / tot / 1e3), flush=True)
