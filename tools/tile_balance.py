#!/usr/bin/env python3
"""How evenly a persistent sm90 grid's CTAs finish a causal launch: a list-scheduling simulation of the dense
causal tile order (kernel_src/common/block_range.h dense_tile: longest first across the heads of an L2
section, sections in turn; per head where the section is 0) on `--sms` CTAs, with the tile ring's claim-ahead:
  two slots  a CTA draws its next tile as it starts one (the scheduler fills the slot its readers freed);
  one slot   a CTA draws its next tile once the producer has issued the current one's loads, `--lead` blocks
             before that tile ends.
Work is counted in K/V blocks (a tile of m_block m sees ceil((m + 1) x tile_m / tile_n) of them) plus a fixed
`--overhead` per tile. Prints each configuration's active share (mean CTA busy time over the makespan) for the
section the launch would use (runtime/launch.cpp fill_schedule) and for one section of every head.
    tools/tile_balance.py [--sms 132] [--lead 2] [--overhead 2]
"""
import argparse
import heapq
import math


def tile_work(section, heads, m_blocks, tile_m, tile_n, overhead):
    work = lambda m: math.ceil((m + 1) * tile_m / tile_n) + overhead
    if section == 0:  # head after head, longest first within each
        return [work(m_blocks - 1 - i) for _ in range(heads) for i in range(m_blocks)]
    out = []
    for first in range(0, heads, section):
        n = min(section, heads - first)
        out += [work(m_blocks - 1 - i // n) for i in range(m_blocks * n)]
    return out


def active_share(works, sms, lead=None):
    """Mean busy time over the makespan. lead None: two slots (draw at a tile's start); else one slot."""
    it = iter(works)
    heap, ends = [], [0.0] * sms
    firsts = [next(it, None) for _ in range(sms)]  # every CTA draws its first tile at the launch ...
    for s, w in enumerate(firsts):
        if w is None:
            continue
        if lead is None:
            heapq.heappush(heap, (w, s, next(it, None)))  # ... and, with two slots, the next as it starts
        else:
            heapq.heappush(heap, (max(0.0, w - lead), s, w))
    while heap:
        if lead is None:
            t, s, nxt = heapq.heappop(heap)
            ends[s] = t
            if nxt is not None:
                heapq.heappush(heap, (t + nxt, s, next(it, None)))
        else:
            _, s, t = heapq.heappop(heap)
            ends[s] = t
            w = next(it, None)
            if w is not None:
                heapq.heappush(heap, (max(t, t + w - lead), s, t + w))
    return sum(works) / sms / max(ends)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sms", type=int, default=132)
    p.add_argument("--lead", type=float, default=2.0, help="one slot: blocks between the draw and the tile's end")
    p.add_argument("--overhead", type=float, default=2.0, help="per-tile cost in blocks")
    p.add_argument("--section-bytes", type=int, default=32 << 20)
    p.add_argument("--min-head-bytes", type=int, default=1 << 20)
    a = p.parse_args()
    print("| head dim | b x s | section (heads) | two slots | one slot | all heads, two slots | all heads, one slot |")
    print("|---|---|---|---|---|---|---|")
    # the Plans' tiles (fa4rt plan --arch 90 --backend sm90 --causal); 16k tokens, 2048 / d heads
    for d, tile_m, tile_n, heads in ((64, 192, 128, 32), (128, 128, 128, 16), (256, 128, 80, 8)):
        for b, s in ((1, 16384), (2, 8192), (4, 4096), (8, 2048), (16, 1024), (32, 512)):
            m_blocks, hs = (s + tile_m - 1) // tile_m, b * heads
            kv = s * 2 * d * 2
            section = min(hs, max(1, a.section_bytes // kv)) if kv >= a.min_head_bytes else 0
            cells = [active_share(tile_work(sec, hs, m_blocks, tile_m, tile_n, a.overhead), a.sms, lead)
                     for sec in (section, hs) for lead in (None, a.lead)]
            print("| %d | %dx%d | %s | %.3f | %.3f | %.3f | %.3f |" % (d, b, s, section or "per head", *cells))


if __name__ == "__main__":
    main()
