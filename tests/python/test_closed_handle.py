#!/usr/bin/env python3
"""python/fa4rt.py on a closed Attention and on values ctypes would silently wrap: a Fa4Error, never a
crash or a wrong configuration. CPU only (no torch, no GPU).

Exit status: 0 pass, 1 fail, 77 skipped (libfa4rt not built)."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

import fa4rt  # noqa: E402


def expect_error(what, call, field):
    try:
        call()
    except fa4rt.Fa4Error as e:
        if field not in e.message:
            print("FAIL %s: the message does not name %r: %s" % (what, field, e.message))
            return False
        print("ok   %s: %s" % (what, e.message))
        return True
    print("FAIL %s: accepted" % what)
    return False


def main():
    try:
        fa4rt.load_library()
    except OSError as e:
        print("SKIPPED: %s" % e)
        return 77
    os.environ["FA4_DISK_CACHE"] = "0"
    ok = True
    attn = fa4rt.Attention()
    good = fa4rt.config("bf16", 128, arch=90)
    ok &= expect_error("q_heads_per_kv 2**32 + 1", lambda: attn.prewarm([dict(good, q_heads_per_kv=2**32 + 1)]),
                       "configs[0].q_heads_per_kv")
    ok &= expect_error("q_heads_per_kv 0", lambda: attn.prewarm([dict(good, q_heads_per_kv=0)]), "q_heads_per_kv")
    ok &= expect_error("head_dim '128'", lambda: attn.prewarm([dict(good, head_dim="128")]), "configs[0].head_dim")
    attn.close()
    attn.close()  # a second close is a no-op
    ok &= expect_error("prewarm after close", lambda: attn.prewarm([good]), "handle")
    ok &= expect_error("run after close", lambda: attn.run(None, None, None), "handle")
    with fa4rt.Attention() as scoped:
        pass
    ok &= expect_error("prewarm after the with-block", lambda: scoped.prewarm([good]), "handle")
    # The C ABI itself, under the wrapper: a destroyed handle is an error code, not a crash.
    lib = fa4rt.load_library()
    handle = fa4rt.ctypes.c_void_p()
    ok &= lib.fa4_create(fa4rt.ctypes.byref(handle)) == 0
    ok &= lib.fa4_destroy(handle) == 0
    rc = lib.fa4_destroy(handle)
    ok &= rc == fa4rt.ERR_INVALID_ARGUMENT
    print("%s second fa4_destroy: code %d, %s" % ("ok  " if rc == fa4rt.ERR_INVALID_ARGUMENT else "FAIL", rc,
                                                  lib.fa4_last_error().decode()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
