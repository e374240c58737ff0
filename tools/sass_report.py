#!/usr/bin/env python3
"""Counts what an sm_100 attention kernel asks of the machine, per warp role, from its SASS.

Two ways in:
  * our kernel, by configuration: the tool runs `fa4rt dump --lineinfo --verbose` and reads the cubin, the
    NVRTC log (ptxas report) and the Plan (`fa4rt plan`);
  * any cubin by path (`--cubin`), e.g. FA4's, cross-compiled elsewhere: the same counts, with roles from
    line info where the cubin has it and the sources are given, else from each loop's instruction signature.

For each role it finds the steady-state loop (one trip = one K/V block) in the SASS control-flow graph and
counts the instructions the warp issues on one trip, by pipe. docs/speed-model.md describes the counts and
the cycle model that `fa4rt plan` computes from them; bench/README.md how to run this. Standard library only;
needs nvdisasm (the PyPI wheel nvidia-cuda-nvdisasm, or a CUDA toolkit's).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------------------------------------
# nvdisasm


def find_nvdisasm(explicit=None):
    """nvdisasm that knows sm_100: --nvdisasm, $NVDISASM, PATH, CUDA toolkits, the PyPI wheel."""
    candidates = [explicit, os.environ.get("NVDISASM"), shutil.which("nvdisasm")]
    candidates += sorted(glob.glob("/usr/local/cuda*/bin/nvdisasm"), reverse=True)
    for pattern in ("/root/.pyenv/versions/*/lib/python3*/site-packages/nvidia/cu*/bin/nvdisasm",
                    os.path.expanduser("~/.local/lib/python3*/site-packages/nvidia/cu*/bin/nvdisasm"),
                    "/usr/local/lib/python3*/dist-packages/nvidia/cu*/bin/nvdisasm",
                    os.path.join(sys.prefix, "lib/python3*/site-packages/nvidia/cu*/bin/nvdisasm")):
        candidates += sorted(glob.glob(pattern), reverse=True)
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK) and knows_sm100(c):
            return c
    return None


def knows_sm100(nvdisasm):
    try:
        out = subprocess.run([nvdisasm, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "SM100" in out


NVDISASM_MISSING = """sass_report: no nvdisasm that knows sm_100 was found.
Install the PyPI wheel (CUDA 12.8 or later), e.g.
    python3 -m pip install --user nvidia-cuda-nvdisasm
(the binary lands in site-packages/nvidia/cu13/bin/nvdisasm), or pass --nvdisasm PATH / set NVDISASM."""


def disassemble(nvdisasm, cubin):
    """SASS text with line info and inlining stacks when the cubin has them (-gi), plain otherwise."""
    for flags in (["-c", "-gi"], ["-c"]):
        r = subprocess.run([nvdisasm] + flags + [cubin], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout
    raise SystemExit("sass_report: nvdisasm failed on %s:\n%s" % (cubin, r.stderr))


# ---------------------------------------------------------------------------------------------------------
# SASS parsing

INSTR_RE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*(?:/\*.*\*/)?\s*$")
LABEL_RE = re.compile(r"^(\.L_x_\d+|\w[\w$.]*):\s*$")
LINE_RE = re.compile(r'^\s*//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
FUNC_RE = re.compile(r"^\s*\.section\s+\.text\.(\S+?),")
TARGET_RE = re.compile(r"`\(([^)]+)\)")
PRED_RE = re.compile(r"^(@!?U?P[T0-9])\s+(.*)$")


class Instr:
    __slots__ = ("addr", "pred", "op", "args", "frames", "role", "text")

    def __init__(self, addr, pred, op, args, frames, text):
        self.addr, self.pred, self.op, self.args, self.frames, self.text = addr, pred, op, args, frames, text
        self.role = None

    @property
    def base(self):
        return self.op.split(".")[0]

    def targets(self):
        if self.base == "BRX":
            m = re.search(r'BRANCH_TARGETS ([^"*]+)', self.text)
            return [t.strip() for t in m.group(1).split(",")] if m else []
        return TARGET_RE.findall(self.args)


class Function:
    def __init__(self, name):
        self.name = name
        self.instrs = []
        self.labels = {}  # label -> address


def parse_sass(text):
    functions, current = [], None
    frames, pending_frames, pending_labels = (), [], []
    for line in text.splitlines():
        m = FUNC_RE.match(line)
        if m:
            current = Function(m.group(1))
            functions.append(current)
            frames, pending_frames, pending_labels = (), [], []
            continue
        if current is None:
            continue
        m = LINE_RE.match(line)
        if m:
            pending_frames.append((m.group(1), int(m.group(2))))
            if m.group(3):
                pending_frames.append((m.group(3), int(m.group(4))))
            continue
        m = LABEL_RE.match(line.strip()) if not line.startswith("\t.") else None
        if m and not line.strip().startswith("/*"):
            pending_labels.append(m.group(1))
            continue
        m = INSTR_RE.match(line)
        if not m:
            continue
        addr, body = int(m.group(1), 16), m.group(2).strip()
        if pending_frames:
            frames = tuple(dict.fromkeys(pending_frames))  # innermost first, duplicates dropped
            pending_frames = []
        pred = None
        pm = PRED_RE.match(body)
        if pm:
            pred, body = pm.group(1)[1:], pm.group(2)
        parts = body.split(None, 1)
        ins = Instr(addr, pred, parts[0], parts[1] if len(parts) > 1 else "", frames, line.strip())
        for label in pending_labels:
            current.labels[label] = addr
        pending_labels = []
        current.instrs.append(ins)
    return [f for f in functions if f.instrs]


# ---------------------------------------------------------------------------------------------------------
# Instruction classes and pipes

PACKED_FP32 = {"FFMA2", "FADD2", "FMUL2", "FMNMX2"}
SCALAR_FMA = {"FFMA", "FADD", "FMUL", "FFMA32I", "FADD32I", "FMUL32I"}
FP_ALU = {"FMNMX", "FMNMX3", "FSEL", "FSETP", "FSET", "FCHK", "FSWZADD"}
INT_ALU = {"IADD3", "IADD", "LOP3", "LOP", "ISETP", "SHF", "SHL", "SHR", "SEL", "IABS", "IMNMX", "VIMNMX",
           "VIADD", "VIADDMNMX", "LEA", "PLOP3", "P2R", "R2P", "FLO", "POPC", "BREV", "PRMT", "BMSK", "SGXT",
           "IMNMX3", "VIMNMX3", "LOP3.LUT"}
IMAD_OPS = {"IMAD", "IMUL", "IMAD32I", "IDP", "IDP4A"}
CONVERT = {"F2F", "F2FP", "F2I", "I2F", "I2FP", "F2IP", "FRND", "I2I"}
MOVES = {"MOV", "MOV32I", "CS2R", "S2R", "SHFL", "NOP", "LDC", "R2B", "B2R", "LEPC"}
TENSOR = {"UTCHMMA", "UTCQMMA", "UTCOMMA", "UTCIMMA", "UTCMMA", "HMMA", "HGMMA", "UTCBMMA"}
TMEM_OPS = {"LDTM", "STTM", "UTCCP", "UTCSHIFT"}
TMA_OPS = {"UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "UTMACMDFLUSH", "UBLKCP", "UBLKRED", "UBLKPF", "UTMAREDG"}
SMEM_OPS = {"LDS", "STS", "LDSM", "STSM", "ATOMS", "LDSH"}
GMEM_OPS = {"LDG", "STG", "LD", "ST", "ATOM", "ATOMG", "RED", "REDG", "LDGSTS", "CCTL"}
SYNC_OPS = {"SYNCS", "BAR", "MEMBAR", "FENCE", "DEPBAR", "ERRBAR", "ELECT", "VOTE", "VOTEU", "WARPSYNC",
            "BSSY", "BSYNC", "NANOSLEEP", "YIELD", "ENDCOLLECTIVE", "UTCBAR", "ACQBULK", "ARRIVES", "WARPGROUP",
            "UTCATOMSWS", "USETMAXREG"}
CONTROL = {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BPT", "KILL", "BREAK", "CONT", "RTT"}


def pipe_of(ins):
    """The execution pipe (or class) an instruction occupies; the names are the report's columns."""
    op, base = ins.op, ins.base
    if base == "MUFU":
        return "mufu"
    if base in PACKED_FP32:
        return "fp32x2"
    if base in SCALAR_FMA:
        return "fp32"
    if base in FP_ALU:
        return "fp_alu"
    if base in IMAD_OPS:
        return "imad"
    if base in CONVERT:
        return "convert"
    if base in TENSOR:
        return "tensor"
    if base in TMEM_OPS:
        return "tmem"
    if base in TMA_OPS:
        return "tma"
    if base in SMEM_OPS:
        return "smem"
    if base in GMEM_OPS:
        return "gmem"
    if base in SYNC_OPS:
        return "sync"
    if base in CONTROL:
        return "control"
    if base in INT_ALU or op in INT_ALU:
        return "int_alu"
    if base.startswith("U") or base in ("R2UR", "S2UR", "REDUX", "LDCU"):
        return "uniform"
    if base in MOVES:
        return "move"
    return "other"


