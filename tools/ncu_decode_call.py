#!/usr/bin/env python3
"""One decode call of fa4rt (num_splits 0, a workspace) and the same call of cuDNN SDPA, a few times each,
for a profiler to look at: `ncu --section SpeedOfLight --section WarpStateStats python3 tools/ncu_decode_call.py
--batch 1 --kv 1024 --hq 8 --hkv 1`. Needs PyTorch and FA4RT_LIB (or build/libfa4rt.so)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import fa4rt  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--batch", type=int, default=1)
p.add_argument("--kv", type=int, default=1024)
p.add_argument("--hq", type=int, default=8)
p.add_argument("--hkv", type=int, default=1)
p.add_argument("--d", type=int, default=128)
p.add_argument("--calls", type=int, default=3)
p.add_argument("--by-batch", action="store_true", help="split_by_batch: the parts weigh the batch size too")
a = p.parse_args()
q = torch.randn(a.batch, 1, a.hq, a.d, device="cuda").to(torch.bfloat16)
k, v = (torch.randn(a.batch, a.kv, a.hkv, a.d, device="cuda").to(torch.bfloat16) for _ in "kv")
out = torch.empty_like(q)
attn = fa4rt.Attention()
ws = attn.workspace_size(q, k, v, out=out, num_splits=0, split_by_batch=a.by_batch)
kw = dict(out=out, num_splits=0, split_by_batch=a.by_batch, workspace=torch.empty(ws, dtype=torch.uint8, device="cuda") if ws else None)
qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
for _ in range(a.calls):
    attn.run(q, k, v, **kw)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=a.hq != a.hkv)
torch.cuda.synchronize()
print("ok: fa4rt and cuDNN, %d calls each" % a.calls)
