#!/usr/bin/env python3
"""Ragged prefill speed: fa4rt on a ragged batch (cu_seqlens_q/k) next to fa4rt on a dense batch of the same
tokens and FLOPs, TFLOP/s (target: ragged within 10% of dense), and the ragged batch's keys in a paged
cache (pages of 16, 32, 64 and 256 keys in shuffled order; target: within 10% of the contiguous keys).

The ragged batch: sequence lengths drawn from 100..8192 (seeded) summing to 16384 tokens, bf16, head_dim 128,
16 heads, causal and not. The dense batch: b x s = 16384 tokens with s = sum(L_i^2) / 16384, so both do about
the same FLOPs (4 * h * d * sum L_i^2, halved when causal; each side counts its own). Times: CUDA events
around 5 calls after a warm-up, median of 10; each ratio times its two calls (ragged and dense, contiguous and
paged) in alternation, so that a drift of the clocks over the run weighs on both alike. Check: each ragged
sequence's output against PyTorch's flash SDPA on that sequence alone (max abs diff), for the contiguous and
every paged run.

    FA4_LIB=build/libfa4rt.so python3 bench/bench_ragged.py [--seed N]
"""

import argparse
import os
import random
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import fa4rt  # noqa: E402  (needs only ctypes)
import peers_env  # noqa: E402

TOKENS, HEADS, D = 16384, 16, 128
PAGE_SIZES = (16, 32, 64, 256)
CHECK_TOL = 0.05  # max abs diff of bf16 outputs against flash; a real bug is far beyond it


def lengths(seed):
    """Lengths in 100..8192 summing to TOKENS (the last one takes the remainder, merged if under 100)."""
    rng, out = random.Random(seed), []
    while sum(out) < TOKENS:
        out.append(min(rng.randint(100, 8192), TOKENS - sum(out)))
    if out[-1] < 100 and len(out) > 1:
        out[-2] += out.pop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1, help="the lengths' seed (default 1)")
    ap.add_argument("--pages", default=",".join(map(str, PAGE_SIZES)), help="page sizes (default %(default)s)")
    ap.add_argument("--in-order", action="store_true", help="each sequence's pages in order (default: shuffled)")
    args = ap.parse_args()
    page_sizes = [int(p) for p in args.pages.split(",")]
    env = peers_env.torch_or_skip()
    if env is None:
        return 77
    torch, F, SDPBackend, sdpa_kernel = env
    attn = fa4rt.Attention()
    lens = lengths(args.seed)
    square = sum(n * n for n in lens)
    batch = max(1, round(TOKENS * TOKENS / square))
    s = TOKENS // batch
    print("fa4rt %s, torch %s, %s" % (fa4rt.version(), torch.__version__, torch.cuda.get_device_name()))
    print("ragged: %d sequences, lengths %s; dense: %dx%d\n" % (len(lens), lens, batch, s))
    paged_heads = "".join(" paged %d TFLOP/s | paged/ragged |" % ps for ps in page_sizes)
    print("| causal | ragged TFLOP/s | dense TFLOP/s | ragged/dense |%s check |" % paged_heads)
    print("|---|---|---|---|%s---|" % ("---|---|" * len(page_sizes)))

    def randn(*shape):
        return torch.randn(*shape, device="cuda").to(torch.bfloat16)

    q, k, v = randn(TOKENS, HEADS, D), randn(TOKENS, HEADS, D), randn(TOKENS, HEADS, D)
    cu = torch.tensor([0] + lens, device="cuda").cumsum(0).to(torch.int32)
    dq, dk, dv = randn(batch, s, HEADS, D), randn(batch, s, HEADS, D), randn(batch, s, HEADS, D)
    out, dense_out = torch.empty_like(q), torch.empty_like(dq)
    ragged_kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens), max_seqlen_k=max(lens), num_splits=1)
    # The same keys in a page pool: sequence i's pages in shuffled order, its table row padded with -1.
    starts, rng, paged = cu.tolist(), random.Random(args.seed + 100), {}
    for ps in page_sizes:
        counts = [(n + ps - 1) // ps for n in lens]
        order = list(range(sum(counts)))
        if not args.in_order:
            rng.shuffle(order)
        k_pool = torch.zeros(len(order), ps, HEADS, D, device="cuda", dtype=torch.bfloat16)
        v_pool = torch.zeros_like(k_pool)
        table = torch.full((len(lens), max(counts)), -1, dtype=torch.int32)
        taken = 0
        for i, (a, n) in enumerate(zip(starts, lens)):
            for j in range(counts[i]):
                page, rows = order[taken], min(ps, n - j * ps)
                k_pool[page, :rows] = k[a + j * ps:a + j * ps + rows]
                v_pool[page, :rows] = v[a + j * ps:a + j * ps + rows]
                table[i, j] = page
                taken += 1
        used = torch.tensor(lens, dtype=torch.int32, device="cuda")
        paged[ps] = (k_pool, v_pool, dict(cu_seqlens_q=cu, max_seqlen_q=max(lens), page_table=table.cuda(), seqused_k=used,
                                          max_seqlen_k=max(lens), num_splits=1))
    for causal in (False, True):
        flops = 4 * HEADS * D * square / (2 if causal else 1)
        dense_flops = 4 * HEADS * D * batch * s * s / (2 if causal else 1)
        ragged_ms, dense_ms = peers_env.paired_ms_per_call(
            torch, lambda: attn.run(q, k, v, out=out, causal=causal, **ragged_kw),
            lambda: attn.run(dq, dk, dv, out=dense_out, causal=causal))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            refs = [F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1)[None] for t in (q, k, v)), is_causal=causal)
                    for a, b in zip(starts, starts[1:])]

        def worst_error(kk, vv, kw):
            out.fill_(float("nan"))
            attn.run(q, kk, vv, out=out, causal=causal, **kw)
            return max((out[a:b].float() - ref[0].transpose(0, 1).float()).abs().nan_to_num(nan=1e9).max().item()
                       for (a, b), ref in zip(zip(starts, starts[1:]), refs))

        worst = worst_error(k, v, ragged_kw)
        ragged, dense = flops / ragged_ms / 1e9, dense_flops / dense_ms / 1e9
        cells = ""
        for ps in page_sizes:
            k_pool, v_pool, kw = paged[ps]
            contiguous_ms, paged_ms = peers_env.paired_ms_per_call(
                torch, lambda: attn.run(q, k, v, out=out, causal=causal, **ragged_kw),
                lambda: attn.run(q, k_pool, v_pool, out=out, causal=causal, **kw))
            worst = max(worst, worst_error(k_pool, v_pool, kw))
            cells += " %.1f | %.2f |" % (flops / paged_ms / 1e9, contiguous_ms / paged_ms)
        print("| %s | %.1f | %.1f | %.2f |%s %s %.1e |" % ("yes" if causal else "no", ragged, dense, ragged / dense, cells,
                                                          "ok" if worst <= CHECK_TOL else "BAD", worst), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
