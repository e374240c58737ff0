"""Thin ctypes wrapper over libfa4rt's C ABI (include/fa4/fa4.h).

    import fa4rt
    attn = fa4rt.Attention()
    attn.prewarm([fa4rt.config("bf16", 128, causal=True)])
    out = attn.run(q, k, v, causal=True)        # q [b, s_q, h_q, d], k/v [b, s_k, h_kv, d(v)]
    out, lse = attn.run(q, k, v, return_lse=True)

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


def config(dtype, head_dim, head_dim_v=0, causal=False, lse=False, q_heads_per_kv=1, arch=0):
    """A prewarm configuration (fa4_config). arch 0 means the current device."""
    return dict(dtype=dtype, head_dim=head_dim, head_dim_v=head_dim_v, causal=causal, lse=lse,
                q_heads_per_kv=q_heads_per_kv, arch=arch)


def config_for(q, k, v, causal=False, return_lse=False):
    """The configuration run(q, k, v, causal=..., return_lse=...) selects, for prewarm."""
    return config(q.dtype, q.shape[3], v.shape[3], causal, return_lse, q.shape[2] // max(k.shape[2], 1))


def _strides(name, t):
    """Element strides (batch, seq, head) of a [b, s, h, d] tensor whose last dim is contiguous."""
    if t.dim() != 4:
        raise _invalid("%s: must be a 4-D [batch, seq, heads, dim] tensor, got shape %s" % (name, tuple(t.shape)))
    if t.stride(3) != 1 and t.shape[3] != 1:
        raise _invalid("%s: the last (dim) axis must be contiguous, got strides %s" % (name, t.stride()))
    return (ctypes.c_int64 * 3)(t.stride(0), t.stride(1), t.stride(2))


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
        array = (_Config * len(configs))()
        for i, (slot, c) in enumerate(zip(array, configs)):
            field = "configs[%d]." % i
            slot.dtype = _dtype_code(c["dtype"])
            slot.head_dim = _int32(field + "head_dim", c["head_dim"])
            slot.head_dim_v = _int32(field + "head_dim_v", c.get("head_dim_v", 0))
            slot.causal = int(bool(c.get("causal", False)))
            slot.lse = int(bool(c.get("lse", False)))
            slot.q_heads_per_kv = _int32(field + "q_heads_per_kv", c.get("q_heads_per_kv", 1))
            slot.arch = _int32(field + "arch", c.get("arch", 0))
        # On failure fa4_prewarm returns the first failing configuration's code and message.
        _check(self._lib.fa4_prewarm(handle, array, len(configs), None))

    def run(self, q, k, v, out=None, causal=False, softmax_scale=None, return_lse=False, stream=None):
        """Attention of q [b, s_q, h_q, d] over k [b, s_k, h_kv, d], v [b, s_k, h_kv, dv] (CUDA tensors,
        bf16 or fp16, last dim contiguous). Causal is bottom-right aligned. Writes `out` (allocated when
        None) and returns it, or (out, lse) with lse fp32 [b, h_q, s_q] when return_lse. `stream` is a
        torch.cuda.Stream or a raw CUstream handle; default: the current torch stream of q's device."""
        handle = self._live()
        torch = _torch("Attention.run")

        dtype = _dtype_code(q.dtype)
        for name, t in (("q", q), ("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor) or not t.is_cuda:
                raise _invalid("%s: must be a CUDA torch.Tensor" % name)
            _strides(name, t)
            if t.dtype != q.dtype or t.device != q.device:
                raise _invalid("%s: dtype %s on %s, must match q (%s on %s)" % (name, t.dtype, t.device, q.dtype, q.device))
        b, sq, hq, d = q.shape
        if k.shape[0] != b or v.shape[0] != b:
            raise _invalid("k/v batch: must equal q's batch %d, got %d/%d" % (b, k.shape[0], v.shape[0]))
        if tuple(k.shape[:3]) != tuple(v.shape[:3]):
            raise _invalid("v.shape[:3] %s: must equal k.shape[:3] %s" % (tuple(v.shape[:3]), tuple(k.shape[:3])))
        if k.shape[3] != d:
            raise _invalid("k head dim %d: must equal q head dim %d" % (k.shape[3], d))
        dv = v.shape[3]
        if out is None:
            out = torch.empty((b, sq, hq, dv), dtype=q.dtype, device=q.device)
        elif tuple(out.shape) != (b, sq, hq, dv) or out.dtype != q.dtype or out.device != q.device:
            raise _invalid("out: must be %s %s on %s, got %s %s on %s"
                           % ((b, sq, hq, dv), q.dtype, q.device, tuple(out.shape), out.dtype, out.device))
        lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device) if return_lse else None

        p = _Params()
        p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
        p.lse = lse.data_ptr() if return_lse else None
        p.return_lse = int(bool(return_lse))
        p.batch, p.seqlen_q, p.seqlen_k, p.heads_q = b, sq, k.shape[1], hq
        p.heads_kv, p.head_dim, p.head_dim_v = k.shape[2], d, dv
        p.q_stride, p.k_stride = _strides("q", q), _strides("k", k)
        p.v_stride, p.o_stride = _strides("v", v), _strides("out", out)
        p.dtype = dtype
        p.causal = int(bool(causal))
        p.softmax_scale = 0.0 if softmax_scale is None else float(softmax_scale)
        if softmax_scale is not None and p.softmax_scale == 0.0:
            raise _invalid("softmax_scale: must be nonzero (None means 1/sqrt(head_dim))")

        if stream is None:
            stream = torch.cuda.current_stream(q.device)
        stream_handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else int(stream)
        with torch.cuda.device(q.device):  # the library launches in the current context
            _check(self._lib.fa4_run(handle, ctypes.byref(p), ctypes.c_void_p(stream_handle)))
        return (out, lse) if return_lse else out