PIPES = ["tensor", "mufu", "fp32", "fp32x2", "fp_alu", "imad", "int_alu", "convert", "tmem", "tma", "smem",
         "gmem", "sync", "uniform", "move", "control", "other"]


def is_wait(ins):
    return ins.base == "SYNCS" and "TRYWAIT" in ins.op or ins.base == "SYNCS" and "PHASECHK" in ins.op


def flags_of(ins):
    """Markers the report counts separately (divergence, waits, suspends)."""
    out = []
    if ins.op.startswith("BRA.DIV"):
        out.append("BRA.DIV")
    if ins.base == "WARPSYNC":
        out.append(ins.op)
    if is_wait(ins):
        out.append("wait")
        if len([a for a in ins.args.split(",") if a.strip()]) > 3:
            out.append("wait_with_hint")  # a fourth operand: a suspend-time hint
    if ins.op.startswith("NANOSLEEP.SYNCS"):
        out.append("wait_with_hint")  # ptxas's lowering of a try-wait's suspend-time hint on sm_100
    if ins.base in ("NANOSLEEP", "YIELD", "ELECT", "VOTE", "VOTEU", "BSSY", "BSYNC"):
        out.append(ins.base)
    if ins.base == "SYNCS" and "ARRIVE" in ins.op:
        out.append("arrive")
    if ins.base == "UTCBAR":
        out.append("mma_commit")
    return out


# ---------------------------------------------------------------------------------------------------------
# Control flow: basic blocks, loops, the steady-state path of one trip


class Block:
    __slots__ = ("index", "start", "instrs", "succ", "pred", "fallthrough")

    def __init__(self, index, instrs):
        self.index, self.instrs = index, instrs
        self.start = instrs[0].addr
        self.succ, self.pred, self.fallthrough = [], [], None

    @property
    def last(self):
        return self.instrs[-1]


def is_terminator(ins):
    return ins.base in ("BRA", "BRX", "JMP", "JMX", "RET", "EXIT", "BPT", "KILL", "CALL") and ins.op != "CALL.REL.NOINC" \
        or ins.base in ("BRA", "BRX", "EXIT", "RET", "BPT")


def unconditional(ins):
    if ins.pred and ins.pred not in ("PT",):
        return False
    if ins.base in ("EXIT", "RET", "BRX", "JMX"):
        return True
    if ins.base == "BPT":
        return "TRAP" in ins.op
    if ins.base == "BRA":
        return ins.args.startswith("`") and not ins.op.startswith("BRA.DIV")
    return False


