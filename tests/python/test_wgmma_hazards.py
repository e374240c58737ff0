#!/usr/bin/env python3
"""tools/wgmma_hazards.py: finds a register written (or an accumulator read) while a wgmma that uses it may
still run. On hand-written SASS: P rewritten before the wait that retires its PV (the race the sm90 kernel once
had, across the loop's back edge too), the same after the wait, an accumulator read early and late. Then, with
`--configs FA4RT` where nvdisasm exists, every sm90 head dim's kernel, causal or not, compiled and checked
clean (exit 77 when nvdisasm is missing: that part skipped)."""
import os
import subprocess
import sys

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
import sass_report  # noqa: E402
import wgmma_hazards  # noqa: E402


def sass(lines, loop=False):
    """nvdisasm-like text of one function; with loop, the body is a loop around a turn barrier."""
    out, addr = ['\t.section\t.text.kernel,"ax",@progbits'], 0
    if loop:
        out.append(".L_x_1:")
        lines = ["BAR.SYNC.DEFER_BLOCKING R6, 0x100"] + lines + ["@!P0 BRA `(.L_x_1)"]
    for ln in lines:
        out.append("        /*%04x*/                   %s ;" % (addr, ln))
        addr += 16
    return "\n".join(out)


PV = ["WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R24, R152, gdesc[UR16].tnspB, R24",
      "HGMMA.64x128x16.F32.BF16 R24, R156, gdesc[UR20].tnspB, R24, gsb0"]
PACK = "F2FP.BF16.F32.PACK_AB R153, R89, R88"
WAIT0 = "WARPGROUP.DEPBAR.LE gsb0, 0x0"


def hazards(text):
    return wgmma_hazards.check(text)[0]


def main():
    early = hazards(sass(PV + [PACK, WAIT0]))
    assert len(early) == 1 and "R153" in early[0], early
    assert hazards(sass(PV + [WAIT0, PACK])) == []
    # In flight at the back edge, rewritten at the next trip's top before its wait.
    wrapped = hazards(sass(["FMUL R8, R8, R9", PACK, WAIT0, "FADD R2, R2, R3"] + PV, loop=True))
    assert len(wrapped) == 1 and "R153" in wrapped[0], wrapped
    assert hazards(sass([WAIT0, PACK] + PV, loop=True)) == []
    # An accumulator read before its wait (a softmax on S too early), and after.
    qk = ["WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R88, gdesc[UR16], RZ, !UPT, gsb0"]
    assert len(hazards(sass(qk + ["FMNMX R2, R88, R89, !PT", WAIT0]))) == 1
    assert hazards(sass(qk + [WAIT0, "FMNMX R2, R88, R89, !PT"])) == []
    # One group retired, the newer one still in flight (wait<1>).
    two = qk + PV + ["WARPGROUP.DEPBAR.LE gsb0, 0x1"]
    assert hazards(sass(two + ["FMNMX R2, R88, R89, !PT"])) == []
    assert len(hazards(sass(two + [PACK]))) == 1
    print("checker: 8 hand-written cases as expected")

    if len(sys.argv) > 2 and sys.argv[1] == "--configs":
        nvdisasm = sass_report.find_nvdisasm()
        if not nvdisasm:
            print("SKIPPED: no nvdisasm (the PyPI wheel nvidia-cuda-nvdisasm, or a CUDA toolkit's): the sm90 kernels "
                  "were not checked")
            return 77
        configs = ["--d %d%s" % (d, c) for d in (64, 96, 128, 256) for c in ("", " --causal")]
        configs += ["--d 192 --dv 128", "--d 192 --dv 128 --causal", "--d 128 --varlen --paged --lse",
                    "--d 128 --causal --window --softcap --sinks --qh-per-kv 8"]
        cmd = [sys.executable, os.path.join(TOOLS, "wgmma_hazards.py"), "--fa4rt", sys.argv[2], "--nvdisasm", nvdisasm]
        for c in configs:
            cmd += ["--config", c]
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(r.stdout + r.stderr)
        assert r.returncode == 0 and r.stdout.count(": 0 hazard(s)") == len(configs), "sm90 kernels with hazards"
        print("sm90: %d configurations, no register of an in-flight wgmma touched" % len(configs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
