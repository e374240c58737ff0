"""What the GPU Python tests share: PyTorch, a CUDA device and libfa4rt, or exit 77 after "SKIPPED: reason"."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

import fa4rt  # noqa: E402  (needs only ctypes)

SKIP = 77


def skip(reason):
    print("SKIPPED: " + reason)
    sys.exit(SKIP)


def torch_or_skip():
    """torch, with a CUDA device and the library loadable; else the test is skipped."""
    try:
        import torch
    except ImportError as e:
        skip("PyTorch is not installed (%s)" % e)
    if not torch.cuda.is_available():
        skip("torch.cuda.is_available() is False (no CUDA device)")
    try:
        fa4rt.load_library()
    except OSError as e:
        skip(str(e))
    return torch


def banner(torch):
    """The library, PyTorch and device a test ran on (its first output line)."""
    return "fa4rt %s (%s), torch %s, %s" % (fa4rt.version(), fa4rt.library_path(), torch.__version__,
                                          torch.cuda.get_device_name())
