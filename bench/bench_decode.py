#!/usr/bin/env python3
"""Decode attention speed: fa4rt next to PyTorch's flash SDPA, cuDNN SDPA and FA4-cute, in one run.

bf16, head_dim 128, issue 10's table: batch {1, 8, 64, 256} x KV length {1k, 4k, 32k, 128k} x q/kv heads
{32/8, 8/1, 32/32} x seqlen_q {1, 4}. The number is K+V bytes read per second (GB/s): the real K and V
tensors' bytes (batch x KV length x kv heads x 128 x 2 bytes, each) over the time, for every column, also for
a peer that reads K/V repeated to the q heads (marked *). Every column is non-causal: the peers' causal mask
is top-left and fa4rt's bottom-right, which differ for seqlen_q 4.

Columns: fa4rt dense (num_splits 0: the library decides, with a preallocated workspace); the same with
split_by_batch (the parts weigh the batch size too: faster, not batch-invariant); fa4rt paged with
pages of 16, 64 and 256 keys (a shuffled page table over the same K/V memory, seqused_k given); SDPA with the
flash backend; SDPA with the cuDNN backend; FA4-cute (flash_attn.cute's flash_attn_func, when importable).
Timing: a column's calls are captured in one CUDA graph, so no column pays launch overhead (marked + where a
call cannot be captured and runs eagerly), replayed --reps times between CUDA events; the median of 5. K/V
smaller than 4x the L2 are rotated through copies that exceed it, so each call reads from HBM.

Checks per row: max |fa4rt - cuDNN| over the whole output (SDPA flash when cuDNN is n/a), and the largest error
of any fa4rt column on sequence 0 against a float32 reference (a wrong page or split part shows there).

With --splits N,M,...: one more fa4rt column per fixed num_splits ("fa4rt sN", dense), to check the plan's
choice (num_splits 0) against every fixed count on the same rows.

    FA4_LIB=build/libfa4rt.so python3 bench/bench_decode.py [--quick] [--rows REGEX] [--reps N] [--max-gib G]
                                                           [--pages P,...] [--splits N,M,...]
"""

import argparse
import math
import os
import re
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import fa4rt  # noqa: E402  (needs only ctypes)
import peers_env  # noqa: E402

D = 128
PAGES = (16, 64, 256)
REF_TOL = 3e-2  # max |out - ref| / (1 + |ref|) of bf16 outputs against float32 (test_oracle.py's bound)
BY_BATCH = "fa4rt by batch"  # num_splits 0 with split_by_batch: the parts weigh the batch size too
QUICK = ["1x8k 32/8 sq1", "1x128k 32/8 sq1", "8x8k 32/8 sq1", "64x4k 32/8 sq1", "1x32k 8/1 sq1", "16x16k 32/8 sq4"]


class Row:
    def __init__(self, batch, kv, hq, hkv, sq):
        self.batch, self.kv, self.hq, self.hkv, self.sq = batch, kv, hq, hkv, sq
        self.label = "%dx%dk %d/%d sq%d" % (batch, kv // 1024, hq, hkv, sq)
        self.kv_bytes = 2 * batch * kv * hkv * D * 2  # K and V, bf16

    @staticmethod
    def parse(label):
        b, kv, hq, hkv, sq = (int(x) for x in re.fullmatch(r"(\d+)x(\d+)k (\d+)/(\d+) sq(\d+)", label).groups())
        return Row(b, kv * 1024, hq, hkv, sq)


def rows(args):
    if args.quick:
        table = [Row.parse(label) for label in QUICK]
    else:
        table = [Row(b, kv * 1024, hq, hkv, sq) for b in (1, 8, 64, 256) for kv in (1, 4, 32, 128)
                 for hq, hkv in ((32, 8), (8, 1), (32, 32)) for sq in (1, 4)]
    return [r for r in table if not args.rows or re.search(args.rows, r.label)]


def fa4rt_columns(args):
    """(name, page size or 0, num_splits, split_by_batch) of every fa4rt column."""
    return ([("fa4rt", 0, 0, False), (BY_BATCH, 0, 0, True)] + [("fa4rt p%d" % p, p, 0, False) for p in args.pages] +
            [("fa4rt s%d" % n, 0, n, False) for n in args.splits])


def reference_seq0(torch, q, k, v):
    """Sequence 0 in float32: q [sq, hq, d], k/v [s, hkv, d] -> [sq, hq, d]; q heads grouped per kv head."""
    sq, hq, _ = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    qf = q.float().view(sq, hkv, g, D).permute(1, 2, 0, 3).reshape(hkv, g * sq, D)
    p = torch.softmax(qf @ k.float().transpose(0, 1).transpose(1, 2) / math.sqrt(D), dim=-1)
    return (p @ v.float().transpose(0, 1)).view(hkv, g, sq, D).permute(2, 0, 1, 3).reshape(sq, hq, D)


def measure(torch, calls, reps):
    """(ms per call, captured): the calls in one CUDA graph replayed `reps` times (eagerly if not capturable)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as capture wants
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for c in calls:
                c()
        launch, captured = graph.replay, True
    except Exception:  # not capturable: the same calls, launched eagerly
        torch.cuda.synchronize()
        launch, captured = (lambda: [c() for c in calls]), False
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / (reps * len(calls)))
    return statistics.median(times), captured


def note(row, column, e):
    """A column's failure, on stderr (stdout keeps the Markdown table)."""
    print("  %s, %s: %s" % (row.label, column, ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:200]),
          file=sys.stderr, flush=True)