def build_cfg(fn):
    starts = {fn.instrs[0].addr} | set(fn.labels.values())
    for i, ins in enumerate(fn.instrs[:-1]):
        if ins.base in ("BRA", "BRX", "JMP", "JMX", "RET", "EXIT", "BPT"):
            starts.add(fn.instrs[i + 1].addr)
    blocks, cur = [], []
    for ins in fn.instrs:
        if ins.addr in starts and cur:
            blocks.append(Block(len(blocks), cur))
            cur = []
        cur.append(ins)
    if cur:
        blocks.append(Block(len(blocks), cur))
    by_addr = {b.start: b for b in blocks}
    for i, b in enumerate(blocks):
        last = b.last
        targets = [by_addr[fn.labels[t]] for t in last.targets() if t in fn.labels and fn.labels[t] in by_addr]
        if last.base in ("BRA", "BRX", "JMP", "JMX"):
            b.succ.extend(targets)
        if not unconditional(last) and i + 1 < len(blocks):
            b.fallthrough = blocks[i + 1]
            if blocks[i + 1] not in b.succ:
                b.succ.append(blocks[i + 1])
        for s in b.succ:
            s.pred.append(b)
    return blocks


class Loop:
    def __init__(self, head, latches, body):
        self.head, self.latches, self.body = head, latches, body  # body: set of block indices
        self.parent, self.children = None, []

    @property
    def end(self):
        return max(l.last.addr for l in self.latches)

    def hot(self, blocks):
        """Body blocks laid out between the head and the last latch: the in-line part of the loop (ptxas puts
        slow paths, such as the retry loops of barrier waits and divergent fallbacks, out of line)."""
        return [blocks[i] for i in sorted(self.body) if self.head.start <= blocks[i].start <= self.end]


def dominators(blocks):
    """Immediate dominators (Cooper, Harvey and Kennedy), over the blocks reachable from the entry."""
    order, seen, stack = [], set(), [(blocks[0], iter(blocks[0].succ))]
    seen.add(0)
    while stack:  # iterative DFS post-order
        b, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            order.append(b.index)
            stack.pop()
        elif nxt.index not in seen:
            seen.add(nxt.index)
            stack.append((nxt, iter(nxt.succ)))
    rpo = list(reversed(order))
    pos = {b: i for i, b in enumerate(rpo)}
    idom = {0: 0}

    def intersect(a, b):
        while a != b:
            while pos[a] > pos[b]:
                a = idom[a]
            while pos[b] > pos[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            preds = [p.index for p in blocks[b].pred if p.index in idom]
            if not preds:
                continue
            new = preds[0]
            for p in preds[1:]:
                new = intersect(p, new)
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    return idom


def dominates(idom, a, b):
    while True:
        if a == b:
            return True
        if b not in idom or idom[b] == b:
            return False
        b = idom[b]


def find_loops(blocks):
    """Natural loops: one per header, over the back edges whose target dominates their source."""
    idom = dominators(blocks)
    back = defaultdict(list)
    for b in blocks:
        if b.index not in idom:
            continue
        for s in b.succ:
            if dominates(idom, s.index, b.index):
                back[s.index].append(b)
    loops = []
    for h, latches in back.items():
        body, stack = {h}, [l.index for l in latches]
        while stack:
            n = stack.pop()
            if n in body:
                continue
            body.add(n)
            stack.extend(p.index for p in blocks[n].pred)
        loops.append(Loop(blocks[h], latches, body))
    loops.sort(key=lambda l: len(l.body))
    for i, l in enumerate(loops):
        for bigger in loops[i + 1:]:
            if l.body <= bigger.body:
                l.parent = bigger
                bigger.children.append(l)
                break
    return loops


def defining_instr(fn_instrs, index, pred, window=400):
    """The instruction that last set predicate `pred` before fn_instrs[index], scanning back in address order."""
    reg = pred.lstrip("!")
    for ins in reversed(fn_instrs[max(0, index - window):index]):
        ops = [a.strip() for a in ins.args.split(",")]
        if ops and (ops[0] == reg or (len(ops) > 1 and ops[1] == reg and ins.base in ("ISETP", "FSETP", "PLOP3", "LOP3"))):
            return ins
    return None


def branch_condition(block, fn_instrs, position):
    """('taken'|'fall', None) for branches the steady state settles by rule, (None, (key, negated)) for a
    data-dependent branch (key: its condition, shared by every branch that tests the same thing), or
    (None, None) when unknown. Rules: a barrier try-wait succeeds at once; BRA.DIV (warp not converged) is not
    taken; an elect.sync branch follows the elected lane (the warp issues that side)."""
    last = block.last
    if last.op.startswith("BRA.DIV"):
        return "fall", None
    cond = last.pred
    if cond is None and last.op.startswith("BRA.U"):
        cond = last.args.split(",")[0].strip()
    if not cond:
        return None, None
    d = defining_instr(fn_instrs, position[last.addr], cond)
    negated = cond.startswith("!")
    if d is None:
        return None, (("?", cond.lstrip("!"), last.addr), negated)
    if is_wait(d) or d.base == "ELECT":  # predicate = phase complete / this lane elected
        return ("fall" if negated else "taken"), None
    ops = [a.strip() for a in d.args.split(",")]
    srcs = tuple(o for o in ops if not re.match(r"^!?U?P[T0-6]$", o))
    return None, ((d.op,) + srcs + (cond.lstrip("!") if d.base not in ("ISETP", "FSETP") else "",), negated)


def work(instrs):
    """Instructions that hand the machine its real work: MMAs, TMA copies, exponentials."""
    return sum(1 for i in instrs if pipe_of(i) in ("tensor", "tma") or i.base == "MUFU")


def trip_paths(loop, blocks, fn_instrs):
    """Instructions the warp issues on one trip of `loop` (head to a back edge), inner loops and out-of-line
    blocks left out. Two paths: 'steady', a trip in the middle of a long loop: every MMA, TMA copy and
    exponential of the trip issued (the loop's last trip may skip some), and otherwise the fewest instructions
    (no mask, no rescale, no divergence fallback, every barrier wait succeeding at once); 'full', the longest
    (e.g. a masked block with a rescale). Branches that test the same condition go the same way.
    Returns {'steady': [instrs], 'full': [instrs]}."""
    hot = loop.hot(blocks)
    hot_set = {b.index for b in hot}
    latch_set = {l.index for l in loop.latches}
    position = {ins.addr: i for i, ins in enumerate(fn_instrs)}
    conds = {}
    for b in hot:
        if len([s for s in b.succ if s.index in hot_set and s.start > b.start]) > 1:
            conds[b.index] = branch_condition(b, fn_instrs, position)
    data_keys = sorted({c[1][0] for c in conds.values() if c[0] is None and c[1]}, key=str)
    if len(data_keys) > 12:
        data_keys = []  # too many to enumerate: explore every direction freely
    keys = {"steady": lambda w, n: (-w, n), "full": lambda w, n: (-n, 0)}  # smaller is better
    results = {kind: None for kind in keys}
    for assignment in range(1 << len(data_keys)):
        value = {k: bool(assignment >> i & 1) for i, k in enumerate(data_keys)}
        best = {kind: {loop.head.index: (work(loop.head.instrs), len(loop.head.instrs), [loop.head.index])} for kind in keys}
        for b in hot:  # address order is a topological order once edges to lower addresses are dropped
            rule, data = conds.get(b.index, (None, None))
            if rule is None and data and data[0] in value:
                rule = "taken" if value[data[0]] != data[1] else "fall"
            for kind, table in best.items():
                if b.index not in table:
                    continue
                w, n, path = table[b.index]
                key = keys[kind]
                if b.index in latch_set and loop.head in b.succ:
                    if results[kind] is None or key(w, n) < key(*results[kind][:2]):
                        results[kind] = (w, n, path)
                for s in b.succ:
                    if s.index not in hot_set or s.start <= b.start:
                        continue
                    is_fall = s is b.fallthrough
                    if (rule == "taken" and is_fall) or (rule == "fall" and not is_fall):
                        continue
                    cand = (w + work(s.instrs), n + len(s.instrs), path + [s.index])
                    old = table.get(s.index)
                    if old is None or key(*cand[:2]) < key(*old[:2]):
                        table[s.index] = cand
    return {kind: [ins for i in r[2] for ins in blocks[i].instrs] if r else [] for kind, r in results.items()}


# ---------------------------------------------------------------------------------------------------------
# Roles from line info: which function of the kernel source each instruction belongs to


def strip_comments(text):
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(c if c == "\n" else " " for c in text[i:j]))
            i = j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i] + " " * (j - i - 1) + (q if j < n else ""))
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


