#!/usr/bin/env python3
"""The fa4rt Python package without a GPU and without PyTorch: its version is the library's, it finds
libfa4rt where its docstring says (FA4_LIB, FA4RT_LIB, beside the package, the system loader), and tensor
calls without torch raise an ImportError that says torch is needed. CPU only.

Usage: test_package.py PROJECT_VERSION   (FA4RT_LIB: the built libfa4rt.so)
Exit status: 0 pass, 1 fail, 77 skipped."""

import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(REPO, "python", "fa4rt")

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run_python(code, package_parent, env_updates):
    """Runs `code` in a fresh interpreter that imports fa4rt from package_parent, torch made unimportable."""
    env = {k: v for k, v in os.environ.items() if k not in ("FA4_LIB", "FA4RT_LIB")}
    env.update(env_updates)
    prelude = "import sys; sys.modules['torch'] = None; sys.path.insert(0, %r); import fa4rt\n" % package_parent
    result = subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True, text=True)
    return result.returncode, (result.stdout + result.stderr).strip()


def main():
    if len(sys.argv) != 2:
        print("usage: test_package.py PROJECT_VERSION")
        return 1
    library = os.environ.get("FA4RT_LIB", "")
    if not os.path.exists(library):
        print("SKIPPED: FA4RT_LIB does not name a built libfa4rt.so (%r)" % library)
        return 77
    python_dir = os.path.dirname(PACKAGE)

    rc, out = run_python("print(fa4rt.__version__, fa4rt.version())", python_dir, {"FA4_LIB": library})
    check(rc == 0 and out.split() == [sys.argv[1]] * 2,
          "__version__ and the library's version are the project's %s (got %r)" % (sys.argv[1], out))

    rc, out = run_python("print(fa4rt.library_path())", python_dir, {"FA4_LIB": "/a", "FA4RT_LIB": "/b"})
    check(out == "/a", "FA4_LIB wins over FA4RT_LIB (got %r)" % out)
    rc, out = run_python("print(fa4rt.library_path())", python_dir, {"FA4RT_LIB": "/b"})
    check(out == "/b", "FA4RT_LIB is still honoured (got %r)" % out)

    # Torch missing: the non-tensor API works, run() says what it needs.
    rc, out = run_python("a = fa4rt.Attention()\n"
                         "a.prewarm([])\n"
                         "try:\n"
                         "    a.run(None, None, None)\n"
                         "except ImportError as e:\n"
                         "    print('ImportError:', e)\n", python_dir, {"FA4_LIB": library, "FA4_DISK_CACHE": "0"})
    check(rc == 0 and "ImportError:" in out and "needs PyTorch" in out,
          "without torch, Attention() works and run() raises an ImportError naming PyTorch (got %r)" % out)

    with tempfile.TemporaryDirectory() as top:
        tmp = os.path.join(top, "site")  # its parent, `top`, has no build/ directory
        # An installed package with the library copied beside it, no environment variables.
        shutil.copytree(PACKAGE, os.path.join(tmp, "fa4rt"), ignore=shutil.ignore_patterns("libfa4rt.so*", "__pycache__"))
        shutil.copy(library, os.path.join(tmp, "fa4rt", "libfa4rt.so"))
        rc, out = run_python("print(fa4rt.library_path()); print(fa4rt.version())", tmp, {})
        check(rc == 0 and out.splitlines() == [os.path.join(tmp, "fa4rt", "libfa4rt.so"), sys.argv[1]],
              "a libfa4rt.so beside the package is found and loads (got %r)" % out)

        # Nothing beside it and no build/ next to it: the system loader's SONAME, and a clear error.
        os.remove(os.path.join(tmp, "fa4rt", "libfa4rt.so"))
        rc, out = run_python("print(fa4rt.library_path())\n"
                             "try:\n"
                             "    fa4rt.load_library(); print('loaded')\n"
                             "except OSError as e:\n"
                             "    print('OSError:', e)\n", tmp, {"LD_LIBRARY_PATH": ""})
        lines = out.splitlines()
        check(lines[:1] == ["libfa4rt.so.0"], "otherwise the system loader is asked for libfa4rt.so.0 (got %r)" % out)
        check(len(lines) == 2 and (lines[1] == "loaded" or ("FA4_LIB" in lines[1] and lines[1].startswith("OSError"))),
              "a library found nowhere is an OSError naming FA4_LIB (got %r)" % out)

    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
