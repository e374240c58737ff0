#!/usr/bin/env python3
"""FA4-cute's sm90 forward kernel compiled to an sm_90a cubin on a machine without a GPU or PyTorch, for its
SASS beside ours (nvdisasm; tools/sass_report.py --cubin reads sm_100 kernels, this one's loop is read by
hand or by the same counting). Development only: FA4-cute is never a dependency of fa4rt.

It needs a Python 3.12 environment holding FA4-cute's wheels (tools/fa4cute_peer.sh fetch puts them in .whl;
../shared/docs/baselines.md lists them) and cuda-python, typing_extensions, protobuf and numpy from PyPI:

    cat .whl/p1/libs.part1 .whl/p2/libs.part2 > /tmp/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
    python3.12 -m venv /tmp/cute && /tmp/cute/bin/pip install --no-deps .whl/p2/*.whl /tmp/nvidia_cutlass_dsl_libs_cu13-*.whl
    /tmp/cute/bin/pip install cuda-python typing_extensions protobuf numpy
    /tmp/cute/bin/python tools/fa4cute_sm90_cubin.py --d 64 --out /tmp/fa4-d64    # writes the .cubin and .ptx

Only the kernel class is compiled, from fake tensors (CuTe's tensor-free compilation): PyTorch and Triton,
which the package imports on its way, are stubbed, and the packages' __init__ files (which call into
PyTorch) are skipped. The tile follows FA4-cute 4.0.0b36's `_tile_size_fwd_sm90` unless given."""
import argparse
import importlib.util
import os
import sys
import types
from unittest import mock


def stub_modules():
    """Module objects for torch and triton: a few real classes (isinstance checks) and mocks for the rest."""
    def stub(name):
        m = types.ModuleType(name)
        m.__path__ = []
        for cls in ("Tensor", "dtype", "device", "Generator"):
            setattr(m, cls, type(cls, (), {}))
        m.__getattr__ = lambda attr: mock.MagicMock(name=name + "." + attr)
        return m
    for name in ("torch", "torch.library", "torch.nn", "torch.nn.functional", "torch.utils", "torch.utils.dlpack",
                 "torch.utils._pytree", "torch._dynamo", "torch._C", "torch.cuda", "torch.backends",
                 "torch.backends.cuda", "torch.distributed", "torch.fx", "torch.types", "torch._subclasses",
                 "torch._subclasses.fake_tensor", "triton", "triton.language", "triton.testing", "triton.runtime",
                 "triton.compiler"):
        sys.modules[name] = stub(name)
    # Packages whose __init__ reaches PyTorch: their submodules import without it.
    roots = {top: importlib.util.find_spec(top).submodule_search_locations[0] for top in ("flash_attn", "quack")}
    for package in ("flash_attn", "flash_attn.cute", "quack"):
        top, *rest = package.split(".")
        m = types.ModuleType(package)
        m.__path__ = [os.path.join(roots[top], *rest)]
        sys.modules[package] = m


def default_tile(d, dv, causal):
    """FA4-cute 4.0.0b36's sm90 tiles (flash_attn/cute/interface.py, _tile_size_fwd_sm90)."""
    if d <= 64:
        return 192, 128
    if d <= 96:
        return 192, 128 if causal else 144
    if d <= 128:
        return 128, 128
    if d <= 192:
        return 128, 128 if dv <= 128 else 112
    return 128, 80


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--dv", type=int, default=0, help="0: --d")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--tile", help="M,N (default: FA4-cute's)")
    p.add_argument("--out", required=True, help="directory for the .cubin and .ptx")
    a = p.parse_args()
    dv = a.dv or a.d
    tile_m, tile_n = map(int, a.tile.split(",")) if a.tile else default_tile(a.d, dv, a.causal)
    os.makedirs(a.out, exist_ok=True)
    os.environ.update(CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx,cubin", CUTE_DSL_DUMP_DIR=os.path.abspath(a.out))
    stub_modules()
    import cutlass
    import cutlass.cute as cute
    from flash_attn.cute.flash_fwd_sm90 import FlashAttentionForwardSm90
    from flash_attn.cute.utils import AuxData
    from quack.compile_utils import make_fake_tensor

    # The arguments FA4-cute's interface passes for a dense bf16 forward without variants.
    kernel = FlashAttentionForwardSm90(cutlass.BFloat16, a.d, dv, 1, is_causal=a.causal, is_local=False,
                                       pack_gqa=False, tile_m=tile_m, tile_n=tile_n, num_stages=2, num_threads=384,
                                       Q_in_regs=False, intra_wg_overlap=True, mma_pv_is_rs=True, mask_mod=None,
                                       score_mod=None, has_aux_tensors=False, q_subtile_factor=None,
                                       paged_kv_non_tma=False)
    b, s, h = cute.sym_int(), cute.sym_int(), cute.sym_int()
    q, k = (make_fake_tensor(cutlass.BFloat16, (b, s, h, a.d), divisibility=8) for _ in range(2))
    v, o = (make_fake_tensor(cutlass.BFloat16, (b, s, h, dv), divisibility=8) for _ in range(2))
    stream = cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True)
    # mLSE, cu_seqlens_q/k, seqused_q/k, page_table, windows, sink, block sparsity: none.
    cute.compile(kernel, q, k, v, o, None, cutlass.Float32(1.0 / a.d ** 0.5), None, None, None, None, None, None,
                 None, None, None, AuxData(), None, None, stream, options="--enable-tvm-ffi")
    print("FA4-cute sm90 d%d dv%d %s, tile %dx%d: %s" % (a.d, dv, "causal" if a.causal else "full", tile_m, tile_n,
                                                         " ".join(sorted(os.listdir(a.out)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
