#!/usr/bin/env python3
"""Where a kernel's warps wait, by source line: joins Nsight Compute's per-instruction stall samples
(tools/ncu_stalls.sh's PREFIX.sass.csv) with the lineinfo SASS of the same kernel (`fa4rt dump --lineinfo`:
the same NVRTC and code, so the same addresses) and sums the samples per source line and per function.

    tools/stall_report.py PREFIX.sass.csv KERNEL.cubin [--top 40] [--nvdisasm PATH]

Prints the sampled columns' totals, then the lines with the most samples (innermost inlined frame), each with
its share and its top stall reasons where the CSV breaks them down, then the same per enclosing function."""
import argparse
import collections
import csv
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_report  # noqa: E402


def read_samples(path):
    """{offset: {column: value}} for the sampled columns (the totals and the per-reason `stall_*` counts),
    the columns' names, and {offset: SASS text}. Nsight Compute exports the kernel's instructions in order
    from its entry at their loaded (absolute) addresses: offsets count from the first one, as nvdisasm's do."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if any(c.strip().startswith("Address") for c in r))
    names = [c.strip() for c in rows[head]]
    addr_col = next(i for i, c in enumerate(names) if c.startswith("Address"))
    src_col = next((i for i, c in enumerate(names) if c == "Source"), None)
    sampled = [i for i, c in enumerate(names) if "ampl" in c or c.startswith("stall_")]
    out, text = {}, {}
    for r in rows[head + 1:]:
        if len(r) <= addr_col or not r[addr_col].strip():
            continue
        try:
            addr = int(r[addr_col].strip(), 0)
        except ValueError:
            continue
        vals = {}
        for i in sampled:
            try:
                vals[names[i]] = float(r[i].replace(",", "")) if i < len(r) and r[i].strip() else 0.0
            except ValueError:
                pass
        out[addr] = vals
        if src_col is not None and src_col < len(r):
            text[addr] = r[src_col].strip()
    base = min(out) if out else 0
    return ({a - base: v for a, v in out.items()}, [names[i] for i in sampled],
            {a - base: t for a, t in text.items()})


def label(column):
    """A stall reason's short name from its column header."""
    text = re.sub(r"Warp Stall Sampling|\(?(All |Not-issued )?Samples\)?|smsp__pcsamp_warps_issue_stalled_", "", column)
    return text.strip(" :()-") or column


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("cubin")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--nvdisasm")
    a = p.parse_args()
    samples, columns, text = read_samples(a.csv)
    total_col = next((c for c in columns if "All" in c), columns[0] if columns else None)
    if total_col is None:
        raise SystemExit("stall_report: no sampled column in %s" % a.csv)
    reasons = [c for c in columns if c.startswith("stall_") and "Not Issued" not in c]
    if reasons:
        reasons.append("stall_unlisted")
    fns = sass_report.parse_sass(sass_report.disassemble(sass_report.find_nvdisasm(a.nvdisasm), a.cubin))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    roles = sass_report.RoleMap([os.path.dirname(a.cubin), os.path.join(root, "kernel_src"), root], r"^$")
    by_line, by_fn, ops = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter), {}
    matched, same_op, compared = 0.0, 0, 0
    for fn in fns:
        for ins in fn.instrs:
            if ins.addr in text:  # the export's SASS at this offset is the cubin's instruction
                compared += 1
                same_op += ins.op.split(".")[0] in text[ins.addr]
            s = samples.get(ins.addr)
            if not s or not s.get(total_col):
                continue
            # Samples of a reason the export has no column for (on sm_90 nearly all at HGMMA instructions).
            s = dict(s, stall_unlisted=max(0.0, s[total_col] - sum(s.get(r, 0.0) for r in reasons)))
            matched += s[total_col]
            path, line = ins.frames[0] if ins.frames else ("?", 0)
            key = "%s:%d" % (path, line)
            by_line[key].update(s)
            ops.setdefault(key, collections.Counter())[ins.op] += s[total_col]
            funcs = roles.functions(path) if ins.frames else None
            inside = sorted((f for f in funcs or [] if f[1] <= line <= f[2]), key=lambda f: f[2] - f[1])
            by_fn[inside[0][0] if inside else "?"].update(s)
    grand = sum(v.get(total_col, 0) for v in samples.values())
    print("samples (%s): %d in the CSV, %d matched to the cubin's instructions" % (total_col, grand, matched))
    print("opcodes: %d of the cubin's %d instructions found in the export have the same opcode there" % (same_op, compared))
    if grand and matched < 0.95 * grand:
        print("WARNING: under 95% matched: is the cubin the profiled kernel's configuration?")

    def table(title, groups, with_src):
        print("\n## %s\n" % title)
        print("| where | samples | share | top reasons | top opcodes |" if with_src else "| where | samples | share | top reasons |")
        print("|---|---|---|---|---|" if with_src else "|---|---|---|---|")
        for key, c in sorted(groups.items(), key=lambda kv: -kv[1][total_col])[: a.top]:
            tops = ", ".join("%s %d%%" % (label(r), 100 * c[r] / c[total_col])
                             for r in sorted(reasons, key=lambda r: -c[r])[:3] if c[r] > 0)
            row = "| %s | %d | %.1f%% | %s |" % (key, c[total_col], 100 * c[total_col] / max(matched, 1), tops)
            if with_src:
                path, line = key.rsplit(":", 1)
                src = roles.source_line(path, int(line)) if path != "?" else ""
                top_ops = ", ".join(op for op, _ in ops[key].most_common(2))
                where = "%s:%s" % (os.path.basename(path), line)
                row = "| %s `%s` | %d | %.1f%% | %s | %s |" % (where, src[:60].replace("|", "/"), c[total_col],
                                                           100 * c[total_col] / max(matched, 1), tops, top_ops)
            print(row)

    table("By source line (innermost frame)", by_line, True)
    table("By function (innermost enclosing)", by_fn, False)


if __name__ == "__main__":
    main()
