#!/usr/bin/env python3
"""Finds registers that an sm_90a kernel touches while a wgmma that uses them may still run, from its SASS.

A wgmma (`HGMMA`) reads its A fragment (the RS form: P in registers) and reads and writes its accumulators
asynchronously, until a `WARPGROUP.DEPBAR.LE gsb0, N` retires its group. An instruction that writes those
registers before then, or reads the accumulators, races with the tensor core; ptxas reports only the
accumulator case it cannot order (C7515, by serializing), and a race on the A fragment gives wrong results only
under load (the sm90 kernel once packed P_t before the wait for the PV reading P_(t-1): every GPU test passed,
the benchmark's long rows came out wrong).

The check walks the code in layout order as one path (conditional branches fall through, so a wait on any
branch counts), and the sm90 consumer's K/V loop (the smallest loop around the turn barrier `BAR.SYNC R`)
twice, so that groups left in flight at its back edge meet the next trip's code. Groups: an `HGMMA` adds its
registers to the open group, one marked `gsb0` closes it; `DEPBAR.LE gsb0, N` keeps the N newest.

    tools/wgmma_hazards.py KERNEL.cubin [...]              exit 1 when any hazard is found
    tools/wgmma_hazards.py --config "--d 128 --causal"     compile one sm90 configuration (fa4rt dump) first

Needs nvdisasm (see tools/sass_report.py). Development tool: the CPU test Sm90Sass runs it where nvdisasm exists."""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_report  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REG = re.compile(r"(?<![A-Z_])R(\d+)(?![0-9])")
NO_DEST = ("ST", "STS", "STG", "STL", "RED", "BAR", "SYNCS", "BRA", "WARPSYNC", "WARPGROUP", "NOP", "EXIT", "RET",
           "CALL", "MEMBAR", "FENCE", "CCTL", "UTMALDG", "UTMASTG", "UTMACCTL", "UTMACMDFLUSH", "UBLKCP", "BSSY",
           "BSYNC", "YIELD", "NANOSLEEP", "ELECT", "ENDCOLLECTIVE", "DEPBAR", "ERRBAR", "BPT")


def regs(text):
    return [int(r) for r in REG.findall(text)]


def dest_and_sources(ins):
    """Registers the instruction writes and reads (first operand as destination, widened by .64/.128/.WIDE)."""
    ops = [o.strip() for o in ins.args.split(",")] if ins.args else []
    if not ops or ins.base in NO_DEST:
        return set(), set(regs(ins.args))
    first = 1 if ins.base == "SHFL" else 0  # SHFL's first operand is its predicate
    m = re.fullmatch(r"R(\d+)", ops[first].split(".")[0]) if len(ops) > first else None
    if not m:
        return set(), set(regs(ins.args))
    width = 4 if ".128" in ins.op else 2 if (".64" in ins.op or ".WIDE" in ins.op or ins.base == "CS2R") else 1
    d = int(m.group(1))
    return set(range(d, d + width)), set(regs(",".join(ops[:first] + ops[first + 1:])))


def hgmma_registers(ins):
    """(accumulators, A fragment) of an HGMMA: m64nNk16 with fp32 accumulators holds N / 2 registers."""
    n = int(re.search(r"\.64x(\d+)x", ins.op).group(1))
    ops = [o.strip() for o in ins.args.split(",")]
    acc0 = int(re.fullmatch(r"R(\d+)", ops[0]).group(1))
    a = re.fullmatch(r"R(\d+)", ops[1])
    return set(range(acc0, acc0 + n // 2)), set(range(int(a.group(1)), int(a.group(1)) + 4)) if a else set()


class Walk:
    def __init__(self):
        self.open = [set(), set()]  # accumulators, A fragments of the group being issued
        self.pending = []           # committed groups, newest first
        self.hazards = []

    def inflight(self):
        acc, a = set(self.open[0]), set(self.open[1])
        for g_acc, g_a in self.pending:
            acc |= g_acc
            a |= g_a
        return acc, a

    def step(self, ins):
        if ins.base == "HGMMA":
            acc, a = hgmma_registers(ins)
            self.open[0] |= acc
            self.open[1] |= a
            if "gsb0" in ins.args:
                self.pending.insert(0, tuple(self.open))
                self.open = [set(), set()]
            return
        if ins.op.startswith("WARPGROUP.DEPBAR"):
            self.pending = self.pending[:int(ins.args.split(",")[-1].strip(), 0)]
            return
        dest, src = dest_and_sources(ins)
        acc, a = self.inflight()
        bad = (dest & (acc | a)) | (src & acc)
        if bad:
            self.hazards.append("%04x %s %s: R%s of an in-flight wgmma" % (ins.addr, ins.op, ins.args,
                                                                             ",R".join(map(str, sorted(bad)))))


def turn_loop(fn):
    """The in-line instructions (first, last) of the smallest loop around the turn barrier, or None."""
    blocks = sass_report.build_cfg(fn)
    turn = next((b.index for b in blocks for ins in b.instrs
                 if ins.op.startswith("BAR.SYNC") and re.match(r"R\d+", ins.args)), None)
    loop = next((l for l in sass_report.find_loops(blocks) if turn in l.body), None) if turn is not None else None
    if loop is None:
        return None
    hot = [ins for b in loop.hot(blocks) for ins in b.instrs]
    return fn.instrs.index(hot[0]), fn.instrs.index(hot[-1])


def check(sass):
    """The hazards of every function in the SASS text, and whether a turn loop was found."""
    hazards, found_loop = [], False
    for fn in sass_report.parse_sass(sass):
        walk, order = Walk(), list(range(len(fn.instrs)))
        loop = turn_loop(fn)
        if loop:  # the loop twice: what its back edge leaves in flight meets the next trip
            order = list(range(loop[1] + 1)) + list(range(loop[0], len(fn.instrs)))
            found_loop = True
        for i in order:
            walk.step(fn.instrs[i])
        hazards += walk.hazards
    return sorted(set(hazards)), found_loop


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cubins", nargs="*")
    ap.add_argument("--config", action="append", default=[], help="fa4rt dump flags of an sm90 configuration")
    ap.add_argument("--fa4rt", default=os.path.join(REPO, "build", "fa4rt"))
    ap.add_argument("--nvdisasm")
    args = ap.parse_args()
    nvdisasm = sass_report.find_nvdisasm(args.nvdisasm)
    if not nvdisasm:
        print(sass_report.NVDISASM_MISSING, file=sys.stderr)
        return 2
    found = 0
    with tempfile.TemporaryDirectory() as tmp:
        targets = list(args.cubins)
        for n, cfg in enumerate(args.config):
            out = os.path.join(tmp, str(n))
            subprocess.run([args.fa4rt, "dump", "--out", out, "--arch", "90", "--backend", "sm90"] + shlex.split(cfg),
                           check=True, capture_output=True)
            targets += [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".cubin")]
        for cubin in targets:
            hazards, has_loop = check(sass_report.disassemble(nvdisasm, cubin))
            print("%s: %d hazard(s)%s" % (os.path.basename(cubin), len(hazards), "" if has_loop else " (no turn loop found)"))
            for h in hazards:
                print("  " + h)
            found += len(hazards)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
