#!/usr/bin/env python3
"""Serving shapes through the Python wrapper (fa4rt.Attention.run with cu_seqlens, seqused_k, page tables,
split-KV; merge) against PyTorch: each sequence alone, in float32 from the same bf16 inputs, with
bottom-right causal masking. Every element of O and the LSE is checked; outputs are NaN-filled first; the
inputs are random.

Exit status: 0 pass, 1 fail, 77 skipped (prints "SKIPPED: reason"). Run: python3 tests/python/test_serving.py
"""

import math
import sys
import random

from gpu_env import banner, fa4rt, torch_or_skip  # noqa: E402

torch = torch_or_skip()

# Per element: |got - want| <= OUT_TOL * (1 + |want|) (about 8 bf16 ulps: P is rounded to bf16 before PV), and
# for the LSE LSE_TOL + LSE_RTOL * |want|, as in test_oracle.py. A lost page, a wrong offset or a dropped part
# of a split is far beyond them.
OUT_TOL = 3e-2
LSE_TOL, LSE_RTOL = 2e-3, 1e-4


class Case:
    """seqlens_q / seqlens_k: per sequence (the keys each sees). ragged_q: q packed [total_q, h, d], else
    [b, s, h, d] with every sequence as long. kv: 'dense' ([b, longest, h, d] + seqused_k), 'ragged'
    (cu_seqlens_k) or 'paged' (shuffled pages + seqused_k). workspace: None (run() decides), 'sized'
    (workspace_size() bytes, passed in). split_by_batch: num_splits 0 weighs the batch size too."""

    def __init__(self, name, seqlens_q, seqlens_k, ragged_q=True, kv="ragged", page_size=64, heads=(8, 2),
                 d=128, causal=False, num_splits=1, workspace=None, split_by_batch=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]


CASES = []
for causal in (False, True):
    m = " causal" if causal else ""
    CASES += [
        Case("ragged prefill GQA 8/2" + m, [1, 130, 77, 300, 0], [5, 130, 200, 257, 9], causal=causal),
        Case("ragged MQA 6/1 d64" + m, [64, 3, 257], [64, 100, 300], heads=(6, 1), d=64, causal=causal),
        Case("dense q, padded dense cache" + m, [40, 40, 40], [0, 90, 200], ragged_q=False, kv="dense", causal=causal),
    ]
    for ps in (16, 64, 256):
        CASES.append(Case("paged %d, ragged q%s" % (ps, m), [3, 1, 50, 0], [300, 200, 70, 10], kv="paged",
                          page_size=ps, causal=causal))
    CASES += [
        Case("split decode 32/8 paged, num_splits 0, own workspace" + m, [1, 1, 1], [4000, 37, 1500], kv="paged",
             heads=(32, 8), causal=causal, num_splits=0),
        Case("split decode 32/8 paged, num_splits 0, workspace passed" + m, [1, 1, 1], [4000, 37, 1500],
             kv="paged", heads=(32, 8), causal=causal, num_splits=0, workspace="sized"),
        Case("split decode sq 4, 8/1 ragged kv, num_splits 3" + m, [4, 4, 4], [3000, 4, 900], ragged_q=False,
             heads=(8, 1), causal=causal, num_splits=3),
        Case("split decode 32/32 dense, num_splits 0" + m, [1, 1], [2500, 2500], ragged_q=False, kv="dense",
             heads=(32, 32), causal=causal, num_splits=0),
        Case("split decode 8/1 paged, split_by_batch, workspace passed" + m, [1, 2], [3000, 700], kv="paged",
             page_size=16, heads=(8, 1), causal=causal, num_splits=0, workspace="sized", split_by_batch=True),
    ]


