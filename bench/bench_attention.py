#!/usr/bin/env python3
"""Forward attention TFLOP/s: fa4rt next to PyTorch's flash and cuDNN SDPA backends and FA4-cute (its sm90
kernel on Hopper, when flash_attn.cute imports), in one run.

The sweep: 16384 tokens (batch x seqlen = 32x512 .. 1x16384),
2048/head_dim heads, head_dim 64/128/256, causal and not, plus GQA 32q/8kv d128 rows and head dims
(192, 128) with 16 heads (Q/K 192, V 128). Each time is the median of triton.testing.do_bench (which
flushes L2 before every call; CUDA events when triton is missing); FLOPs = 2*b*h*sq*sk*(d + dv), halved
when causal. fa4rt is prewarmed first (compile time is reported apart). Each shape's fa4rt output is
compared once with the flash backend's (max abs diff; where flash has no kernel for dv != d, the first
of the memory-efficient and cuDNN backends that runs it), so a broken kernel cannot post a good-looking
number.

    python3 bench/bench_attention.py OUT_PREFIX [--quick] [--dtype bf16|fp16] [--rows REGEX] [--fa4rt-only]

--rows keeps the rows whose "head_dim causal batchxseqlen" (e.g. "256 yes 8x2048", "GQA 32q/8kv, 128 no
2x8192") matches REGEX; --fa4rt-only times fa4rt alone (the check against flash still runs), for the later
passes of an A/B, whose peers the first pass has measured.

writes OUT_PREFIX.md and OUT_PREFIX.json (rewritten after every row, so a cut-off run keeps its rows).
Exit status 77 with "SKIPPED: reason" when torch or CUDA is missing.
"""

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import fa4rt  # noqa: E402
import peers_env  # noqa: E402

L2_BYTES = 50 * 2**20  # H200: 50 MB; smaller working sets rotate through several input sets
CHECK_TOL = {"bf16": 0.05, "fp16": 0.01}  # max abs diff vs flash; a real bug is far beyond this


class Shape:
    def __init__(self, batch, seqlen, heads_q, heads_kv, head_dim, causal, head_dim_v=None):
        self.batch, self.seqlen, self.heads_q, self.heads_kv = batch, seqlen, heads_q, heads_kv
        self.head_dim, self.causal = head_dim, causal
        self.head_dim_v = head_dim if head_dim_v is None else head_dim_v

    @property
    def flops(self):
        f = 2 * self.batch * self.heads_q * self.seqlen * self.seqlen * (self.head_dim + self.head_dim_v)
        return f / 2 if self.causal else f

    @property
    def label(self):
        gqa = "GQA %dq/%dkv, " % (self.heads_q, self.heads_kv) if self.heads_q != self.heads_kv else ""
        dims = "%dx%d" % (self.head_dim, self.head_dim_v) if self.head_dim_v != self.head_dim else "%d" % self.head_dim
        return gqa + dims


def row_key(shape):
    """What --rows matches: "head_dim causal batchxseqlen"."""
    return "%s %s %dx%d" % (shape.label, "yes" if shape.causal else "no", shape.batch, shape.seqlen)