def bench_row(torch, F, sdpa_kernel, SDPBackend, attn, cute, r, args):
    """({column: GB/s text}, check text, {column: GB/s}); (None, reason, {}) for a skipped row."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20)
    copies = max(1, math.ceil(4 * l2 / r.kv_bytes))
    cap = args.max_gib * 2**30
    if copies * r.kv_bytes > cap:
        return None, "skipped: K/V of %.1f GiB exceed --max-gib %g" % (copies * r.kv_bytes / 2**30, args.max_gib), {}
    b, s, hq, hkv, sq = r.batch, r.kv, r.hq, r.hkv, r.sq
    q = torch.randn(b, sq, hq, D, device="cuda").to(torch.bfloat16)
    kvs = [tuple(torch.randn(b, s, hkv, D, device="cuda").to(torch.bfloat16) for _ in "kv") for _ in range(copies)]
    cells, speeds, outputs, seq0 = {}, {}, {}, {}

    def column(name, make, mark=""):
        """Times make(k, v)'s call, cycling through the K/V copies."""
        try:
            per_copy = [make(k, v) for k, v in kvs]
            ms, captured = measure(torch, [per_copy[i % copies] for i in range(max(copies, 8))], args.reps)
            speeds[name] = r.kv_bytes / (ms * 1e-3) / 1e9
            cells[name] = "%.0f%s%s" % (speeds[name], mark, "" if captured else "+")
        except Exception as e:  # one column failing must not stop the sweep
            cells[name] = "n/a"
            note(r, name, e)

    # fa4rt: dense, then paged over the same memory through shuffled page tables; first each one's output.
    out = torch.empty(b, sq, hq, D, device="cuda", dtype=torch.bfloat16)
    used = torch.full((b,), s, dtype=torch.int32, device="cuda")
    for name, ps, splits, by_batch in fa4rt_columns(args):
        kw = {"split_by_batch": True} if by_batch else {}
        if ps:
            table = torch.randperm(b * s // ps, device="cuda").to(torch.int32).view(b, s // ps)
            kw.update(page_table=table, seqused_k=used, max_seqlen_k=s)

        def view(t, ps=ps):
            return t.view(-1, ps, hkv, D) if ps else t
        try:
            ws = attn.workspace_size(q, view(kvs[0][0]), view(kvs[0][1]), out=out, num_splits=splits, **kw)
            kw.update(out=out, num_splits=splits, workspace=torch.empty(ws, dtype=torch.uint8, device="cuda") if ws else None)
            out.fill_(float("nan"))
            attn.run(q, view(kvs[0][0]), view(kvs[0][1]), **kw)
            outputs[name] = out.clone()
            # Sequence 0's keys as this column stores them: its page-table row's pages, in order.
            seq0[name] = tuple(view(t)[table[0].long()].reshape(s, hkv, D) if ps else t[0] for t in kvs[0])
        except fa4rt.Fa4Error as e:
            cells[name] = "error"
            note(r, name, e)
            continue
        column(name, lambda k, v, kw=kw, view=view: lambda: attn.run(q, view(k), view(v), **kw))

    # SDPA on [b, h, s, d] views: GQA through enable_gqa, else (when the backend refuses) K/V repeated (*).
    qt = q.transpose(1, 2)
    for name, backend in (("sdpa flash", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
        def make(k, v, repeat, backend=backend):
            kt, vt = k.transpose(1, 2), v.transpose(1, 2)
            if repeat:
                kt, vt = kt.repeat_interleave(hq // hkv, dim=1), vt.repeat_interleave(hq // hkv, dim=1)
            gqa = {"enable_gqa": True} if hq != hkv and not repeat else {}

            def call():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(qt, kt, vt, **gqa)
            return call
        for repeat in (False, True) if hq != hkv else (False,):
            if repeat and copies * r.kv_bytes * hq // hkv > cap:
                cells[name] = "n/a (memory)"
                break
            try:
                outputs[name] = make(*kvs[0], repeat)().transpose(1, 2)
            except RuntimeError as e:
                cells[name] = "n/a"
                note(r, name + (" (K/V repeated)" if repeat else ""), e)
                continue
            column(name, lambda k, v, make=make, repeat=repeat: make(k, v, repeat), "*" if repeat else "")
            break
    if cute is None:
        cells["FA4-cute"] = "n/a"
    else:
        def cute_call(k, v):
            return lambda: cute(q, k, v, causal=False)
        column("FA4-cute", cute_call)

    peer = "cuDNN" if "cuDNN" in outputs else "sdpa flash" if "sdpa flash" in outputs else None
    check = "no peer output"
    if peer and "fa4rt" in outputs:
        check = "vs %s %.1e" % (peer, (outputs["fa4rt"].float() - outputs[peer].float()).abs().max().item())
    fa4_names = [n for n in outputs if n.startswith("fa4rt")]
    if fa4_names:
        def error(n):
            ref = reference_seq0(torch, q[0], *seq0[n])
            return (outputs[n][0].float() - ref).abs().div(1 + ref.abs()).nan_to_num(nan=math.inf).max().item()
        worst = max(error(n) for n in fa4_names)
        check += ", seq0 vs fp32 %.1e%s" % (worst, "" if worst <= REF_TOL else " FAILED")
    return cells, check, speeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="issue 10's first table only: " + ", ".join(QUICK))
    ap.add_argument("--rows", help="only rows whose label (e.g. '64x4k 32/8 sq1') matches this regex")
    ap.add_argument("--reps", type=int, default=20, help="graph replays per measurement (default 20)")
    ap.add_argument("--max-gib", type=float, default=40, help="skip rows whose K/V exceed this (default 40)")
    ap.add_argument("--pages", type=lambda t: [int(x) for x in t.split(",") if x], default=list(PAGES),
                    help="page sizes of the paged fa4rt columns (default 16,64,256; empty: none)")
    ap.add_argument("--splits", type=lambda t: [int(x) for x in t.split(",") if x], default=[],
                    help="extra fa4rt columns with these fixed num_splits (e.g. 1,4,16)")
    args = ap.parse_args()
    env = peers_env.torch_or_skip()
    if env is None:
        return 77
    torch, F, SDPBackend, sdpa_kernel = env
    attn, cute = fa4rt.Attention(), peers_env.fa4_cute()
    print("fa4rt %s (%s), torch %s, CUDA %s, cuDNN %s, %s; FA4-cute %s" % (
        fa4rt.version(), fa4rt.library_path(), torch.__version__, torch.version.cuda, torch.backends.cudnn.version(),
        torch.cuda.get_device_name(), "importable" if cute else "n/a"))
    print("K+V GB/s (real K and V bytes only; * = the peer reads K/V repeated to the q heads; + = not graph-"
          "captured). Non-causal everywhere. Check: max |fa4rt - peer|, and sequence 0 of every fa4rt column vs "
          "float32.\n", flush=True)
    names = [c[0] for c in fa4rt_columns(args)] + ["sdpa flash", "cuDNN", "FA4-cute"]
    print("| shape | " + " | ".join(names) + " | best peer | fa4rt/best | by batch/best | check |")
    print("|---" * (len(names) + 5) + "|", flush=True)
    paged = {p: [] for p in args.pages}
    ratios = {"fa4rt": [], BY_BATCH: []}
    for r in rows(args):
        cells, check, speeds = bench_row(torch, F, sdpa_kernel, SDPBackend, attn, cute, r, args)
        if cells is None:
            print("| %s | %s |%s" % (r.label, check, " |" * (len(names) + 3)), flush=True)
            continue
        peers = [speeds[n] for n in ("sdpa flash", "cuDNN", "FA4-cute") if n in speeds]
        best = max(peers) if peers else None
        cols = []
        for n in ratios:
            cols.append("%.2f" % (speeds[n] / best) if best and n in speeds else "-")
            if best and n in speeds:
                ratios[n].append(speeds[n] / best)
        print("| %s | %s | %s | %s | %s |" % (r.label, " | ".join(cells.get(n, "n/a") for n in names),
                                               "%.0f" % best if best else "-", " | ".join(cols), check), flush=True)
        for p in args.pages:
            if "fa4rt" in speeds and "fa4rt p%d" % p in speeds:
                paged[p].append(speeds["fa4rt p%d" % p] / speeds["fa4rt"])
        torch.cuda.empty_cache()
    for n, rs in ratios.items():
        if rs:
            print("\n%s / best peer: median %.2f, min %.2f, at or above the best peer on %d of %d rows" % (
                n, statistics.median(rs), min(rs), sum(x >= 1 for x in rs), len(rs)), end="")
    print("\n\nPaged / dense fa4rt (target: within 10%):")
    for p, ratios in paged.items():
        if ratios:
            print("  page %3d: median %.2f, min %.2f, %d of %d rows within 10%%" % (
                p, statistics.median(ratios), min(ratios), sum(x >= 0.9 for x in ratios), len(ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
