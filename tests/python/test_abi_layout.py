#!/usr/bin/env python3
"""The ctypes structures of python/fa4rt/__init__.py must match those of include/fa4/fa4.h byte for byte
(fa4_params, fa4_config, fa4_serving, fa4_config_ex, fa4_merge_state, fa4_merge_params): compiles a tiny C
program that prints sizeof/offsetof and compares. CPU only.

Exit status: 0 pass, 1 fail, 77 skipped (no C compiler)."""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

import fa4rt  # noqa: E402


def c_layout(struct_name, fields, compiler):
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "fa4/fa4.h"', "int main(void) {",
             '  printf("%%zu\\n", sizeof(%s));' % struct_name]
    lines += ['  printf("%%zu\\n", offsetof(%s, %s));' % (struct_name, f) for f in fields]
    lines.append("  return 0;\n}\n")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        subprocess.run([compiler, "-I", os.path.join(REPO, "include"), src, "-o", exe], check=True)
        values = [int(x) for x in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split()]
    return values[0], values[1:]


def main():
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        print("SKIPPED: no C compiler (cc/gcc) to read fa4.h's layout")
        return 77
    ok = True
    structs = (("fa4_params", fa4rt._Params), ("fa4_config", fa4rt._Config), ("fa4_serving", fa4rt._Serving),
               ("fa4_config_ex", fa4rt._ConfigEx), ("fa4_merge_state", fa4rt._MergeState),
               ("fa4_merge_params", fa4rt._MergeParams))
    for c_name, py_struct in structs:
        fields = [name for name, _ in py_struct._fields_]
        size, offsets = c_layout(c_name, fields, compiler)
        py = (ctypes.sizeof(py_struct), [getattr(py_struct, f).offset for f in fields])
        if (size, offsets) != py:
            ok = False
            print("FAIL %s: C size %d offsets %s, ctypes size %d offsets %s" % (c_name, size, offsets, py[0], py[1]))
        else:
            print("ok   %s: %d bytes, %d fields match" % (c_name, size, len(fields)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
