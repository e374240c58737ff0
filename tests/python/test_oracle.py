#!/usr/bin/env python3
"""fa4rt (through the ctypes wrapper) against PyTorch as an outside oracle.

Oracle: torch.nn.functional.scaled_dot_product_attention with the math backend, in float32, on the same
bf16/fp16 inputs upcast; LSE: torch.logsumexp of the scaled, masked float32 logits. Causal masks are built
explicitly bottom-right aligned (row r sees key c <= r + s_k - s_q), since PyTorch's is_causal is top-left.

Exit status: 0 pass, 1 fail, 77 skipped (prints "SKIPPED: reason"). Run: python3 tests/python/test_oracle.py
"""

import math
import sys

from gpu_env import banner, fa4rt, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

# Error allowed against the float32 oracle, per element: atol + rtol * |ref|, about 8 ulps of the storage
# type (P is rounded to it before the PV product; outputs of magnitude 8 have 8x larger ulps). A dropped
# rescale or a wrong mask is >> this.
OUT_TOL = {torch.bfloat16: 3e-2, torch.float16: 4e-3}
# fp32 LSE from the same upcast inputs: differences come only from exp2 approximations, the base-2
# round trip and summation order.
LSE_TOL, LSE_RTOL = 2e-3, 1e-4


class Case:
    def __init__(self, name, b, sq, sk, hq, hkv, d, dv=None, causal=False, dtype=torch.bfloat16, lse=False,
                 scale=None, input_scale=1.0, layout="contiguous", side_stream=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        self.dv = dv or d


CASES = [
    Case("d64 bf16", 2, 128, 128, 4, 4, 64),
    Case("d64 fp16 lse", 2, 173, 173, 4, 4, 64, dtype=torch.float16, lse=True),
    Case("d128 bf16 causal lse", 1, 256, 256, 8, 8, 128, causal=True, lse=True),
    Case("d128 fp16 causal sq<sk", 2, 100, 300, 4, 4, 128, causal=True, dtype=torch.float16, lse=True),
    Case("d128 bf16 causal sq>sk (empty rows)", 1, 300, 130, 4, 4, 128, causal=True, lse=True),
    Case("d128 bf16 GQA 8q/2kv", 2, 200, 333, 8, 2, 128, lse=True),
    Case("d128 fp16 MQA 6q/1kv causal", 1, 257, 257, 6, 1, 128, causal=True, dtype=torch.float16),
    Case("d128 bf16 GQA 32q/8kv causal", 1, 512, 512, 32, 8, 128, causal=True, lse=True),
    Case("d256 bf16", 1, 190, 190, 2, 2, 256, lse=True),
    Case("d256 fp16 causal", 2, 129, 129, 2, 2, 256, causal=True, dtype=torch.float16),
    Case("d192/dv128 bf16", 1, 160, 160, 4, 4, 192, 128, lse=True),
    Case("d192/dv128 fp16 causal", 1, 200, 200, 4, 2, 192, 128, causal=True, dtype=torch.float16),
    Case("d64 bf16 peaked logits, custom scale", 1, 384, 1024, 2, 2, 64, scale=0.3, input_scale=2.0, lse=True),
    Case("d128 bf16 packed qkv + padded out, side stream", 2, 150, 150, 4, 4, 128, layout="strided",
         side_stream=True, lse=True),
]


def make_inputs(c, gen):
    """q, k, v in [b, s, h, d]; for layout 'strided' they are views of one packed qkv buffer and out is a
    view of a wider padded buffer (the padding must stay poisoned)."""
    dev = "cuda"

    def randn(*shape):
        return (torch.randn(*shape, generator=gen, device=dev, dtype=torch.float32) * c.input_scale).to(c.dtype)

    if c.layout == "strided":
        assert c.sq == c.sk and c.hq == c.hkv and c.d == c.dv
        qkv = randn(c.b, c.sq, 3, c.hq, c.d)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        out_buffer = torch.empty(c.b, c.sq, c.hq, c.dv + 64, dtype=c.dtype, device=dev)
        out = out_buffer[..., 32:32 + c.dv]
    else:
        q, k, v = randn(c.b, c.sq, c.hq, c.d), randn(c.b, c.sk, c.hkv, c.d), randn(c.b, c.sk, c.hkv, c.dv)
        out_buffer = torch.empty(c.b, c.sq, c.hq, c.dv, dtype=c.dtype, device=dev)
        out = out_buffer
    return q, k, v, out_buffer, out


def oracle(c, q, k, v):
    """(out float32 [b, sq, hq, dv], lse float32 [b, hq, sq], row_has_key [sq])."""
    group = c.hq // c.hkv
    qf = q.float().transpose(1, 2)  # [b, h, s, d]
    kf = k.float().repeat_interleave(group, dim=2).transpose(1, 2)
    vf = v.float().repeat_interleave(group, dim=2).transpose(1, 2)
    scale = c.scale if c.scale is not None else 1.0 / math.sqrt(c.d)
    rows = torch.arange(c.sq, device=q.device)[:, None]
    cols = torch.arange(c.sk, device=q.device)[None, :]
    allowed = cols <= rows + (c.sk - c.sq) if c.causal else torch.ones(c.sq, c.sk, dtype=torch.bool, device=q.device)
    row_has_key = allowed.any(dim=1)
    # SDPA gives NaN for rows that see no key; give them one key and overwrite them below.
    safe = allowed | ~row_has_key[:, None]
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=safe, scale=scale)
    logits = (qf @ kf.transpose(-1, -2)) * scale
    lse = torch.logsumexp(logits.masked_fill(~allowed, float("-inf")), dim=-1)  # -inf for empty rows
    out = out.transpose(1, 2).contiguous()
    out[:, ~row_has_key] = 0.0
    return out, lse, row_has_key