FUNC_DEF_RE = re.compile(r"(__global__|__device__)[^;{}()]*?\b(\w+)\s*\(")


def source_functions(path):
    """[(name, first_line, last_line, is_kernel)] of the __device__/__global__ function definitions in a file."""
    text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
    funcs = []
    for m in FUNC_DEF_RE.finditer(text):
        depth, i = 0, m.end() - 1
        while i < len(text):  # the parameter list
            depth += text[i] == "("
            depth -= text[i] == ")"
            i += 1
            if depth == 0:
                break
        j = i
        while j < len(text) and text[j] not in "{;":
            j += 1
        if j >= len(text) or text[j] == ";":
            continue  # a declaration
        depth, k = 0, j
        while k < len(text):
            depth += text[k] == "{"
            depth -= text[k] == "}"
            if depth == 0:
                break
            k += 1
        funcs.append((m.group(2), text.count("\n", 0, m.start()) + 1, text.count("\n", 0, k) + 1,
                      m.group(1) == "__global__"))
    return funcs


def statement_end(text, i):
    """Index just past the statement starting at text[i] (a braced block, a for/while/if statement, or up to ';')."""
    n = len(text)
    while i < n and text[i].isspace():
        i += 1
    if i < n and text[i] == "{":
        depth = 0
        while i < n:
            depth += text[i] == "{"
            depth -= text[i] == "}"
            i += 1
            if depth == 0:
                return i
        return n
    m = re.match(r"(for|while|if)\s*\(", text[i:])
    if m:
        j, depth = i + m.end() - 1, 0
        while j < n:
            depth += text[j] == "("
            depth -= text[j] == ")"
            j += 1
            if depth == 0:
                break
        return statement_end(text, j)
    j = text.find(";", i)
    return n if j < 0 else j + 1


def source_for_loops(path, regex):
    """[(first_line, last_line, header)] of the for statements whose header matches regex."""
    text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
    out = []
    for m in re.finditer(r"\bfor\s*\(", text):
        j, depth = m.end() - 1, 0
        while j < len(text):
            depth += text[j] == "("
            depth -= text[j] == ")"
            j += 1
            if depth == 0:
                break
        header = text[m.start():j]
        if re.search(regex, header):
            end = statement_end(text, j)
            out.append((text.count("\n", 0, m.start()) + 1, text.count("\n", 0, end) + 1, " ".join(header.split())))
    return out