def reference(q, k, v, causal):
    """One sequence in float32: q [sq, hq, d], k/v [sk, hkv, d] -> out [sq, hq, dv], lse [hq, sq] (rows that
    see no key: out 0, lse -inf)."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[:2]
    qf = q.float().transpose(0, 1)
    kf = k.float().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
    vf = v.float().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
    logits = (qf @ kf.transpose(1, 2)) / math.sqrt(d)
    if causal:
        rows = torch.arange(sq, device=q.device)[:, None]
        cols = torch.arange(sk, device=q.device)[None, :]
        logits = logits.masked_fill(cols > rows + sk - sq, float("-inf"))
    lse = torch.logsumexp(logits, dim=-1)
    p = torch.exp(logits - lse[..., None]).nan_to_num(0.0)
    return (p @ vf).transpose(0, 1), lse


class Problem:
    """A case's tensors, the run() keywords that describe them, and each sequence's own q, k, v."""

    def __init__(self, c, gen):
        dev = "cuda"
        hq, hkv = c.heads
        b = len(c.seqlens_q)

        def randn(*shape):
            return torch.randn(*shape, generator=gen, device=dev).to(torch.bfloat16)

        def offsets(lengths):
            return torch.tensor([0] + lengths, dtype=torch.int32, device=dev).cumsum(0).to(torch.int32)

        kw = {}
        if c.ragged_q:
            self.q = randn(sum(c.seqlens_q), hq, c.d)
            self.cu_q = [0]
            for n in c.seqlens_q:
                self.cu_q.append(self.cu_q[-1] + n)
            kw.update(cu_seqlens_q=offsets(c.seqlens_q), max_seqlen_q=max(max(c.seqlens_q), 1))
            self.q_seq = [self.q[self.cu_q[i]:self.cu_q[i + 1]] for i in range(b)]
        else:
            assert len(set(c.seqlens_q)) == 1
            self.q = randn(b, c.seqlens_q[0], hq, c.d)
            self.q_seq = list(self.q)
        longest = max(max(c.seqlens_k), 1)
        if c.kv == "dense":
            self.k, self.v = randn(b, longest, hkv, c.d), randn(b, longest, hkv, c.d)
            self.kv_seq = [(self.k[i, :n], self.v[i, :n]) for i, n in enumerate(c.seqlens_k)]
            kw.update(seqused_k=torch.tensor(c.seqlens_k, dtype=torch.int32, device=dev))
        elif c.kv == "ragged":
            total = sum(c.seqlens_k)
            self.k, self.v = randn(max(total, 1), hkv, c.d), randn(max(total, 1), hkv, c.d)
            starts = [sum(c.seqlens_k[:i]) for i in range(b)]
            self.kv_seq = [(self.k[s:s + n], self.v[s:s + n]) for s, n in zip(starts, c.seqlens_k)]
            kw.update(cu_seqlens_k=offsets(c.seqlens_k), max_seqlen_k=longest)
        else:
            ps = c.page_size
            needed = [(n + ps - 1) // ps for n in c.seqlens_k]
            pool = sum(needed) + 3  # spare pages no table row points at
            order = list(range(pool))
            random.Random(pool * ps).shuffle(order)
            self.k, self.v = randn(pool, ps, hkv, c.d), randn(pool, ps, hkv, c.d)
            width = max(max(needed), 1)
            table = [[0] * width for _ in range(b)]
            for i in range(b):
                for j in range(needed[i]):
                    table[i][j] = order.pop()
            self.kv_seq = [(self.k[table[i][:needed[i]]].flatten(0, 1)[:n], self.v[table[i][:needed[i]]].flatten(0, 1)[:n])
                           for i, n in enumerate(c.seqlens_k)]
            kw.update(page_table=torch.tensor(table, dtype=torch.int32, device=dev), max_seqlen_k=longest,
                      seqused_k=torch.tensor(c.seqlens_k, dtype=torch.int32, device=dev))
        self.kw = kw

    def rows(self, c, tensor, i, lse=False):
        """Sequence i's rows of an output: out [sq, hq, dv] or lse [hq, sq]."""
        if c.ragged_q:
            return tensor[:, self.cu_q[i]:self.cu_q[i + 1]] if lse else tensor[self.cu_q[i]:self.cu_q[i + 1]]
        return tensor[i]


