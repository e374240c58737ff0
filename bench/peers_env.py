"""What the Python benches share: PyTorch with SDPA and a CUDA device (or a SKIPPED line, exit status 77), and
FA4-cute's flash_attn_func as a peer where it imports (../shared/docs/baselines.md: PYTHONPATH to its wheels)."""


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
