"""What the Python benches share: PyTorch with SDPA and a CUDA device (or a SKIPPED line, exit status 77), and
FA4-cute's flash_attn_func as a peer where it imports (../shared/docs/baselines.md: PYTHONPATH to its wheels), and
the timing: CUDA events around 5 calls, the median of 10 such runs, two calls timed in alternation."""

import statistics


def torch_or_skip():
    """(torch, torch.nn.functional, SDPBackend, sdpa_kernel) with a CUDA context made current, or None after
    printing why not ("SKIPPED: ..."; the caller then exits 77)."""
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print("SKIPPED: PyTorch is not installed (%s)" % e)
        return None
    if not torch.cuda.is_available():
        print("SKIPPED: torch.cuda.is_available() is False (no CUDA device)")
        return None
    torch.zeros(1, device="cuda")  # the context fa4rt runs in
    return torch, F, SDPBackend, sdpa_kernel


def fa4_cute():
    """FA4-cute's flash_attn_func (flash_attn.cute), or None when it is absent or fails to import here."""
    try:
        from flash_attn.cute import flash_attn_func
        return flash_attn_func
    except Exception:
        return None


def ms_of_5_calls(torch, fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 5


def ms_per_call(torch, fn):
    for _ in range(3):
        fn()
    return statistics.median(ms_of_5_calls(torch, fn) for _ in range(10))


def paired_ms_per_call(torch, fn_a, fn_b):
    """ms_per_call of two functions measured in alternation (a, b, a, b, ...), so that a drift in clocks or
    temperature over the run weighs on both alike."""
    for _ in range(3):
        fn_a()
        fn_b()
    pairs = [(ms_of_5_calls(torch, fn_a), ms_of_5_calls(torch, fn_b)) for _ in range(10)]
    return statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)
