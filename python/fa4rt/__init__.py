"""Thin ctypes wrapper over libfa4rt's C ABI (include/fa4/fa4.h).

    import fa4rt
    attn = fa4rt.Attention()
    attn.prewarm([fa4rt.config("bf16", 128, causal=True)])
    out = attn.run(q, k, v, causal=True)        # q [b, s_q, h_q, d], k/v [b, s_k, h_kv, d(v)]
    out, lse = attn.run(q, k, v, return_lse=True)
    out = attn.run(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)              # ragged: q [total_q, h_q, d]
    out = attn.run(q, k_cache, v_cache, page_table=table, seqused_k=lengths)   # paged: k/v [pages, page_size, h_kv, d]
    out = attn.merge([(o1, lse1), (o2, lse2)])   # partial states over disjoint keys

libfa4rt is looked up (library_path()) at $FA4_LIB (or $FA4RT_LIB), then beside this package (a libfa4rt.so
copied into it before `pip install`), then in the build/ directory of the source tree holding this package,
then by the system loader (libfa4rt.so.0: an installed library). Only ctypes is needed to import this package
and to use the calls without tensors (version, prewarm); run() needs PyTorch.
"""

import ctypes
import glob
import os

__all__ = ["Attention", "Fa4Error", "config", "config_for", "load_library", "library_path", "version"]
__version__ = "0.2.0"  # the library's version (CMakeLists.txt project()); tests/python/test_package.py checks it

# The shared library's SONAME: what the system loader finds once fa4rt is installed.
_SONAME = "libfa4rt.so.0"

# fa4.h error codes (FA4_ERR_*), by name, for messages and for callers that test e.code.
ERROR_NAMES = {
    1: "invalid_argument",
    2: "unsupported",
    3: "cuda_error",
    4: "compile_error",
    5: "not_cached",
    6: "graph_capture",
    7: "self_check_failed",
    8: "cache_error",
    9: "internal",
}
ERR_INVALID_ARGUMENT = 1
ERR_INTERNAL = 9

_DTYPES = {"bf16": 0, "fp16": 1}  # FA4_DTYPE_*


class Fa4Error(RuntimeError):
    """A failed fa4 call: `code` is the FA4_ERR_* value, `code_name` its name, `message` fa4's text."""

    def __init__(self, code, message):
        self.code = code
        self.code_name = ERROR_NAMES.get(code, "unknown")
        self.message = message
        super().__init__("fa4 error %d (%s): %s" % (code, self.code_name, message))


