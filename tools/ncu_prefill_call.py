#!/usr/bin/env python3
"""One prefill call of fa4rt, with or without softcapping, a few times, for a profiler to look at:
`ncu --section WarpStateStats --section InstructionStats -k regex:fa4_ python3 tools/ncu_prefill_call.py --d 128
--softcap 30`. Needs PyTorch and FA4RT_LIB (or build/libfa4rt.so). `--peer fa4cute` makes the same call
through FA4-cute's flash_attn_func instead (its PYTHONPATH: ../shared/docs/baselines.md), for the same
profile of the peer (`-k regex:Forward`: its CuTe-DSL kernel's name holds FlashAttentionForwardSm90)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

import fa4rt  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--batch", type=int, default=1)
p.add_argument("--seqlen", type=int, default=16384)
p.add_argument("--d", type=int, default=128)
p.add_argument("--dv", type=int, default=0, help="V's head dim (0: --d)")
p.add_argument("--heads", type=int, default=0, help="0: 2048 / max(d, dv)")
p.add_argument("--peer", choices=["fa4rt", "fa4cute"], default="fa4rt")
p.add_argument("--causal", action="store_true")
p.add_argument("--softcap", type=float, default=0.0, help="0: none")
p.add_argument("--calls", type=int, default=2)
a = p.parse_args()
dv = a.dv or a.d
heads = a.heads or 2048 // max(a.d, dv)
q, k, v = (torch.randn(a.batch, a.seqlen, heads, dim, device="cuda").to(torch.bfloat16) for dim in (a.d, a.d, dv))
kw = dict(causal=a.causal, softcap=a.softcap) if a.softcap else dict(causal=a.causal)
if a.peer == "fa4cute":
    from flash_attn.cute import flash_attn_func as call
else:
    call = fa4rt.Attention().run
    kw["out"] = torch.empty(a.batch, a.seqlen, heads, dv, device="cuda", dtype=torch.bfloat16)
for _ in range(a.calls):
    call(q, k, v, **kw)
torch.cuda.synchronize()
print("ok: %d calls" % a.calls)
