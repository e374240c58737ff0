#!/usr/bin/env python3
"""One prefill call of fa4rt, with or without softcapping, a few times, for a profiler to look at:
`ncu --section WarpStateStats --section InstructionStats -k regex:fa4_ python3 tools/ncu_prefill_call.py --d 128
--softcap 30`. Needs PyTorch and FA4RT_LIB (or build/libfa4rt.so)."""
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
p.add_argument("--causal", action="store_true")
p.add_argument("--softcap", type=float, default=0.0, help="0: none")
p.add_argument("--calls", type=int, default=2)
a = p.parse_args()
heads = 2048 // a.d
q, k, v = (torch.randn(a.batch, a.seqlen, heads, a.d, device="cuda").to(torch.bfloat16) for _ in "qkv")
out = torch.empty_like(q)
attn = fa4rt.Attention()
kw = dict(out=out, causal=a.causal)
if a.softcap:
    kw["softcap"] = a.softcap
for _ in range(a.calls):
    attn.run(q, k, v, **kw)
torch.cuda.synchronize()
print("ok: %d calls" % a.calls)
