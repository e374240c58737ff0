// Human-readable views of a Plan: the report printed by `fa4rt plan` and the barrier graph in DOT.
// Everything here is read from the Plan (and, for the mask classes, from kernel_src/common/block_range.h,
// the code the kernel schedules with); nothing is re-derived.
#include "tools/fa4rt/report.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "kernel_src/common/block_range.h"
#include "tools/fa4rt/speed_model.hpp"

namespace fa4::detail {
namespace {

void section(std::ostringstream& out, const char* title) { out << "\n== " << title << " ==\n"; }

void math_contract(std::ostringstream& out, const Plan& p) {
  const KernelKey& k = p.key;
  section(out, "Math contract");
  out << "O[b, r, h, :] = sum_c softmax_c(scale * Q[b, r, h, :] . K[b, c, h / (h_q / h_kv), :]" << (k.causal ? " + mask" : "")
      << ") V[b, c, h / (h_q / h_kv), :]\n"
      << "  Q [b, s_q, h_q, " << k.head_dim << "], K [b, s_k, h_kv, " << k.head_dim << "], V [b, s_k, h_kv, " << k.head_dim_v
      << "], O [b, s_q, h_q, " << k.head_dim_v << "]; " << to_string(k.dtype)
      << " in and out, element strides per (batch, seq, head), head dim contiguous; fp32 accumulation\n"
      << "  scale = softmax_scale (default 1/sqrt(" << k.head_dim << ")); exponentials in exp2 form: "
      << "p = exp2(s * scale_log2 - m * scale_log2), one FMA, scale_log2 = scale * log2(e)\n";
  if (k.causal) out << "  causal, bottom-right aligned: row r sees keys c <= r + s_k - s_q; a row that sees none gives O = 0, LSE = -inf\n";
  out << "  LSE: " << (k.lse ? "written, fp32 [b, h_q, s_q], natural log: (m * scale_log2 + log2(l)) * ln 2" : "not written") << "\n";
  if (k.gqa_pack > 1)
    out << "  GQA packing: " << k.gqa_pack << " q heads share a kv head and one tile; packed row = token * " << k.gqa_pack
        << " + head in group\n";
}

void streaming_state(std::ostringstream& out, const Plan& p) {
  section(out, "Streaming state per row (m: running max, l: running sum, O: accumulator)");
  out << "  per K/V block j: m_j = max(m, rowmax(S_j)); if (m - m_j) * scale_log2 >= -" << p.rescale_threshold_log2
      << " keep m (acc = 1, P <= 2^" << p.rescale_threshold_log2 << ")\n"
      << "                   else acc = exp2((m - m_j) * scale_log2), m = m_j\n"
      << "                   P_j = exp2(S_j * scale_log2 - m * scale_log2)   (a row still all -inf uses m = 0)\n"
      << "                   l = l * acc + rowsum(P_j)   (fp32, before rounding P)\n"
      << "                   O = O * acc + P_j V_j       (O rescaled only when some row of the warp has acc != 1)\n"
      << "  final:           O = O / l (0 when l = 0); LSE = (m * scale_log2 + log2 l) * ln 2 (-inf when l = 0)\n";
  if (p.soft_exp2_every) out << "  one exp2 in " << p.soft_exp2_every << " is computed on the FMA pipe (cubic for 2^frac), the rest by MUFU ex2\n";
}

void mma_contracts(std::ostringstream& out, const Plan& p) {
  if (p.tmem.empty()) return;
  const KernelKey& k = p.key;
  section(out, "MMA contracts (tcgen05.mma.cta_group::1.kind::f16, K = 16 per instruction)");
  out << "  QK: S[" << p.tile_m << " x " << p.tile_n << "] fp32 in TMEM = Q[" << p.tile_m << " x " << k.head_dim << "] * K["
      << p.tile_n << " x " << k.head_dim << "]^T; SS form, both K-major in smem, " << k.head_dim / 16
      << " instructions; M=" << p.tile_m << " N=" << p.tile_n << "\n";
  out << "  PV: O[" << p.tile_m << " x " << k.head_dim_v << "] fp32 in TMEM += P[" << p.tile_m << " x " << p.tile_n << "] * V["
      << p.tile_n << " x " << k.head_dim_v << "]; TS form: P (" << to_string(k.dtype)
      << ", 2 per 32-bit column) from TMEM, V MN-major in smem, " << p.tile_n / 16 << " instructions, P +8 columns per step; M="
      << p.tile_m << " N=" << k.head_dim_v << "\n";
}

void tmem_map(std::ostringstream& out, const Plan& p) {
  if (p.tmem.empty()) return;
  section(out, "TMEM map (128 lanes = rows; 32-bit columns)");
  out << "  allocated: " << p.tmem_columns << " columns\n";
  for (const TmemRegion& r : p.tmem)
    out << "  " << std::left << std::setw(4) << r.name << " columns " << std::setw(3) << r.first_column << " .. "
        << std::setw(3) << r.first_column + r.columns - 1 << "  reuse: " << r.reuse_rule << "\n";
}

void smem_map(std::ostringstream& out, const Plan& p) {
  section(out, "Shared memory");
  out << "  " << p.smem_bytes << " bytes dynamic; tiles " << p.tile_m << " (q rows) x " << p.tile_n << " (k rows), "
      << p.q_tiles << " Q tile(s) per CTA, " << p.kv_stages << " K/V stages\n";
  for (const SmemBuffer& b : p.smem)
    out << "  " << std::left << std::setw(9) << b.name << " @" << std::setw(7) << b.offset << std::setw(7) << b.bytes << " B  "
        << b.contents << "\n";
  for (const TmaBox& t : p.tma)
    out << "  TMA " << t.tensor << ": box " << t.box_rows << " rows x " << t.box_cols << " columns"
        << (t.col_boxes > 1 ? " x " + std::to_string(t.col_boxes) + " column boxes a copy" : std::string()) << ", "
        << t.swizzle_bytes << "B swizzle\n";
}

void roles(std::ostringstream& out, const Plan& p) {
  section(out, "Warp roles");
  for (const WarpRole& r : p.roles) {
    out << "  warps " << std::right << std::setw(2) << r.first_warp;
    if (r.warps > 1) out << "-" << std::left << std::setw(2) << r.first_warp + r.warps - 1;
    else out << "   ";
    out << "  " << std::left << std::setw(11) << r.name;
    if (r.registers) out << std::right << std::setw(4) << r.registers << " regs  ";
    out << r.job << "\n";
  }
  // setmaxnreg moves registers within the CTA's launch allocation (Plan::launch_registers).
  if (p.registers_total())
    out << "  registers: " << p.registers_total() << " of the CTA's " << p.threads * p.launch_registers() << "\n";
}

void barrier_graph(std::ostringstream& out, const Plan& p) {
  if (p.barriers.empty()) return;
  section(out, "Barrier graph (mbarriers; producer -> consumer, arrival count)");
  for (const BarrierSpec& b : p.barriers)
    out << "  " << std::left << std::setw(11) << b.name << " x" << b.instances << "  " << std::setw(19) << b.producer
        << " -> " << std::setw(10) << b.consumer << " arrivals " << b.arrivals << (b.expects_tx ? " + tx bytes" : "") << "  "
        << b.signal << "\n";
}

void risks(std::ostringstream& out, const Plan& p) {
  section(out, "Risks and fallback");
  for (const std::string& r : p.risks) out << "  - " << r << "\n";
}

}  // namespace

std::string mask_classes(const Plan& plan, const MaskShape& shape) {
  std::ostringstream out;
  const int seqlen_q = shape.seqlen_q, seqlen_k = shape.seqlen_k;
  const int rows = plan.tile_m * plan.q_tiles, pack = plan.key.gqa_pack;
  const int m_blocks = (seqlen_q * pack + rows - 1) / rows;
  const int total = (seqlen_k + plan.tile_n - 1) / plan.tile_n;
  const bool portable = plan.key.backend == Backend::portable;
  const int left = shape.window_left, right = plan.key.causal ? 0 : shape.window_right;
  const bool from_bottom = plan.rows_from_bottom && fa4k::later_rows_longer(plan.key.causal, plan.key.window, shape.window_right);
  out << "  s_q " << seqlen_q << ", s_k " << seqlen_k;
  if ((portable || plan.key.window) && (left >= 0 || right >= 0)) out << ", keys [t + s_k - s_q - " << left << ", t + s_k - s_q + " << right << "] (-1: unbounded)";
  out << ": " << m_blocks << " CTA row block(s) of " << rows << " packed rows x " << total << " K/V block(s) of "
      << plan.tile_n << (from_bottom ? ", counted from the last row (a partial block is m 0)" : "") << "\n"
      << "  M = masked (diagonal, window edge or seqlen_k tail: mask code), F = full (no mask code), . = skipped (never loaded)\n";
  const int shown = std::min(m_blocks, 64);
  for (int m = 0; m < shown; ++m) {
    int visited = 0, masked = 0;
    out << "  m " << std::setw(4) << m << "  ";
    const int first_row = fa4k::tile_first_row(m, m_blocks, rows, pack, seqlen_q, from_bottom);
    if (portable || plan.key.window) {  // the tile kernels visit a window's blocks the same way (window_kv_block_range)
      const fa4k::WindowBlocks w =
          fa4k::window_block_range(first_row, rows, pack, seqlen_q, seqlen_k, plan.tile_n, left, right);
      for (int n = 0; n < total; ++n) {
        const bool seen = n >= w.n_begin && n < w.n_end, full = n >= w.interior_begin && n < w.interior_end;
        if (n < 96) out << (!seen ? '.' : full ? 'F' : 'M');
        visited += seen, masked += seen && !full;
      }
    } else {
      const fa4k::BlockRange r =
          fa4k::kv_block_range(first_row, rows, pack, seqlen_q, seqlen_k, plan.tile_n, plan.key.causal);
      for (int n = 0; n < std::min(total, 96); ++n) {
        const int j = r.n_first - n;  // visit order index of block n
        out << (n > r.n_first ? '.' : j < r.n_masked ? 'M' : 'F');
      }
      visited = r.n_blocks, masked = std::min(r.n_masked, r.n_blocks);
    }
    out << "  (" << visited << " visited, " << masked << " masked)\n";
  }
  if (shown < m_blocks) out << "  ... " << m_blocks - shown << " more row blocks\n";
  return out.str();
}

std::string barrier_dot(const Plan& plan) {
  std::ostringstream out;
  out << "digraph \"" << plan.key.name() << "\" {\n  rankdir=LR;\n  node [shape=box, style=rounded];\n";
  for (const WarpRole& r : plan.roles) out << "  \"" << r.name << "\";\n";
  auto endpoints = [](const std::string& text) {
    std::vector<std::string> names;
    std::string current;
    for (char c : text + "+") {
      if (c == '+') {
        names.push_back(current);
        current.clear();
      } else {
        current += c;
      }
    }
    return names;
  };
  auto expand = [&](const std::string& name) {  // "Softmax" means both softmax warpgroups
    std::vector<std::string> out_names;
    for (const WarpRole& r : plan.roles)
      if (r.name == name || (r.name.rfind(name, 0) == 0 && r.name.size() == name.size() + 1)) out_names.push_back(r.name);
    if (out_names.empty()) out_names.push_back(name);
    return out_names;
  };
  for (const BarrierSpec& b : plan.barriers)
    for (const std::string& from : endpoints(b.producer))
      for (const std::string& f : expand(from))
        for (const std::string& to : endpoints(b.consumer))
          for (const std::string& t : expand(to))
            out << "  \"" << f << "\" -> \"" << t << "\" [label=\"" << b.name << " x" << b.instances << " (" << b.arrivals
                << (b.expects_tx ? "+tx" : "") << ")\"];\n";
  out << "}\n";
  return out.str();
}

std::string speed_section(const Plan& plan, int seqlen, const std::string& counts) {
  std::ostringstream out;
  section(out, "Speed model (B200 steady state per K/V block; docs/speed-model.md)");
  try {
    out << cli::speed_model_report(plan, cli::parse_counts(counts.empty() ? cli::embedded_counts() : counts), seqlen);
  } catch (const std::runtime_error& e) {
    out << "  no model: " << e.what() << "\n";
  }
  return out.str();
}

std::string plan_report(const Plan& plan, const MaskShape& shape, const std::string& counts) {
  std::ostringstream out;
  out << "fa4rt plan: " << plan.key.name() << "  (kernel " << plan.kernel_name << " from kernel_src/" << plan.source
      << ", target " << plan.key.target() << ", " << plan.threads << " threads" << (plan.persistent ? ", persistent grid" : "")
      << ")\n";
  if (plan.rows_from_bottom) out << "  row blocks: counted from each sequence's last row where later rows see more keys\n";
  if (plan.l2_section_bytes > 0) {
    const long long min_bytes = plan.l2_section_min_head_bytes;
    out << "  causal tiles: longest first across the heads of each L2 section (heads whose K/V fit in "
        << (plan.l2_section_bytes >> 20) << " MiB), sections in turn";
    if (min_bytes > 0)
      out << ", for heads of " << (min_bytes % (1 << 20) ? min_bytes >> 10 : min_bytes >> 20)
          << (min_bytes % (1 << 20) ? " KiB" : " MiB") << " of K/V or more (below: head after head)";
    out << "\n";
  }
  if (plan.tiles_ahead > 0)
    out << "  tile draws: a CTA draws tile t once every role has taken tile t - " << plan.tiles_ahead
        << (plan.tiles_ahead == 1 ? " (the producer has issued tile t - 1's loads)" : " (a slot of the tile ring is free)")
        << "\n";
  math_contract(out, plan);
  streaming_state(out, plan);
  mma_contracts(out, plan);
  tmem_map(out, plan);
  smem_map(out, plan);
  roles(out, plan);
  barrier_graph(out, plan);
  if (shape.seqlen_q > 0 && shape.seqlen_k > 0 && plan.q_tiles > 0) {
    section(out, "Mask block classes");
    out << mask_classes(plan, shape);
  }
  risks(out, plan);
  if (plan.key.backend == Backend::sm100 || plan.key.backend == Backend::sm100_emulated)
    out << speed_section(plan, shape.seqlen_q == shape.seqlen_k ? shape.seqlen_q : 0, counts);
  return out.str();
}

}  // namespace fa4::detail