def compare(what, got, want):
    """Errors (strings) of got against want, element by element (-inf must match -inf)."""
    errors = []
    if what == "lse":
        both_inf = torch.isneginf(want) & torch.isneginf(got)
        bad = ~(both_inf | ((got - want).abs() <= LSE_TOL + LSE_RTOL * want.abs()))
    else:
        bad = ~((got.float() - want).abs() <= OUT_TOL * (1 + want.abs()))
    if bad.any():
        at = tuple(int(x) for x in bad.nonzero()[0])
        errors.append("%s: %d of %d elements wrong, first at %s (got %r, want %r)"
                      % (what, int(bad.sum()), bad.numel(), at, float(got[at]), float(want[at])))
    return errors


def check_case(attn, c, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    pr = Problem(c, gen)
    hq, _ = c.heads
    out = torch.full(((pr.q.shape[0],) if c.ragged_q else tuple(pr.q.shape[:2])) + (hq, c.d), float("nan"),
                     dtype=torch.bfloat16, device="cuda")
    kw = dict(pr.kw, num_splits=c.num_splits, split_by_batch=c.split_by_batch)
    if c.workspace == "sized":
        size = attn.workspace_size(pr.q, pr.k, pr.v, causal=c.causal, return_lse=True, **kw)
        if not size:
            return ["workspace_size() is 0 for a split decode"]
        kw["workspace"] = torch.full((size,), 255, dtype=torch.uint8, device="cuda")
    result, lse = attn.run(pr.q, pr.k, pr.v, out=out, causal=c.causal, return_lse=True, **kw)
    torch.cuda.synchronize()
    errors = [] if result is out else ["run() did not return the out it was given"]
    for i, (k, v) in enumerate(pr.kv_seq):
        if c.seqlens_q[i] == 0:
            continue
        want_out, want_lse = reference(pr.q_seq[i], k, v, c.causal)
        errors += ["seq %d %s" % (i, e) for e in compare("out", pr.rows(c, out, i).float(), want_out)]
        errors += ["seq %d %s" % (i, e) for e in compare("lse", pr.rows(c, lse, i, lse=True), want_lse)]
    return errors


def check_merge(attn):
    """Two halves of the keys, each run with its LSE, merged, equal the reference of the whole."""
    gen = torch.Generator(device="cuda").manual_seed(99)
    q = torch.randn(2, 33, 4, 128, generator=gen, device="cuda").to(torch.bfloat16)
    k = torch.randn(2, 500, 2, 128, generator=gen, device="cuda").to(torch.bfloat16)
    v = torch.randn(2, 500, 2, 128, generator=gen, device="cuda").to(torch.bfloat16)
    halves = [attn.run(q, k[:, :200], v[:, :200], return_lse=True), attn.run(q, k[:, 200:], v[:, 200:], return_lse=True)]
    out = torch.full_like(halves[0][0], float("nan"))
    merged, lse = attn.merge(halves, out=out, return_lse=True)
    torch.cuda.synchronize()
    errors = [] if merged is out else ["merge() did not return the out it was given"]
    for i in range(2):
        want_out, want_lse = reference(q[i], k[i], v[i], False)
        errors += ["batch %d %s" % (i, e) for e in compare("out", out[i].float(), want_out)]
        errors += ["batch %d %s" % (i, e) for e in compare("lse", lse[i], want_lse)]
    return errors


def report(name, errors):
    print("%-4s %s" % ("FAIL" if errors else "ok", name))
    for e in errors[:5]:
        print("       " + e)
    return not errors


def main():
    print(banner(torch))
    attn = fa4rt.Attention()
    passed = 0
    for i, c in enumerate(CASES):
        try:
            passed += report(c.name, check_case(attn, c, seed=4321 + i))
        except fa4rt.Fa4Error as e:
            report(c.name, [str(e)])
    try:
        passed += report("merge of two halves", check_merge(attn))
    except fa4rt.Fa4Error as e:
        report("merge of two halves", [str(e)])
    total = len(CASES) + 1
    print("%d/%d passed" % (passed, total))
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