def worst(diff):
    flat = int(torch.argmax(diff).item())
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))


def check_case(attn, c, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, out_buffer, out = make_inputs(c, gen)
    out_buffer.fill_(float("nan"))  # poison: every element the kernel should write must be overwritten
    if c.side_stream:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            result = attn.run(q, k, v, out=out, causal=c.causal, softmax_scale=c.scale, return_lse=c.lse)
        torch.cuda.current_stream().wait_stream(stream)
    else:
        result = attn.run(q, k, v, out=out, causal=c.causal, softmax_scale=c.scale, return_lse=c.lse)
    lse = result[1] if c.lse else None
    if c.lse:
        assert result[0] is out
    torch.cuda.synchronize()

    errors = []
    ref_out, ref_lse, row_has_key = oracle(c, q, k, v)
    got = out.float()
    bad = ~torch.isfinite(got)
    if bad.any():
        errors.append("out has %d non-finite elements, first at %s" % (int(bad.sum()), worst(bad.float())))
    diff = ((got - ref_out).abs() / (1 + ref_out.abs())).nan_to_num(nan=float("inf"))
    max_diff = diff.max().item()
    if not max_diff <= OUT_TOL[c.dtype]:
        at = worst(diff)
        errors.append("out max |diff| / (1 + |ref|) %.3g > %.3g at [b,s,h,d]=%s (got %.5f, want %.5f)"
                      % (max_diff, OUT_TOL[c.dtype], at, got[at].item(), ref_out[at].item()))
    if c.layout == "strided":
        padding = torch.cat([out_buffer[..., :32], out_buffer[..., 32 + c.dv:]], dim=-1)
        if not torch.isnan(padding.float()).all():
            errors.append("wrote outside out: %d padding elements changed" % int((~torch.isnan(padding.float())).sum()))
    lse_diff = float("nan")
    if c.lse:
        if tuple(lse.shape) != (c.b, c.hq, c.sq) or lse.dtype != torch.float32:
            errors.append("lse has shape %s dtype %s" % (tuple(lse.shape), lse.dtype))
        else:
            empty = ~row_has_key
            if empty.any() and not torch.isneginf(lse[:, :, empty]).all():
                errors.append("lse of rows that see no key must be -inf")
            full = lse[:, :, row_has_key]
            want = ref_lse[:, :, row_has_key]
            if not torch.isfinite(full).all():
                errors.append("lse has %d non-finite elements in rows that see keys" % int((~torch.isfinite(full)).sum()))
            d = (full - want).abs().nan_to_num(nan=float("inf"))
            lse_diff = d.max().item()
            over = d > LSE_TOL + LSE_RTOL * want.abs()
            if over.any():
                errors.append("lse: %d elements differ by more than %.0e + %.0e*|lse| (max abs diff %.3g)"
                              % (int(over.sum()), LSE_TOL, LSE_RTOL, lse_diff))
    status = "FAIL" if errors else "ok"
    print("%-4s %-48s out %.2e  lse %.2e" % (status, c.name, max_diff, lse_diff))
    for e in errors:
        print("       " + e)
    return not errors


def check_invalid_input_writes_nothing(attn):
    """A typed error before launch, and the output stays untouched."""
    q = torch.randn(1, 64, 6, 64, device="cuda").to(torch.bfloat16)
    kv = torch.randn(1, 64, 4, 64, device="cuda").to(torch.bfloat16)  # 6 q heads over 4 kv heads: invalid
    out = torch.full((1, 64, 6, 64), float("nan"), dtype=torch.bfloat16, device="cuda")
    try:
        attn.run(q, kv, kv, out=out)
    except fa4rt.Fa4Error as e:
        torch.cuda.synchronize()
        ok = e.code == 1 and "heads" in e.message and bool(torch.isnan(out.float()).all())
        print("%-4s %-48s %s" % ("ok" if ok else "FAIL", "invalid heads_q % heads_kv -> error", e))
        return ok
    print("FAIL invalid heads_q % heads_kv was accepted")
    return False


def main():
    print(banner(torch))
    attn = fa4rt.Attention()
    passed = 0
    for i, c in enumerate(CASES):
        try:
            passed += check_case(attn, c, seed=1234 + i)
        except fa4rt.Fa4Error as e:
            print("FAIL %-48s %s" % (c.name, e))
    total = len(CASES) + 1
    passed += check_invalid_input_writes_nothing(attn)
    print("%d/%d passed" % (passed, total))
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