class RoleMap:
    """Maps an instruction's inlining stack to a role: the innermost frame inside a function whose name matches
    role_regex (group 1 = the role), else 'kernel' for the entry function's own code, else 'other'."""

    def __init__(self, source_roots, role_regex):
        self.roots = source_roots
        self.role_re = re.compile(role_regex)
        self.files = {}

    def resolve(self, path):
        if os.path.isfile(path):
            return path
        parts = path.replace("\\", "/").split("/")
        for root in self.roots:
            for k in range(len(parts)):
                cand = os.path.join(root, *parts[k:])
                if os.path.isfile(cand):
                    return cand
        return None

    def functions(self, path):
        if path not in self.files:
            real = self.resolve(path)
            self.files[path] = source_functions(real) if real else None
        return self.files[path]

    def role(self, frames):
        kernel = False
        for path, line in frames:
            funcs = self.functions(path)
            if not funcs:
                continue
            inside = [f for f in funcs if f[1] <= line <= f[2]]
            for name, first, last, is_kernel in sorted(inside, key=lambda f: f[2] - f[1]):
                m = self.role_re.search(name)
                if m:
                    return role_title(m.group(1))
                kernel = kernel or is_kernel
        return "kernel" if kernel else ("other" if frames else None)

    def kv_loops(self, path, regex):
        real = self.resolve(path)
        return source_for_loops(real, regex) if real else []

    def source_line(self, path, line):
        real = self.resolve(path)
        if not real:
            return ""
        with open(real, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def role_title(name):
    return name[:1].upper() + name[1:]


def signature_role(instrs):
    """A role from what a loop does, for cubins without line info (FA4's)."""
    c = Counter(i.base for i in instrs)
    if c["UTCHMMA"] + c["UTCQMMA"] + c["UTCOMMA"] + c["UTCIMMA"] + c["UTCMMA"]:
        return "Mma"
    if c["MUFU"] >= 16:
        return "Softmax"
    if c["UTMALDG"]:
        return "Load"
    if c["UTMASTG"]:
        return "Epilogue"
    if c["LDTM"] and c["STTM"]:
        return "Correction"
    return None


# ---------------------------------------------------------------------------------------------------------
# Analysis


def count(instrs):
    pipes = Counter(pipe_of(i) for i in instrs)
    ops = Counter(i.op for i in instrs)
    flags = Counter(f for i in instrs for f in flags_of(i))
    return {"instructions": len(instrs), "pipes": dict(pipes), "flags": dict(flags),
            "ops": dict(sorted(ops.items(), key=lambda kv: -kv[1]))}


def analyse(sass_text, roles, kv_loop_regex, listing=None):
    functions = parse_sass(sass_text)
    if not functions:
        raise SystemExit("sass_report: no code in the disassembly")
    kernel = max(functions, key=lambda f: len(f.instrs))
    has_lines = any(i.frames for i in kernel.instrs)
    for ins in kernel.instrs:
        ins.role = roles.role(ins.frames) if (roles and has_lines) else None
    blocks = build_cfg(kernel)
    loops = find_loops(blocks)

    def loop_instrs(loop):
        return [i for b in loop.hot(blocks) for i in b.instrs]

    def spin(loop):  # a barrier wait's retry loop (or any small loop around a wait or a sleep)
        ins = loop_instrs(loop)
        return len(ins) <= 40 and any(is_wait(i) or i.base in ("NANOSLEEP", "YIELD") for i in ins)

    result = {"function": kernel.name, "line_info": has_lines, "other_functions": [f.name for f in functions if f is not kernel],
              "whole_kernel": count(kernel.instrs), "roles": {}, "loops": []}
    by_role = defaultdict(list)
    for ins in kernel.instrs:
        by_role[ins.role or "unattributed"].append(ins)
    result["static_by_role"] = {r: count(v) for r, v in sorted(by_role.items())}

    kv_re = re.compile(kv_loop_regex)
    candidates = []
    for loop in loops:
        if spin(loop):
            continue
        body = loop_instrs(loop)
        role_votes = Counter(i.role for i in body if i.role)
        role = role_votes.most_common(1)[0][0] if role_votes else None
        # The loop's source: a for statement among the lines of its latch and head blocks (the increment,
        # compare and branch of a for loop carry its line), the K/V loop's first.
        fors = []
        if roles:
            latch = max(loop.latches, key=lambda b: b.last.addr)
            for ins in latch.instrs[::-1] + loop.head.instrs:
                for path, line in ins.frames:
                    text = roles.source_line(path, line)
                    entry = "%s:%d: %s" % (os.path.basename(path), line, text)
                    if re.match(r"for\s*\(", text) and entry not in fors:
                        fors.append(entry)
        src = next((f for f in fors if kv_re.search(f)), fors[0] if fors else "")
        non_spin_children = [c for c in loop.children if not spin(c)]
        entry = {"head": "%04x" % loop.head.start, "end": "%04x" % loop.end, "role": role,
                 "signature_role": signature_role(body), "source": src, "hot_instructions": len(body),
                 "depth": depth(loop), "inner_loops": len(non_spin_children), "loop": loop}
        candidates.append(entry)
    candidates.sort(key=lambda e: int(e["head"], 16))

    # The steady-state loop of each role: for each source for statement matching kv_loop_regex, the smallest
    # SASS loop that holds (within 5 points) as large a share of the instructions its body compiled to as any
    # loop does (line info: any frame of the instruction inside the statement; out-of-line fallbacks are
    # outside every loop). Without line info: the innermost non-spin loops, named by signature.
    chosen = {}
    if has_lines and roles:
        source_loops = {}
        for ins in kernel.instrs:
            for path, line in ins.frames:
                if path not in source_loops:
                    source_loops[path] = roles.kv_loops(path, kv_loop_regex)
        block_of = {ins.addr: b.index for b in blocks for ins in b.instrs}
        for path, stmts in source_loops.items():
            for first, last, header in stmts:
                inside = [i for i in kernel.instrs if any(p == path and first <= l <= last for p, l in i.frames)]
                if not inside:
                    continue
                shares = [(sum(1 for i in inside if block_of[i.addr] in e["loop"].body) / len(inside), e) for e in candidates]
                top = max((sh for sh, _ in shares), default=0)
                holders = [(len(e["loop"].body), e) for sh, e in shares if sh > 0.5 and sh >= top - 0.05]
                if holders:
                    e = min(holders, key=lambda h: h[0])[1]
                    if e["role"] and e["role"] not in ("kernel", "other"):
                        e["source"] = "%s:%d: %s" % (os.path.basename(path), first, header)
                        chosen[e["role"]] = e
    if not chosen:
        for e in candidates:
            if e["inner_loops"] == 0 and e["signature_role"]:
                name, k = e["signature_role"], 2
                while name in chosen:
                    name, k = "%s#%d" % (e["signature_role"], k), k + 1
                chosen[name] = e
    for role, e in sorted(chosen.items()):
        paths = trip_paths(e["loop"], blocks, kernel.instrs)
        result["roles"][role] = {
            "loop": {k: v for k, v in e.items() if k != "loop"},
            "steady": count(paths["steady"]),
            "full": count(paths["full"]),
        }
        if role == listing:  # the instructions counted, for reading what is left to cut
            result["roles"][role]["steady_listing"] = [
                "%04x  %s%s %s" % (i.addr, "@%s " % i.pred if i.pred else "", i.op, i.args) for i in paths["steady"]]
    # Roles without a K/V loop (Epilogue): their outermost non-spin loop, per tile.
    if has_lines:
        for e in candidates:
            if e["role"] and e["role"] not in result["roles"] and e["role"] not in ("kernel", "other") and e["depth"] == min(
                    x["depth"] for x in candidates if x["role"] == e["role"]):
                paths = trip_paths(e["loop"], blocks, kernel.instrs)
                result["roles"][e["role"]] = {"loop": dict({k: v for k, v in e.items() if k != "loop"}, per="tile"),
                                              "steady": count(paths["steady"]), "full": count(paths["full"])}
    result["loops"] = [{k: v for k, v in e.items() if k != "loop"} for e in candidates]
    result["setmaxnreg"] = [i.op + " " + i.args for i in kernel.instrs if i.base == "USETMAXREG"]
    return result


def depth(loop):
    d = 0
    while loop.parent:
        d, loop = d + 1, loop.parent
    return d


# ---------------------------------------------------------------------------------------------------------
# Our kernel: dump, Plan, ptxas report


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit("sass_report: %s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r.stdout


def config_flags(cfg):
    flags = ["--arch", "100", "--backend", "sm100", "--dtype", cfg["dtype"], "--d", str(cfg["d"]), "--dv", str(cfg["dv"])]
    return flags + (["--causal"] if cfg["causal"] else [])


def ptxas_report(log):
    r = {}
    m = re.search(r"Used (\d+) registers", log)
    r["registers"] = int(m.group(1)) if m else None
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m:
        r["stack_bytes"], r["spill_store_bytes"], r["spill_load_bytes"] = map(int, m.groups())
    return r


def plan_facts(plan_text):
    facts = {"roles": {}}
    m = re.search(r"(\d+) bytes dynamic", plan_text)
    facts["smem_bytes"] = int(m.group(1)) if m else None
    m = re.search(r"(\d+) K/V stages", plan_text)
    facts["kv_stages"] = int(m.group(1)) if m else None
    for m in re.finditer(r"^\s+warps\s+(\d+)(?:-(\d+))?\s+(\w+)\s+(\d+) regs", plan_text, re.M):
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        facts["roles"][m.group(3)] = {"first_warp": first, "warps": last - first + 1, "registers": int(m.group(4))}
    return facts


def dump_config(fa4rt, cfg, out_dir):
    text = run([fa4rt, "dump", "--out", out_dir, "--lineinfo", "--verbose"] + config_flags(cfg))
    m = re.match(r"(\S+)\.\{cu,log,cubin\}", text.strip())
    stem = m.group(1)
    plan_text = run([fa4rt, "plan"] + config_flags(cfg))
    return stem + ".cubin", open(stem + ".log").read(), plan_text, os.path.basename(stem)


# ---------------------------------------------------------------------------------------------------------
# Model inputs for `fa4rt plan` (one line per role; docs/speed-model.md)

MODEL_ROLES = ["Softmax", "Correction", "Mma", "Load"]  # per K/V block; the Epilogue works per tile


def model_line(kernel, cfg, role, counts, extra=""):
    p = counts["pipes"]
    f = counts["flags"]
    return ("%s d=%d dv=%d causal=%d role=%s issue=%d mufu=%d fp32=%d fp32x2=%d fp_alu=%d imad=%d int_alu=%d convert=%d "
            "tensor=%d tmem=%d waits=%d bra_div=%d%s" % (
                kernel, cfg["d"], cfg["dv"], int(cfg["causal"]), role, counts["instructions"], p.get("mufu", 0),
                p.get("fp32", 0), p.get("fp32x2", 0), p.get("fp_alu", 0), p.get("imad", 0), p.get("int_alu", 0),
                p.get("convert", 0), p.get("tensor", 0), p.get("tmem", 0), f.get("wait", 0), f.get("BRA.DIV", 0), extra))


def difference(full, steady):
    return {"instructions": full["instructions"] - steady["instructions"],
            "pipes": {k: full["pipes"].get(k, 0) - steady["pipes"].get(k, 0) for k in set(full["pipes"]) | set(steady["pipes"])},
            "flags": {k: full["flags"].get(k, 0) - steady["flags"].get(k, 0) for k in set(full["flags"]) | set(steady["flags"])}}


def model_lines(kernel, cfg, res):
    """Per role, the steady trip; for Softmax also the extra of a masked block (SoftmaxMasked) and for
    Correction the extra of a block whose O is rescaled (CorrectionRescale): each the full trip less the
    steady one."""
    lines = []
    for role in MODEL_ROLES:
        r = res["roles"].get(role)
        if not r or r["loop"].get("per") == "tile":
            continue
        lines.append(model_line(kernel, cfg, role, r["steady"]))
        extra = {"Softmax": "SoftmaxMasked", "Correction": "CorrectionRescale"}.get(role)
        if extra:
            lines.append(model_line(kernel, cfg, extra, difference(r["full"], r["steady"])))
    return lines


def merge_counts_file(path, kernel, new_lines):
    """Replace `kernel`'s lines of a counts table, keeping its comments and other kernels' lines (FA4's)."""
    kept = []
    if os.path.exists(path):
        for line in open(path).read().splitlines():
            if line.split(None, 1)[:1] != [kernel]:
                kept.append(line)
    header = [l for l in kept if l.startswith("#")]
    others = [l for l in kept if l.strip() and not l.startswith("#")]
    return "\n".join(header + new_lines + others) + "\n"


# ---------------------------------------------------------------------------------------------------------
# Report


def fmt_pipes(c):
    p = c["pipes"]
    keys = ["tensor", "mufu", "fp32", "fp32x2", "fp_alu", "imad", "int_alu", "convert", "tmem", "smem", "tma", "sync",
            "uniform", "move", "control"]
    return " | ".join(str(p.get(k, 0)) for k in keys)


PIPE_HEADER = "tensor | MUFU | FP32 | FP32x2 | FP ALU | IMAD | INT ALU | cvt | TMEM | smem | TMA | sync | uniform | move | ctrl"


def markdown(results):
    out = []
    for name, res in results:
        cfg = res.get("config")
        out.append("### %s" % name)
        facts = res.get("plan", {})
        ptx = res.get("ptxas", {})
        wk = res["whole_kernel"]
        out.append("")
        out.append("Whole kernel (static): %d instructions; BRA.DIV %d; WARPSYNC %d; barrier waits %d (with a suspend-time "
                   "hint: %d); NANOSLEEP %d; YIELD %d; ELECT %d." % (
                       wk["instructions"], wk["flags"].get("BRA.DIV", 0),
                       sum(v for k, v in wk["flags"].items() if k.startswith("WARPSYNC")), wk["flags"].get("wait", 0),
                       wk["flags"].get("wait_with_hint", 0), wk["flags"].get("NANOSLEEP", 0), wk["flags"].get("YIELD", 0),
                       wk["flags"].get("ELECT", 0)))
        if ptx:
            out.append("ptxas: %s registers at launch, spill stores/loads %s/%s B, stack %s B. setmaxnreg: %s. "
                       "Shared memory %s B (Plan), %s K/V stages." % (
                           ptx.get("registers"), ptx.get("spill_store_bytes"), ptx.get("spill_load_bytes"),
                           ptx.get("stack_bytes"), "; ".join(res.get("setmaxnreg", [])) or "none",
                           facts.get("smem_bytes"), facts.get("kv_stages")))
        out.append("")
        out.append("| role (regs) | loop | path | instr | " + PIPE_HEADER + " | waits | BRA.DIV | WARPSYNC |")
        out.append("|---|---|---|---|" + "---|" * (PIPE_HEADER.count("|") + 1) + "---|---|---|")
        for role in sorted(res["roles"], key=lambda r: (MODEL_ROLES.index(r.split("#")[0]) if r.split("#")[0] in MODEL_ROLES else 9, r)):
            r = res["roles"][role]
            regs = facts.get("roles", {}).get(role if role != "Softmax" else "Softmax0", {}).get("registers", "")
            per = r["loop"].get("per", "K/V block")
            for kind in ("steady", "full"):
                c = r[kind]
                out.append("| %s%s | %s..%s per %s | %s | %d | %s | %d | %d | %d |" % (
                    role, " (%s)" % regs if regs else "", r["loop"]["head"], r["loop"]["end"], per, kind,
                    c["instructions"], fmt_pipes(c), c["flags"].get("wait", 0), c["flags"].get("BRA.DIV", 0),
                    sum(v for k, v in c["flags"].items() if k.startswith("WARPSYNC"))))
        out.append("")
        srcs = ["%s: %s" % (role, r["loop"]["source"]) for role, r in sorted(res["roles"].items()) if r["loop"].get("source")]
        if srcs:
            out.append("Loops: " + "; ".join(srcs) + ".")
            out.append("")
    return "\n".join(out)


def model_output(fa4rt, cfg, counts_text):
    """`fa4rt plan --model` for one configuration on a counts table; returns (text, {kernel: (bound, tflops)})."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(counts_text)
    try:
        text = run([fa4rt, "plan", "--model", "--counts", f.name] + config_flags(cfg))
    finally:
        os.unlink(f.name)
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^\s+(ours|fa4)\s+[\d\s]+\s(\S+)\s+(\d+)", line)
        if m:
            rows[m.group(1)] = (m.group(2), int(m.group(3)))
    return text, rows


ANALYSIS_START, ANALYSIS_END = "<!-- analysis: hand-written, kept by regeneration -->", "<!-- end of analysis -->"


def full_report(results, fa4rt, counts_text, command, previous_analysis=""):
    """The committed report: summary, per-configuration tables and the model's sections."""
    nvd = find_nvdisasm()
    version = subprocess.run([nvd, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1] if nvd else "?"
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = ["# sm100 kernel: per-role SASS counts and the B200 speed model", "",
           "Generated by `%s` at commit %s (nvdisasm: %s). No B200 ran anything: these are counts of the "
           "compiled code and a model (docs/speed-model.md)." % (command, commit or "?", version), "",
           "Per K/V block: one warp's instructions on one trip of its role's steady-state loop (the steady path: "
           "unmasked, no rescale, waits succeeding at once). FA4 columns: issue 12's measured FA4 4.0.0b36 "
           "counts (hd128; other shapes derived, see bench/results/sm100-model-counts.txt).", "",
           "| configuration | softmax block (FA4 514) | MMA warp per 32 MMAs (FA4 205) | O rescale (FA4 186 at dv 128) | "
           "BRA.DIV in steady loops | whole kernel | BRA.DIV / WARPSYNC whole | waits with hint | spill B | "
           "model: ours | model: FA4 | ours / FA4 |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    models = []
    for name, res in results:
        cfg = res["config"]
        roles = res["roles"]
        sm, mma, cor = roles.get("Softmax"), roles.get("Mma"), roles.get("Correction")
        per32 = mma["steady"]["instructions"] * 32 / mma["steady"]["pipes"].get("tensor", 1) if mma else 0
        rescale = cor["full"]["instructions"] - cor["steady"]["instructions"] if cor else 0
        bra = sum(r["steady"]["flags"].get("BRA.DIV", 0) for k, r in roles.items() if r["loop"].get("per") != "tile")
        wk = res["whole_kernel"]["flags"]
        text, rows = model_output(fa4rt, cfg, counts_text)
        models.append((name, text))
        ours, fa4 = rows.get("ours"), rows.get("fa4")
        ptx = res.get("ptxas", {})
        out.append("| %s | %s | %.0f | %d | %d | %d | %d / %d | %d | %s | %s | %s | %s |" % (
            name, sm["steady"]["instructions"] if sm else "?", per32, rescale, bra, res["whole_kernel"]["instructions"],
            wk.get("BRA.DIV", 0), sum(v for k, v in wk.items() if k.startswith("WARPSYNC")), wk.get("wait_with_hint", 0),
            "%s/%s" % (ptx.get("spill_store_bytes"), ptx.get("spill_load_bytes")),
            "%d (%s)" % (ours[1], ours[0]) if ours else "?", "%d (%s)" % (fa4[1], fa4[0]) if fa4 else "?",
            "%.2f" % (ours[1] / fa4[1]) if ours and fa4 else "?"))
    out += ["", ANALYSIS_START, previous_analysis or "## Analysis\n\n(none yet: write it between these markers; regeneration keeps it)", ANALYSIS_END,
            "", "## Per role, per configuration", "",
            "Columns: instructions by pipe (docs/speed-model.md); `steady` and `full` (longest: masked block, rescale) "
            "trips; registers per thread after setmaxnreg from the Plan.", "", markdown(results),
            "## The model per configuration (`fa4rt plan --model`)", ""]
    for name, text in models:
        out += ["### %s" % name, "", "```", text.strip("\n"), "```", ""]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fa4rt", default=os.path.join(REPO, "build", "fa4rt"), help="the fa4rt tool (default build/fa4rt)")
    ap.add_argument("--nvdisasm", help="nvdisasm to use (default: found on PATH, CUDA toolkits, the PyPI wheel)")
    ap.add_argument("--config", action="append", default=[],
                    help="D[,DV][,causal] of our kernel, e.g. 128, 64,causal, 192,128 (repeatable; default: the report set)")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--cubin", action="append", default=[], help="analyse this cubin instead (e.g. FA4's); repeatable")
    ap.add_argument("--source-root", action="append", default=[],
                    help="where the cubin's line-info files are (default: kernel_src/ and the repository)")
    ap.add_argument("--role-regex", default=r"^(\w+?)_role$", help="functions whose name gives a role (group 1)")
    ap.add_argument("--kv-loop-regex", default=r"n_blocks", help="source text of the K/V block loop's for statement")
    ap.add_argument("--as", dest="kernel_name", default=None, help="name of the cubin's kernel in model lines (e.g. fa4)")
    ap.add_argument("--shape", default=None, help="for --cubin: D,DV,causal|noncausal of the kernel, for model lines")
    ap.add_argument("--json", help="write everything counted as JSON here")
    ap.add_argument("--markdown", help="write the per-role tables as Markdown here")
    ap.add_argument("--model-lines", help="write the model's input lines (fa4rt plan --counts) here")
    ap.add_argument("--update-counts", metavar="FILE",
                    help="replace this kernel's lines in a counts table (bench/results/sm100-model-counts.txt), "
                         "keeping the other kernels' lines and the comments")
    ap.add_argument("--keep", help="keep the dumped .cu/.log/.cubin in this directory")
    ap.add_argument("--listing", metavar="ROLE",
                    help="also print the instructions of ROLE's steady trip (e.g. Mma, Softmax), the ones counted")
    ap.add_argument("--report", help="write the full Markdown report (summary, tables, fa4rt plan --model) here")
    args = ap.parse_args()

    nvdisasm = find_nvdisasm(args.nvdisasm)
    if not nvdisasm:
        print(NVDISASM_MISSING, file=sys.stderr)
        return 3
    roles = RoleMap(args.source_root + [os.path.join(REPO, "kernel_src"), REPO], args.role_regex)
    results, lines = [], []
    if args.cubin:
        for path in args.cubin:
            res = analyse(disassemble(nvdisasm, path), roles, args.kv_loop_regex, args.listing)
            res["cubin"] = path
            results.append((os.path.basename(path), res))
            if args.shape:
                parts = args.shape.split(",")
                cfg = {"d": int(parts[0]), "dv": int(parts[1]), "causal": len(parts) > 2 and parts[2] == "causal"}
                lines += model_lines(args.kernel_name or "other", cfg, res)
    else:
        if not os.access(args.fa4rt, os.X_OK):
            print("sass_report: %s not found: build it (cmake --build build --target tool_fa4rt) or pass --fa4rt" %
                  args.fa4rt, file=sys.stderr)
            return 2
        specs = args.config or ["64", "64,causal", "128", "128,causal", "192,128", "192,128,causal"]
        work = args.keep or tempfile.mkdtemp(prefix="sass_report_")
        os.makedirs(work, exist_ok=True)
        try:
            for spec in specs:
                parts = [p for p in spec.split(",") if p]
                causal = "causal" in parts
                dims = [int(p) for p in parts if p != "causal"]
                cfg = {"dtype": args.dtype, "d": dims[0], "dv": dims[1] if len(dims) > 1 else dims[0], "causal": causal}
                cubin, log, plan_text, name = dump_config(args.fa4rt, cfg, work)
                res = analyse(disassemble(nvdisasm, cubin), roles, args.kv_loop_regex, args.listing)
                res.update(config=cfg, ptxas=ptxas_report(log), plan=plan_facts(plan_text), key=name)
                results.append((name, res))
                lines += model_lines("ours", cfg, res)
                print("counted %s" % name, file=sys.stderr)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    md = markdown(results)
    if args.markdown:
        open(args.markdown, "w").write(md + "\n")
    if args.model_lines:
        open(args.model_lines, "w").write("\n".join(lines) + "\n")
    if args.update_counts:
        text = merge_counts_file(args.update_counts, args.kernel_name or ("ours" if not args.cubin else "other"), lines)
        open(args.update_counts, "w").write(text)
    if args.report and not args.cubin:
        table = os.path.join(REPO, "bench", "results", "sm100-model-counts.txt")
        counts_text = merge_counts_file(args.update_counts or table, "ours", lines)
        previous = ""
        if os.path.exists(args.report):
            old = open(args.report).read()
            if ANALYSIS_START in old and ANALYSIS_END in old:
                previous = old.split(ANALYSIS_START, 1)[1].split(ANALYSIS_END, 1)[0].strip("\n")
        open(args.report, "w").write(full_report(results, args.fa4rt, counts_text,
                                                 "python3 tools/sass_report.py " + " ".join(sys.argv[1:]), previous))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: res for name, res in results}, f, indent=1, sort_keys=True)
    if not (args.markdown or args.json or args.model_lines or args.update_counts or args.report):
        print(md)
        print("\n".join(lines))
    for name, res in results:
        role = res["roles"].get(args.listing) if args.listing else None
        if args.listing:
            print("\n### %s: %s's steady trip, %s" % (name, args.listing,
                  "%d instructions" % len(role["steady_listing"]) if role else "no such role (roles: %s)" % ", ".join(sorted(res["roles"]))))
        if role:
            print("\n".join(role["steady_listing"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
