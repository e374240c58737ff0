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
INSTR = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)\s*(.*?)\s*;")
REG = re.compile(r"(?<![A-Z_])R(\d+)(?![0-9])")
NO_DEST = ("ST", "STS", "STG", "STL", "RED", "BAR", "SYNCS", "BRA", "WARPSYNC", "WARPGROUP", "NOP", "EXIT", "RET",
           "CALL", "MEMBAR", "FENCE", "CCTL", "UTMALDG", "UTMASTG", "UTMACCTL", "UTMACMDFLUSH", "UBLKCP", "BSSY",
           "BSYNC", "YIELD", "NANOSLEEP", "ELECT", "ENDCOLLECTIVE", "DEPBAR", "ERRBAR", "BPT")


def parse(sass):
    """[(offset, opcode, operands)] in layout order."""
    out = []
    for line in sass.split("\n"):
        m = INSTR.match(line)
        if m:
            out.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return out


def regs(text):
    return [int(r) for r in REG.findall(text)]


def dest_and_sources(opcode, operands):
    """Registers the instruction writes and reads (first operand as destination, widened by .64/.128/.WIDE)."""
    ops = [o.strip() for o in operands.split(",")] if operands else []
    base = opcode.split(".")[0]
    if not ops or base in NO_DEST:
        return set(), set(regs(operands))
    first = 1 if base == "SHFL" else 0  # SHFL's first operand is its predicate
    m = re.fullmatch(r"R(\d+)", ops[first].split(".")[0]) if len(ops) > first else None
    if not m:
        return set(), set(regs(operands))
    width = 4 if ".128" in opcode else 2 if (".64" in opcode or ".WIDE" in opcode or base == "CS2R") else 1
    d = int(m.group(1))
    return set(range(d, d + width)), set(regs(",".join(ops[:first] + ops[first + 1:])))


def hgmma_registers(opcode, operands):
    """(accumulators, A fragment) of an HGMMA: m64nNk16 with fp32 accumulators holds N / 2 registers."""
    n = int(re.search(r"\.64x(\d+)x", opcode).group(1))
    ops = [o.strip() for o in operands.split(",")]
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

    def step(self, offset, opcode, operands):
        base = opcode.split(".")[0]
        if base == "HGMMA":
            acc, a = hgmma_registers(opcode, operands)
            self.open[0] |= acc
            self.open[1] |= a
            if "gsb0" in operands:
                self.pending.insert(0, tuple(self.open))
                self.open = [set(), set()]
            return
        if opcode.startswith("WARPGROUP.DEPBAR"):
            self.pending = self.pending[:int(operands.split(",")[-1].strip(), 0)]
            return
        dest, src = dest_and_sources(opcode, operands)
        acc, a = self.inflight()
        bad = (dest & (acc | a)) | (src & acc)
        if bad:
            self.hazards.append("%04x %s %s: R%s of an in-flight wgmma" % (offset, opcode, operands,
                                                                             ",R".join(map(str, sorted(bad)))))


def consumer_loop(instrs, sass):
    """(first, last) indices of the smallest loop around the turn barrier, or None."""
    labels, k = {}, 0  # label -> index of the instruction it precedes
    for ln in sass.split("\n"):
        if INSTR.match(ln):
            k += 1
        elif re.match(r"\.L_x_\d+:", ln):
            labels[ln.strip().rstrip(":")] = k
    bar = next((i for i, (_, op, ops) in enumerate(instrs) if op.startswith("BAR.SYNC") and re.match(r"R\d+", ops)), None)
    if bar is None:
        return None
    best = None
    for i, (_, op, ops) in enumerate(instrs):
        m = re.search(r"`\((\.L_x_\d+)\)", ops) if op.startswith("BRA") else None
        if m and m.group(1) in labels and labels[m.group(1)] <= bar <= i:
            span = (labels[m.group(1)], i)
            if best is None or span[1] - span[0] < best[1] - best[0]:
                best = span
    return best


def check(sass):
    instrs = parse(sass)
    walk = Walk()
    loop = consumer_loop(instrs, sass)
    order = list(range(len(instrs)))
    if loop:  # the loop twice: what its back edge leaves in flight meets the next trip
        order = list(range(loop[1] + 1)) + list(range(loop[0], len(instrs)))
    for i in order:
        walk.step(*instrs[i])
    return sorted(set(walk.hazards)), loop is not None


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
            sass = subprocess.run([nvdisasm, "-c", cubin], check=True, capture_output=True, text=True).stdout
            hazards, has_loop = check(sass)
            print("%s: %d hazard(s)%s" % (os.path.basename(cubin), len(hazards), "" if has_loop else " (no turn loop found)"))
            for h in hazards:
                print("  " + h)
            found += len(hazards)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