class _Params(ctypes.Structure):  # fa4_params
    _fields_ = [
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("return_lse", ctypes.c_int32),
        ("batch", ctypes.c_int64),
        ("seqlen_q", ctypes.c_int64),
        ("seqlen_k", ctypes.c_int64),
        ("heads_q", ctypes.c_int64),
        ("heads_kv", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("q_stride", ctypes.c_int64 * 3),
        ("k_stride", ctypes.c_int64 * 3),
        ("v_stride", ctypes.c_int64 * 3),
        ("o_stride", ctypes.c_int64 * 3),
        ("dtype", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("softmax_scale", ctypes.c_float),
    ]


class _Config(ctypes.Structure):  # fa4_config
    _fields_ = [
        ("dtype", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("head_dim_v", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("lse", ctypes.c_int32),
        ("q_heads_per_kv", ctypes.c_int32),
        ("arch", ctypes.c_int32),
    ]


class _Versioned(ctypes.Structure):
    """A struct of fa4.h that begins with struct_size: constructed with it set to this layout's size."""

    def __init__(self, **fields):
        super().__init__(struct_size=ctypes.sizeof(self), **fields)


class _Serving(_Versioned):  # fa4_serving
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("cu_seqlens_q", ctypes.c_void_p),
        ("total_q", ctypes.c_int64),
        ("cu_seqlens_k", ctypes.c_void_p),
        ("total_k", ctypes.c_int64),
        ("seqused_k", ctypes.c_void_p),
        ("page_table", ctypes.c_void_p),
        ("page_size", ctypes.c_int64),
        ("num_pages", ctypes.c_int64),
        ("max_pages_per_seq", ctypes.c_int64),
        ("num_splits", ctypes.c_int32),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("window", ctypes.c_int32),
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("softcap", ctypes.c_float),
        ("sinks", ctypes.c_void_p),
        ("split_by_batch", ctypes.c_int32),
    ]


class _ConfigEx(_Versioned):  # fa4_config_ex
    _fields_ = [("struct_size", ctypes.c_uint32)] + _Config._fields_ + [
        ("varlen", ctypes.c_int32),
        ("paged", ctypes.c_int32),
        ("split", ctypes.c_int32),
        ("decode", ctypes.c_int32),
        ("window", ctypes.c_int32),
        ("softcap", ctypes.c_int32),
        ("sinks", ctypes.c_int32),
    ]


class _MergeState(ctypes.Structure):  # fa4_merge_state
    _fields_ = [("o", ctypes.c_void_p), ("lse", ctypes.c_void_p)]


class _MergeParams(_Versioned):  # fa4_merge_params
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("num_states", ctypes.c_int32),
        ("states", ctypes.POINTER(_MergeState)),
        ("state_stride", ctypes.c_int64 * 3),
        ("o", ctypes.c_void_p),
        ("o_stride", ctypes.c_int64 * 3),
        ("lse", ctypes.c_void_p),
        ("batch", ctypes.c_int64),
        ("seqlen", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("cu_seqlens", ctypes.c_void_p),
        ("total", ctypes.c_int64),
        ("dtype", ctypes.c_int32),
    ]


def library_path():
    """Where load_library() loads libfa4rt from: a path, or the bare SONAME for the system loader."""
    for variable in ("FA4_LIB", "FA4RT_LIB"):
        if os.environ.get(variable):
            return os.environ[variable]
    here = os.path.dirname(os.path.abspath(__file__))
    beside = sorted(glob.glob(os.path.join(here, "libfa4rt.so*")))
    if beside:
        return beside[0]
    built = os.path.join(os.path.dirname(os.path.dirname(here)), "build", "libfa4rt.so")
    if os.path.exists(built):
        return built
    return _SONAME


_lib = None


def load_library():
    """Loads libfa4rt once; raises OSError naming the path when it is missing or unloadable."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if path != _SONAME and not os.path.exists(path):
        raise OSError("libfa4rt not found at %s (set FA4_LIB to the library's path)" % path)
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        if path != _SONAME:
            raise
        raise OSError("libfa4rt not found: FA4_LIB is not set, no libfa4rt.so beside the fa4rt package, no build/ "
                      "beside its source, and the system loader has no %s (%s)" % (_SONAME, e)) from e
    handle_p = ctypes.c_void_p
    lib.fa4_create.argtypes = [ctypes.POINTER(handle_p)]
    lib.fa4_create.restype = ctypes.c_int
    lib.fa4_destroy.argtypes = [handle_p]
    lib.fa4_destroy.restype = ctypes.c_int
    lib.fa4_run.argtypes = [handle_p, ctypes.POINTER(_Params), ctypes.c_void_p]
    lib.fa4_run.restype = ctypes.c_int
    lib.fa4_prewarm.argtypes = [handle_p, ctypes.POINTER(_Config), ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
    lib.fa4_prewarm.restype = ctypes.c_int
    lib.fa4_run_serving.argtypes = [handle_p, ctypes.POINTER(_Params), ctypes.POINTER(_Serving), ctypes.c_void_p]
    lib.fa4_run_serving.restype = ctypes.c_int
    lib.fa4_workspace_size.argtypes = [handle_p, ctypes.POINTER(_Params), ctypes.POINTER(_Serving),
                                       ctypes.POINTER(ctypes.c_size_t)]
    lib.fa4_workspace_size.restype = ctypes.c_int
    lib.fa4_merge.argtypes = [handle_p, ctypes.POINTER(_MergeParams), ctypes.c_void_p]
    lib.fa4_merge.restype = ctypes.c_int
    lib.fa4_prewarm_ex.argtypes = [handle_p, ctypes.POINTER(_ConfigEx), ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
    lib.fa4_prewarm_ex.restype = ctypes.c_int
    lib.fa4_last_error.argtypes = []
    lib.fa4_last_error.restype = ctypes.c_char_p
    lib.fa4_version.argtypes = []
    lib.fa4_version.restype = ctypes.c_char_p
    _lib = lib
    return lib


def version():
    return load_library().fa4_version().decode()


def _torch(what):
    """PyTorch, or an ImportError that says `what` needs it (the rest of this package does not)."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("fa4rt: %s needs PyTorch, which is not installed (pip install torch); version() and "
                          "prewarm() with dtype names work without it" % what) from e
    return torch


def _check(rc):
    if rc != 0:
        message = _lib.fa4_last_error() or b""
        raise Fa4Error(rc, message.decode(errors="replace"))


def _invalid(message):
    return Fa4Error(ERR_INVALID_ARGUMENT, message)


def _int32(name, value):
    """A Python int for an int32_t field: ctypes would silently wrap 2**32 + 1 to 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid("%s: must be an int, got %r" % (name, value))
    if not -2**31 <= value < 2**31:
        raise _invalid("%s: must fit in 32 bits, got %d" % (name, value))
    return value


def _dtype_code(dtype):
    """'bf16' / 'fp16' or a torch dtype -> FA4_DTYPE_*."""
    if isinstance(dtype, str):
        if dtype not in _DTYPES:
            raise _invalid("dtype '%s': must be bf16 or fp16" % dtype)
        return _DTYPES[dtype]
    torch = _torch("a torch dtype")

    if dtype == torch.bfloat16:
        return _DTYPES["bf16"]
    if dtype == torch.float16:
        return _DTYPES["fp16"]
    raise _invalid("dtype %s: must be torch.bfloat16 or torch.float16" % dtype)


def config(dtype, head_dim, head_dim_v=0, causal=False, lse=False, q_heads_per_kv=1, arch=0, varlen=False,
           paged=False, split=False, decode=False, window=False, softcap=False, sinks=False):
    """A prewarm configuration (fa4_config_ex). arch 0 means the current device. The serving flags: varlen
    (cu_seqlens_q/k or seqused_k given), paged (page_table given), split (split-KV: num_splits > 1, or 0
    with a workspace), decode (seqlen_q * q_heads_per_kv <= 32: the decode kernel; a ragged batch with
    longer sequences runs both it and the prefill kernel), and the variants in use: window, softcap, sinks."""
    return dict(dtype=dtype, head_dim=head_dim, head_dim_v=head_dim_v, causal=causal, lse=lse,
                q_heads_per_kv=q_heads_per_kv, arch=arch, varlen=varlen, paged=paged, split=split, decode=decode,
                window=window, softcap=softcap, sinks=sinks)


def config_for(q, k, v, causal=False, return_lse=False, varlen=False, paged=False, split=False, decode=False):
    """The configuration run(q, k, v, causal=..., return_lse=...) selects, for prewarm (the serving flags as
    in config())."""
    return config(q.dtype, q.shape[-1], v.shape[-1], causal, return_lse, q.shape[-2] // max(k.shape[-2], 1),
                  varlen=varlen, paged=paged, split=split, decode=decode)


def _strides(name, t, ragged=False):
    """Element strides (batch, seq, head) of a [b, s, h, d] tensor, or of a ragged [total, h, d] one (its
    batch stride unused); the last dim must be contiguous."""
    if t.dim() != (3 if ragged else 4):
        shape = "3-D [total, heads, dim] tensor (ragged)" if ragged else "4-D [batch, seq, heads, dim] tensor"
        raise _invalid("%s: must be a %s, got shape %s" % (name, shape, tuple(t.shape)))
    if t.stride(-1) != 1 and t.shape[-1] != 1:
        raise _invalid("%s: the last (dim) axis must be contiguous, got strides %s" % (name, t.stride()))
    return (ctypes.c_int64 * 3)(*(((0,) + t.stride()[:2]) if ragged else t.stride()[:3]))


def _describe(t):
    shape = getattr(t, "shape", None)
    return "%s %s on %s" % (tuple(shape), t.dtype, t.device) if shape is not None else repr(t)


def _cuda_tensor(torch, name, t, like):
    """t is a CUDA tensor with like's dtype and device."""
    if not isinstance(t, torch.Tensor) or not t.is_cuda:
        raise _invalid("%s: must be a CUDA torch.Tensor, got %s" % (name, _describe(t)))
    if t.dtype != like.dtype or t.device != like.device:
        raise _invalid("%s: dtype %s on %s, must match %s on %s" % (name, t.dtype, t.device, like.dtype, like.device))


def _indices(torch, name, t, dims, device):
    """A serving index tensor (cu_seqlens, seqused_k, page_table): contiguous int32 of `dims` dims on `device`."""
    if t is None:
        return None
    if (not isinstance(t, torch.Tensor) or t.dtype != torch.int32 or t.device != device or t.dim() != dims
            or not t.is_contiguous()):
        raise _invalid("%s: must be a contiguous %d-D torch.int32 tensor on %s, got %s" % (name, dims, device, _describe(t)))
    return t


def _longest(cu_seqlens):
    """The longest sequence of a cu_seqlens tensor (at least 1). Reads the device: synchronises."""
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    return max(int(lengths.max()), 1) if lengths.numel() else 1


def _ptr(t):
    return None if t is None else t.data_ptr()


def _stream(torch, stream, device):
    """The torch stream to launch on: `device`'s current one (None), a torch.cuda.Stream, or a raw CUstream."""
    if stream is None:
        return torch.cuda.current_stream(device)
    if hasattr(stream, "cuda_stream"):
        return stream
    return torch.cuda.ExternalStream(int(stream), device=device)


class _Call:
    """One call's fa4_params and fa4_serving, built from its tensors. Checks what only the tensors show
    (ranks, dtypes, devices, sizes that must agree) and leaves every other rule to the library."""

    def __init__(self, torch, q, k, v, out=None, causal=False, softmax_scale=None, return_lse=False,
                 cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, seqused_k=None,
                 page_table=None, num_splits=0, window=None, softcap=0.0, sinks=None, split_by_batch=False):
        _cuda_tensor(torch, "q", q, q)
        _cuda_tensor(torch, "k", k, q)
        _cuda_tensor(torch, "v", v, q)
        device = q.device
        ragged_q, paged = cu_seqlens_q is not None, page_table is not None
        ragged_k = cu_seqlens_k is not None and not paged
        cu_q = _indices(torch, "cu_seqlens_q", cu_seqlens_q, 1, device)
        cu_k = _indices(torch, "cu_seqlens_k", cu_seqlens_k, 1, device)
        used = _indices(torch, "seqused_k", seqused_k, 1, device)
        table = _indices(torch, "page_table", page_table, 2, device)

        p, s = _Params(), _Serving()
        p.q_stride, p.k_stride, p.v_stride = _strides("q", q, ragged_q), _strides("k", k, ragged_k), _strides("v", v, ragged_k)
        if tuple(k.shape[:-1]) != tuple(v.shape[:-1]):
            raise _invalid("v.shape[:-1] %s: must equal k.shape[:-1] %s" % (tuple(v.shape[:-1]), tuple(k.shape[:-1])))
        hq, d, hkv, dv = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
        if k.shape[-1] != d:
            raise _invalid("k head dim %d: must equal q head dim %d" % (k.shape[-1], d))

        batch = cu_q.numel() - 1 if ragged_q else q.shape[0]
        for name, n in (("cu_seqlens_k", None if cu_k is None else cu_k.numel() - 1),
                        ("seqused_k", None if used is None else used.numel()),
                        ("page_table", None if table is None else table.shape[0]),
                        ("k", None if ragged_k or paged else k.shape[0])):
            if n is not None and n != batch:
                raise _invalid("%s: holds %d sequences, q holds %d" % (name, n, batch))
        if ragged_q:
            seqlen_q = _longest(cu_q) if max_seqlen_q is None else _int32("max_seqlen_q", max_seqlen_q)
        elif max_seqlen_q is not None:
            raise _invalid("max_seqlen_q: only with cu_seqlens_q (a dense q's length is q.shape[1])")
        else:
            seqlen_q = q.shape[1]
        if paged:  # default: the page-table row's capacity
            seqlen_k = table.shape[1] * k.shape[1] if max_seqlen_k is None else _int32("max_seqlen_k", max_seqlen_k)
        elif ragged_k:
            seqlen_k = _longest(cu_k) if max_seqlen_k is None else _int32("max_seqlen_k", max_seqlen_k)
        elif max_seqlen_k is not None:
            raise _invalid("max_seqlen_k: only with cu_seqlens_k or page_table (a dense k's length is k.shape[1])")
        else:
            seqlen_k = k.shape[1]

        out_shape = (q.shape[0], hq, dv) if ragged_q else (batch, seqlen_q, hq, dv)
        if out is None:
            out = torch.empty(out_shape, dtype=q.dtype, device=device)
        elif tuple(getattr(out, "shape", ())) != out_shape or out.dtype != q.dtype or out.device != device:
            raise _invalid("out: must be %s %s on %s, got %s" % (out_shape, q.dtype, device, _describe(out)))
        p.o_stride = _strides("out", out, ragged_q)
        lse_shape = (hq, q.shape[0]) if ragged_q else (batch, hq, seqlen_q)
        lse = torch.empty(lse_shape, dtype=torch.float32, device=device) if return_lse else None

        p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), _ptr(lse)
        p.return_lse = int(bool(return_lse))
        p.batch, p.seqlen_q, p.seqlen_k = batch, seqlen_q, seqlen_k
        p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v = hq, hkv, d, dv
        p.dtype = _dtype_code(q.dtype)
        p.causal = int(bool(causal))
        p.softmax_scale = 0.0 if softmax_scale is None else float(softmax_scale)
        if softmax_scale is not None and p.softmax_scale == 0.0:
            raise _invalid("softmax_scale: must be nonzero (None means 1/sqrt(head_dim))")
        s.cu_seqlens_q, s.cu_seqlens_k, s.seqused_k, s.page_table = _ptr(cu_q), _ptr(cu_k), _ptr(used), _ptr(table)
        s.total_q = q.shape[0] if ragged_q else 0
        s.total_k = k.shape[0] if ragged_k else 0
        if paged:
            s.num_pages, s.page_size, s.max_pages_per_seq = k.shape[0], k.shape[1], table.shape[1]
        s.num_splits = _int32("num_splits", num_splits)
        s.split_by_batch = int(bool(split_by_batch))
        if window is not None:  # (left, right), each -1 (unbounded) or >= 0
            s.window = 1
            s.window_left, s.window_right = (int(side) for side in window)
        s.softcap = float(softcap)
        if sinks is not None:
            if not isinstance(sinks, torch.Tensor) or sinks.dtype != torch.float32 or sinks.device != device \
                    or tuple(sinks.shape) != (hq,) or not sinks.is_contiguous():
                raise _invalid("sinks: must be a contiguous float32 tensor [%d] on %s, got %s" % (hq, device, _describe(sinks)))
            s.sinks = sinks.data_ptr()
        self.params, self.serving, self.out, self.lse, self.device = p, s, out, lse, device
        self.sinks = sinks  # alive until the launch

    def wants_workspace(self):
        """Whether run() asks for a workspace when given none: any split-KV call (the library's
        workspace_size says how much; 0 when nothing would be cut, e.g. a prefill with num_splits 0)."""
        return self.serving.num_splits != 1

    def use_workspace(self, torch, workspace):
        if workspace is None:
            return
        if not isinstance(workspace, torch.Tensor) or workspace.device != self.device or not workspace.is_contiguous():
            raise _invalid("workspace: must be a contiguous torch.Tensor on %s, got %s" % (self.device, _describe(workspace)))
        self.serving.workspace = workspace.data_ptr()
        self.serving.workspace_bytes = workspace.numel() * workspace.element_size()
        self.workspace = workspace  # alive until the launch


class Attention:
    """One fa4::Attention (its kernel cache and options from the FA4_* environment variables)."""

    def __init__(self):
        self._lib = load_library()
        handle = ctypes.c_void_p()
        _check(self._lib.fa4_create(ctypes.byref(handle)))
        self._handle = handle

    def close(self):
        """Releases the handle; closing twice is a no-op. Calls on a closed object raise Fa4Error."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _check(self._lib.fa4_destroy(handle))

    def _live(self):
        if not getattr(self, "_handle", None):
            raise _invalid("handle: this fa4rt.Attention is closed (close() or its with-block ended)")
        return self._handle

    def __del__(self):
        try:
            self.close()
        except Exception:  # never raise from a finaliser (e.g. at interpreter exit)
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def prewarm(self, configs):
        """Compiles the configurations (dicts from config() / config_for()); raises Fa4Error if any fails."""
        handle = self._live()
        array = (_ConfigEx * len(configs))()
        for i, (slot, c) in enumerate(zip(array, configs)):
            field = "configs[%d]." % i
            slot.struct_size = ctypes.sizeof(_ConfigEx)
            slot.dtype = _dtype_code(c["dtype"])
            slot.head_dim = _int32(field + "head_dim", c["head_dim"])
            slot.head_dim_v = _int32(field + "head_dim_v", c.get("head_dim_v", 0))
            slot.causal = int(bool(c.get("causal", False)))
            slot.lse = int(bool(c.get("lse", False)))
            slot.q_heads_per_kv = _int32(field + "q_heads_per_kv", c.get("q_heads_per_kv", 1))
            slot.arch = _int32(field + "arch", c.get("arch", 0))
            flags = ("varlen", "paged", "split", "decode", "window", "softcap", "sinks")
            for flag in flags:
                setattr(slot, flag, int(bool(c.get(flag, False))))
        # On failure fa4_prewarm_ex returns the first failing configuration's code and message.
        _check(self._lib.fa4_prewarm_ex(handle, array, len(configs), None))

    def run(self, q, k, v, out=None, causal=False, softmax_scale=None, return_lse=False, stream=None, *,
            cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, seqused_k=None,
            page_table=None, num_splits=0, workspace=None, window=None, softcap=0.0, sinks=None,
            split_by_batch=False):
        """Attention of q [b, s_q, h_q, d] over k [b, s_k, h_kv, d], v [b, s_k, h_kv, dv] (CUDA tensors,
        bf16 or fp16, last dim contiguous). Causal is bottom-right aligned, per sequence. Writes `out`
        (allocated when None) and returns it, or (out, lse) with lse fp32 [b, h_q, s_q] when return_lse.
        `stream` is a torch.cuda.Stream or a raw CUstream handle; default: the current torch stream of q's
        device.

        Serving shapes (docs/correctness.md; index tensors are contiguous int32 on q's device):
          cu_seqlens_q [b + 1]: ragged queries, q and out [total_q, h_q, d(v)], lse [h_q, total_q];
          cu_seqlens_k [b + 1]: ragged keys, k/v [total_k, h_kv, d(v)] (with page_table: key counts only);
          seqused_k [b]: sequence i sees keys [0, seqused_k[i]);
          page_table [b, max_pages_per_seq]: paged KV, k/v [num_pages, page_size, h_kv, d(v)];
          max_seqlen_q / max_seqlen_k: the longest sequence. Default: read from cu_seqlens (a device read
            that synchronises; pass them under CUDA graph capture), or with a page table its row's capacity.
          num_splits: 1 never splits the keys, n > 1 cuts each sequence into n parts, 0 lets the library cut
            decode sequences (it needs a workspace for that).
          split_by_batch: with num_splits 0, the batch size chooses the parts too: faster decode at small and
            large batches, but a sequence's result then depends on the batch size (default False: batch-invariant).
          workspace: device memory for split-KV (any contiguous tensor; workspace_size() bytes). None: the
            library's workspace_size() is allocated per call (0 bytes when nothing is cut). Pass one to avoid
            the allocation, or under CUDA graphs.

        Variants: window=(left, right): a sliding window, bottom-right aligned, each side -1 (unbounded) or
        >= 0 (causal is (-1, 0)); softcap > 0: scores become softcap * tanh(score / softcap); sinks: a float32
        tensor [h_q] of per-head logits that join every row's softmax denominator."""
        handle = self._live()
        torch = _torch("Attention.run")
        call = _Call(torch, q, k, v, out, causal, softmax_scale, return_lse, cu_seqlens_q, cu_seqlens_k,
                     max_seqlen_q, max_seqlen_k, seqused_k, page_table, num_splits, window, softcap, sinks,
                     split_by_batch)
        launch = _stream(torch, stream, call.device)
        with torch.cuda.device(call.device):  # the library works in the current context
            if workspace is None and call.wants_workspace():
                size = self._workspace_bytes(handle, call)
                if size:
                    workspace = torch.empty(size, dtype=torch.uint8, device=call.device)
                    workspace.record_stream(launch)  # freed at return, while the kernels may still run
            call.use_workspace(torch, workspace)
            _check(self._lib.fa4_run_serving(handle, ctypes.byref(call.params), ctypes.byref(call.serving),
                                             ctypes.c_void_p(launch.cuda_stream)))
        return (call.out, call.lse) if return_lse else call.out

    def workspace_size(self, q, k, v, out=None, causal=False, softmax_scale=None, return_lse=False, *,
                       cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, seqused_k=None,
                       page_table=None, num_splits=0, window=None, softcap=0.0, sinks=None, split_by_batch=False):
        """The workspace bytes run() with these arguments needs (0: none). With num_splits 0, the size a
        workspace must have for the library to cut decode sequences. Size it once for the largest batch and
        lengths of the decode calls served (docs/correctness.md), and pass it to every run() (CUDA graphs):
        it is then enough for every decode call with a smaller batch and shorter lengths."""
        handle = self._live()
        torch = _torch("Attention.workspace_size")
        call = _Call(torch, q, k, v, out, causal, softmax_scale, return_lse, cu_seqlens_q, cu_seqlens_k,
                     max_seqlen_q, max_seqlen_k, seqused_k, page_table, num_splits, window, softcap, sinks,
                     split_by_batch)
        with torch.cuda.device(call.device):
            return self._workspace_bytes(handle, call)

    def _workspace_bytes(self, handle, call):
        size = ctypes.c_size_t()
        _check(self._lib.fa4_workspace_size(handle, ctypes.byref(call.params), ctypes.byref(call.serving),
                                            ctypes.byref(size)))
        return size.value

    def merge(self, states, out=None, return_lse=False, stream=None, *, cu_seqlens=None, max_seqlen=None):
        """Merges partial attention states over disjoint keys of the same queries (cascade or shared-prefix
        attention, context parallelism): LSE = log sum_s exp(LSE_s), O = sum_s exp(LSE_s - LSE) O_s.
        states: 2 to 8 (o, lse) pairs as run(..., return_lse=True) returns them: o [b, s, h, dv] with lse
        [b, h, s], or with cu_seqlens [b + 1] o [total, h, dv] with lse [h, total]; every o with the same
        strides. Returns out (allocated when None), or (out, lse) when return_lse."""
        handle = self._live()
        torch = _torch("Attention.merge")
        states = list(states)
        if not states:
            raise _invalid("states: must hold 2 to 8 (o, lse) pairs, got none")
        o0 = states[0][0]
        _cuda_tensor(torch, "states[0].o", o0, o0)
        ragged = cu_seqlens is not None
        strides = _strides("states[0].o", o0, ragged)
        cu = _indices(torch, "cu_seqlens", cu_seqlens, 1, o0.device)
        if ragged:
            batch, total = cu.numel() - 1, o0.shape[0]
            seqlen = _longest(cu) if max_seqlen is None else _int32("max_seqlen", max_seqlen)
        elif max_seqlen is not None:
            raise _invalid("max_seqlen: only with cu_seqlens (dense states' length is o.shape[1])")
        else:
            (batch, seqlen), total = o0.shape[:2], 0
        heads, dv = o0.shape[-2:]
        lse_shape = (heads, total) if ragged else (batch, heads, seqlen)
        array = (_MergeState * len(states))()
        for i, (slot, (o, lse)) in enumerate(zip(array, states)):
            _cuda_tensor(torch, "states[%d].o" % i, o, o0)
            if o.shape != o0.shape or o.stride() != o0.stride():
                raise _invalid("states[%d].o: shape %s strides %s, must equal states[0].o's %s %s"
                               % (i, tuple(o.shape), o.stride(), tuple(o0.shape), o0.stride()))
            if (not isinstance(lse, torch.Tensor) or tuple(lse.shape) != lse_shape or lse.dtype != torch.float32
                    or lse.device != o0.device or not lse.is_contiguous()):
                raise _invalid("states[%d].lse: must be a contiguous torch.float32 %s tensor on %s, got %s"
                               % (i, lse_shape, o0.device, _describe(lse)))
            slot.o, slot.lse = o.data_ptr(), lse.data_ptr()
        if out is None:
            out = torch.empty(o0.shape, dtype=o0.dtype, device=o0.device)
        _cuda_tensor(torch, "out", out, o0)
        if out.shape != o0.shape:
            raise _invalid("out: must have the states' shape %s, got %s" % (tuple(o0.shape), tuple(out.shape)))
        out_lse = torch.empty(lse_shape, dtype=torch.float32, device=o0.device) if return_lse else None

        m = _MergeParams(num_states=len(states), states=array, state_stride=strides, o=out.data_ptr(),
                         o_stride=_strides("out", out, ragged), lse=_ptr(out_lse), batch=batch, seqlen=seqlen,
                         heads=heads, head_dim_v=dv, cu_seqlens=_ptr(cu), total=total, dtype=_dtype_code(o0.dtype))
        launch = _stream(torch, stream, o0.device)
        with torch.cuda.device(o0.device):
            _check(self._lib.fa4_merge(handle, ctypes.byref(m), ctypes.c_void_p(launch.cuda_stream)))
        return (out, out_lse) if return_lse else out