def sweep(quick, rows=None):
    seqlens = [512, 2048, 16384] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    shapes = []
    for d in (64, 128, 256):
        for causal in (False, True):
            for s in seqlens:
                shapes.append(Shape(16384 // s, s, 2048 // d, 2048 // d, d, causal))
    for causal in (False, True):
        for s in (2048, 8192):
            shapes.append(Shape(16384 // s, s, 32, 8, 128, causal))
    for causal in (False, True):
        for s in seqlens:
            shapes.append(Shape(16384 // s, s, 16, 16, 192, causal, head_dim_v=128))
    return [s for s in shapes if rows is None or re.search(rows, row_key(s))]


def git_commit():
    if os.environ.get("FA4_COMMIT"):
        return os.environ["FA4_COMMIT"]
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def make_timer(torch):
    try:
        import triton.testing

        def timer(fn):
            return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        return timer, "triton.testing.do_bench (median, L2 flushed per call)"
    except ImportError:
        flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")

        def timer(fn):
            for _ in range(3):
                fn()
            times = []
            for _ in range(20):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            return sorted(times)[len(times) // 2]
        return timer, "CUDA events (median of 20, L2 flushed per call)"


def fmt(x, spec="%.1f"):
    return "-" if x is None else spec % x


def check_text(check):
    if check.get("max_abs_diff") is None:
        return check.get("error", "-")
    ref = "" if check.get("ref", "flash") == "flash" else " (vs %s)" % check["ref"]
    return "%s %.2e%s" % ("ok" if check["ok"] else "BAD", check["max_abs_diff"], ref)


def write_results(prefix, meta, rows):
    with open(prefix + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    lines = ["# fa4rt attention forward benchmark", ""]
    lines += ["- %s: %s" % (k, v) for k, v in meta.items()]
    lines += ["", "TFLOP/s (median). check: max abs diff of fa4rt vs the flash backend (or the one named) on one input set.", "",
              "| head_dim | causal | batch x seqlen | fa4rt | PyTorch flash | cuDNN | FA4-cute | fa4rt/cuDNN | fa4rt/FA4-cute | check |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def ratio_to(peer):
            mine, theirs = r["fa4rt"].get("tflops"), r.get(peer, {}).get("tflops")
            return mine / theirs if mine and theirs else None
        check = r["check"]
        fa4_text = fmt(r["fa4rt"].get("tflops")) if "error" not in r["fa4rt"] else "error"
        if r["fa4rt"].get("tflops") and not check.get("ok"):
            fa4_text += " (unverified)"
        lines.append("| %s | %s | %dx%d | %s | %s | %s | %s | %s | %s | %s |" % (
            r["label"], "yes" if r["causal"] else "no", r["batch"], r["seqlen"], fa4_text,
            fmt(r["flash"].get("tflops")), fmt(r["cudnn"].get("tflops")), fmt(r.get("fa4cute", {}).get("tflops")),
            fmt(ratio_to("cudnn"), "%.2f"), fmt(ratio_to("fa4cute"), "%.2f"), check_text(check)))
    errors = [(r["label"], "causal" if r["causal"] else "full", r["batch"], r["seqlen"], name, r[name]["error"])
              for r in rows for name in ("fa4rt", "flash", "cudnn", "fa4cute") if "error" in r.get(name, {})]
    if errors:
        lines += ["", "Errors:", ""] + ["- head_dim %s %s %dx%d, %s: %s" % e for e in errors]
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_prefix", help="writes OUT_PREFIX.md and OUT_PREFIX.json")
    ap.add_argument("--quick", action="store_true", help="3 sequence lengths per head dim instead of 6")
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--rows", help="only the rows whose 'head_dim causal batchxseqlen' matches this regex")
    ap.add_argument("--fa4rt-only", action="store_true", help="time fa4rt alone (the peers' columns show -)")
    args = ap.parse_args()

    env = peers_env.torch_or_skip()
    if env is None:
        return 77
    torch, F, SDPBackend, sdpa_kernel = env
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    os.makedirs(os.path.dirname(os.path.abspath(args.out_prefix)), exist_ok=True)
    timer, timer_name = make_timer(torch)
    shapes = sweep(args.quick, args.rows)
    if not shapes:
        print("no row of the sweep matches --rows %r" % args.rows)
        return 2

    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "dtype": args.dtype, "timer": timer_name,
        "fa4rt_backend": os.environ.get("FA4_BACKEND", "auto"),
        "peers": "not timed (--fa4rt-only)" if args.fa4rt_only else "timed",
    }
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        pass

    cute = None if args.fa4rt_only else peers_env.fa4_cute()
    meta["fa4cute"] = ("not timed (--fa4rt-only)" if args.fa4rt_only else
                       "importable" if cute else "not importable (its column shows n/a)")
    attn = None
    try:
        torch.zeros(1, device="cuda")  # prewarm compiles for the current context's device: create it first
        attn = fa4rt.Attention()
        meta["fa4rt"] = "%s (%s)" % (fa4rt.version(), fa4rt.library_path())
        configs = {tuple(sorted(fa4rt.config(args.dtype, s.head_dim, s.head_dim_v, causal=s.causal,
                                             q_heads_per_kv=s.heads_q // s.heads_kv).items())) for s in shapes}
        start = time.perf_counter()
        attn.prewarm([dict(c) for c in configs])
        meta["fa4rt_prewarm_s"] = round(time.perf_counter() - start, 2)
        print("fa4rt prewarm of %d configs: %.2f s" % (len(configs), meta["fa4rt_prewarm_s"]), flush=True)
    except (OSError, fa4rt.Fa4Error) as e:
        meta["fa4rt_error"] = str(e)
        print("fa4rt unavailable or prewarm failed, its column will show errors: %s" % e, flush=True)
    for k, v in meta.items():
        print("%s: %s" % (k, v))

    print("\n%-16s %-6s %-12s %9s %9s %9s %9s  %s" % ("head_dim", "causal", "b x s", "fa4rt", "flash", "cudnn",
                                                      "FA4-cute", "check"), flush=True)
    rows = []
    for shape in shapes:
        rows.append(bench_shape(torch, F, SDPBackend, sdpa_kernel, attn, cute, timer, shape, dtype, args.dtype,
                                args.fa4rt_only))
        r = rows[-1]
        print("%-16s %-6s %-12s %9s %9s %9s %9s  %s" % (
            r["label"], "yes" if shape.causal else "no", "%dx%d" % (shape.batch, shape.seqlen),
            fmt(r["fa4rt"].get("tflops")), fmt(r["flash"].get("tflops")), fmt(r["cudnn"].get("tflops")),
            fmt(r["fa4cute"].get("tflops")), check_text(r["check"])), flush=True)
        write_results(args.out_prefix, meta, rows)
        torch.cuda.empty_cache()
    print("\nwrote %s.md and %s.json" % (args.out_prefix, args.out_prefix))
    bad = [r for r in rows if r["fa4rt"].get("tflops") and not r["check"].get("ok")]
    if bad:
        print("WARNING: %d rows have fa4rt numbers whose output check failed" % len(bad))
    return 0


def bench_shape(torch, F, SDPBackend, sdpa_kernel, attn, cute, timer, s, dtype, dtype_name, fa4rt_only=False):
    b, n, hq, hkv, d, dv = s.batch, s.seqlen, s.heads_q, s.heads_kv, s.head_dim, s.head_dim_v
    set_bytes = 2 * b * n * (hq * (d + dv) + hkv * (d + dv))  # q, o, k, v
    n_sets = 1 if set_bytes >= 2 * L2_BYTES else min(8, math.ceil(2 * L2_BYTES / set_bytes))
    sets = [tuple(torch.randn(b, n, h, dim, device="cuda", dtype=dtype) for h, dim in ((hq, d), (hkv, d), (hkv, dv)))
            for _ in range(n_sets)]
    out = torch.empty(b, n, hq, dv, device="cuda", dtype=dtype)
    row = {"label": s.label, "head_dim": d, "head_dim_v": dv, "heads_q": hq, "heads_kv": hkv, "causal": s.causal,
           "batch": b, "seqlen": n, "flops": s.flops, "input_sets": n_sets}
    counter = [0]

    def next_set():
        counter[0] = (counter[0] + 1) % n_sets
        return sets[counter[0]]

    def run_fa4():
        q, k, v = next_set()
        attn.run(q, k, v, out=out, causal=s.causal)

    def sdpa(q, k, v):  # [b, s, h, d] views in, [b, h, s, d] out
        kwargs = {"enable_gqa": True} if hq != hkv else {}
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=s.causal, **kwargs)

    def run_sdpa():
        sdpa(*next_set())

    def measure(name, fn, backend=None):
        try:
            if backend is None:
                ms = timer(fn)
            else:
                with sdpa_kernel(backend):
                    ms = timer(fn)
            row[name] = {"ms": ms, "tflops": s.flops / (ms * 1e-3) / 1e12}
        except Exception as e:  # one backend failing must not stop the sweep
            row[name] = {"error": ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:300]}

    # Check first: one fa4rt output (poisoned beforehand) against flash on the first input set.
    check = {"ok": False}
    try:
        if attn is None:
            raise RuntimeError("fa4rt unavailable")
        q, k, v = sets[0]
        out.fill_(float("nan"))
        attn.run(q, k, v, out=out, causal=s.causal)
        refs = [("flash", SDPBackend.FLASH_ATTENTION)]
        if dv != d:  # flash has no kernel for dv != d
            refs = [("efficient", SDPBackend.EFFICIENT_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
        for i, (ref_name, backend) in enumerate(refs):
            try:
                with sdpa_kernel(backend):
                    ref = sdpa(q, k, v).transpose(1, 2)
                break
            except RuntimeError:
                if i + 1 == len(refs):
                    raise
        diff = (out.float() - ref.float()).abs().nan_to_num(nan=float("inf")).max().item()
        check = {"ok": diff <= CHECK_TOL[dtype_name], "max_abs_diff": diff, "ref": ref_name}
    except Exception as e:
        check["error"] = ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:300]
    row["check"] = check

    if attn is None:
        row["fa4rt"] = {"error": "fa4rt unavailable"}
    else:
        measure("fa4rt", run_fa4)
    if fa4rt_only:
        row["flash"], row["cudnn"] = {}, {}
    else:
        measure("flash", run_sdpa, SDPBackend.FLASH_ATTENTION)
        measure("cudnn", run_sdpa, SDPBackend.CUDNN_ATTENTION)
    if cute is None:
        row["fa4cute"] = {}  # not importable here (meta says so): an empty column, not an error per row
    else:
        def run_cute():
            q, k, v = next_set()
            cute(q, k, v, causal=s.causal)
        measure("fa4cute", run_cute)
    return row


if __name__ == "__main__":
    sys.exit(main())
