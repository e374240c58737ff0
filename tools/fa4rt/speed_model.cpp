// The steady-state cycle model (docs/speed-model.md explains every term and the source of every rate).
#include "tools/fa4rt/speed_model.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "kernel_src/common/block_range.h"

namespace fa4::cli {
namespace {

// ---- B200 rates: the model's only copy (docs/speed-model.md gives the source of each) -------------------
constexpr double kSms = 148;                   // published (B200)
constexpr double kDenseBf16Flops = 2.25e15;    // published: dense BF16/FP16 tensor FLOP/s (HGX B200)
constexpr double kTensorFlopPerClk = 8192;     // per SM, dense BF16 (FA4 paper; 2.25e15 / (148 x 1.856 GHz))
constexpr double kClockHz = kDenseBf16Flops / (kTensorFlopPerClk * kSms);  // derived: 1.856 GHz
constexpr double kSubPartitions = 4;           // per SM, one warp instruction issued per cycle each
constexpr double kMufuPerClk = 16;             // per SM: MUFU.EX2 lanes (4 per sub-partition)
constexpr double kFp32PerClk = 128;            // per SM: FP32 FMA lanes; FFMA2/FADD2/FMUL2 use 2 lanes per thread
constexpr double kAluPerClk = 64;              // per SM: compare/min/max/select/logic/shift/convert lanes (assumed)
constexpr double kImadPerClk = 64;             // per SM: IMAD lanes (assumed; the FMA pipe's heavy half)
constexpr double kSmemBytesPerClk = 128;       // per SM: shared memory bandwidth (FA4 paper)
// Calibration (docs/speed-model.md): the latency each handoff adds to a Q tile's serial path (commit ->
// mbarrier -> waiting warp, plus the softmax's unmodelled serial phases), set once so that the model on
// FA4's counts, with its P handed over in two parts, gives FA4's published 1613 TFLOP/s (hd128, non-causal,
// long sequence).
constexpr double kHandoffCycles = 577;
constexpr double kRescaleShare = 0.1;          // blocks whose O is rescaled (FA4: conditional rescaling skips ~90%)
constexpr double kWarpLanes = 32;

double cycles_per_warp_instr(double lanes_per_clk_sm) { return kWarpLanes / (lanes_per_clk_sm / kSubPartitions); }

RoleCounts& operator+=(RoleCounts& a, const RoleCounts& b) {
  a.issue += b.issue, a.mufu += b.mufu, a.fp32 += b.fp32, a.fp32x2 += b.fp32x2, a.fp_alu += b.fp_alu, a.imad += b.imad;
  a.int_alu += b.int_alu, a.convert += b.convert, a.tensor += b.tensor, a.tmem += b.tmem, a.waits += b.waits;
  a.bra_div += b.bra_div;
  return a;
}
RoleCounts scaled(RoleCounts a, double s) {
  for (double* v : {&a.issue, &a.mufu, &a.fp32, &a.fp32x2, &a.fp_alu, &a.imad, &a.int_alu, &a.convert, &a.tensor, &a.tmem,
                    &a.waits, &a.bra_div})
    *v *= s;
  return a;
}

// Cycles of one sub-partition's pipes for one warp's counts.
double mufu_cycles(const RoleCounts& c) { return c.mufu * cycles_per_warp_instr(kMufuPerClk); }
double fma_cycles(const RoleCounts& c) {
  return (c.fp32 + 2 * c.fp32x2) * cycles_per_warp_instr(kFp32PerClk) + c.imad * cycles_per_warp_instr(kImadPerClk);
}
double alu_cycles(const RoleCounts& c) { return (c.fp_alu + c.int_alu + c.convert) * cycles_per_warp_instr(kAluPerClk); }

std::string fixed(double v, int digits = 0) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

const RoleCounts* find(const KernelCounts& k, const std::string& role) {
  auto it = k.roles.find(role);
  return it == k.roles.end() ? nullptr : &it->second;
}

// The counts a warp of Plan role `name` issues per block (averaged over masked and rescaled blocks).
RoleCounts role_counts(const KernelCounts& k, const std::string& name, double masked_share) {
  RoleCounts c;
  std::string base = name;
  if (base.rfind("Softmax", 0) == 0) base = "Softmax";
  if (const RoleCounts* r = find(k, base)) c += *r;
  if (base == "Softmax")
    if (const RoleCounts* r = find(k, "SoftmaxMasked")) c += scaled(*r, masked_share);
  if (base == "Correction")
    if (const RoleCounts* r = find(k, "CorrectionRescale")) c += scaled(*r, kRescaleShare);
  return c;
}

}  // namespace

std::vector<KernelCounts> parse_counts(const std::string& text) {
  std::vector<KernelCounts> table;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream tokens(line);
    std::string kernel, token;
    if (!(tokens >> kernel)) continue;
    KernelCounts key;
    key.kernel = kernel;
    std::string role;
    RoleCounts counts;
    std::map<std::string, double*> fields = {
        {"issue", &counts.issue},   {"mufu", &counts.mufu},       {"fp32", &counts.fp32},       {"fp32x2", &counts.fp32x2},
        {"fp_alu", &counts.fp_alu}, {"imad", &counts.imad},       {"int_alu", &counts.int_alu}, {"convert", &counts.convert},
        {"tensor", &counts.tensor}, {"tmem", &counts.tmem},       {"waits", &counts.waits},     {"bra_div", &counts.bra_div}};
    while (tokens >> token) {
      const size_t eq = token.find('=');
      if (eq == std::string::npos) throw std::runtime_error("counts line " + std::to_string(number) + ": '" + token + "' is not key=value");
      const std::string k = token.substr(0, eq), v = token.substr(eq + 1);
      try {
        if (k == "d") key.d = std::stoi(v);
        else if (k == "dv") key.dv = std::stoi(v);
        else if (k == "causal") key.causal = v == "1";
        else if (k == "role") role = v;
        else if (k == "source") key.source = v;
        else if (k == "self_waits") key.self_waits = std::stod(v);
        else if (k == "pv_early") key.pv_early = std::stod(v);
        else if (fields.count(k)) *fields[k] = std::stod(v);
        // other keys are carried for people (the Python tool writes more than the model reads)
      } catch (const std::logic_error&) {
        throw std::runtime_error("counts line " + std::to_string(number) + ": bad value in '" + token + "'");
      }
    }
    if (role.empty() || !key.d || !key.dv) throw std::runtime_error("counts line " + std::to_string(number) + ": needs d=, dv= and role=");
    auto it = std::find_if(table.begin(), table.end(), [&](const KernelCounts& t) {
      return t.kernel == key.kernel && t.d == key.d && t.dv == key.dv && t.causal == key.causal;
    });
    if (it == table.end()) it = table.insert(table.end(), key);
    if (!key.source.empty()) it->source = key.source;
    if (key.self_waits >= 0) it->self_waits = key.self_waits;
    if (key.pv_early >= 0) it->pv_early = key.pv_early;
    it->roles[role] = counts;
  }
  return table;
}

// Cycles of one QK MMA group of `keys` keys (N) over head dim d, 128 rows: the tensor pipe's, or shared
// memory's where the group is narrow. Each K = 16 step reads all of Q's rows and the group's keys of K, so
// N = 128 is balanced (64 cycles both ways) and N = 64 reads 6 KiB in 48 cycles for 32 of tensor work.
double qk_group_cycles(double m, double keys, double d) {
  return std::max(2 * m * keys * d / kTensorFlopPerClk, (m + keys) * d * 2 / kSmemBytesPerClk);
}

// One Q tile's serial path through a K/V block, from its softmax's start to the next one's: the softmax; P
// handed to the MMA warp (one handoff), in two parts where the PV's first `early` of its `steps` k-steps
// take the P stored first (the softmax stores P evenly as it goes); the PV (`pv` cycles); the next QK; S
// full back to the softmax (one handoff). The tensor pipe runs the MMAs in issue order, each once issued
// and the pipe free; the other tile's MMAs are left out (they fill the gaps). Without `waits` the QK is
// one group (`qk` cycles) right behind the PV (FA4's order). With them (P lies over S) it is two: the keys
// below P (`qk_below`) once the last of P is handed over, the keys over P (`qk_over`) a handoff after the
// PV completes (PvDone).
double tile_path(double softmax, double pv, double steps, double early, double qk, double qk_below, double qk_over,
                 bool waits) {
  const double early_ready = softmax * early / steps + kHandoffCycles, late_ready = softmax + kHandoffCycles;
  double end = 0;  // the pipe's queue
  auto run = [&](double ready, double cycles) { return end = std::max(end, ready) + cycles; };
  run(early_ready, pv * early / steps);
  const double pv_done = run(late_ready, pv * (steps - early) / steps);
  if (!waits) return run(late_ready, qk) + kHandoffCycles;
  run(late_ready, qk_below);
  run(pv_done + kHandoffCycles, qk_over);
  return end + kHandoffCycles;
}

const TmemRegion* tmem_region(const Plan& plan, const std::string& name) {
  for (const TmemRegion& r : plan.tmem)
    if (r.name == name) return &r;
  return nullptr;
}

SpeedPrediction predict(const Plan& plan, const KernelCounts& k, int seqlen) {
  SpeedPrediction p;
  const double tiles = plan.q_tiles, m = plan.tile_m, n = plan.tile_n, d = plan.key.head_dim, dv = plan.key.head_dim_v;
  p.flops_per_block = tiles * 2 * m * n * (d + dv);
  const double qk = 2 * m * n * d / kTensorFlopPerClk, pv = 2 * m * n * dv / kTensorFlopPerClk;  // one tile
  const double tensor = tiles * (qk + pv);

  // Causal: share of the computed FLOPs that the benchmark counts (sq = sk = seqlen, no packing), and of the
  // visited blocks that run the mask.
  double masked_share = 0;
  if (plan.key.causal) {
    const int s = seqlen > 0 ? seqlen : 16384, rows = plan.tile_m * plan.q_tiles;
    double visited = 0, masked = 0;
    for (int first = 0; first < s; first += rows) {
      const fa4k::BlockRange r = fa4k::kv_block_range(first, rows, 1, s, s, plan.tile_n, true);
      visited += r.n_blocks;
      masked += std::min(r.n_masked, r.n_blocks);
    }
    masked_share = masked / visited;
    p.useful_share = (0.5 * s * s) / (visited * rows * plan.tile_n);
    p.notes.push_back("causal at seqlen " + std::to_string(s) + ": " + fixed(100 * masked_share, 1) + "% of visited blocks masked, " +
                      fixed(100 * p.useful_share, 1) + "% of computed FLOPs counted");
  }

  // Per sub-partition (warp w runs on sub-partition w % 4): issue slots and pipe cycles of its warps.
  double issue[4] = {}, mufu[4] = {}, fma[4] = {}, alu[4] = {};
  RoleCounts softmax_warp;
  for (const WarpRole& r : plan.roles) {
    const RoleCounts c = role_counts(k, r.name, masked_share);
    if (r.name.rfind("Softmax", 0) == 0) softmax_warp = c;
    for (int w = r.first_warp; w < r.first_warp + r.warps; ++w) {
      issue[w % 4] += c.issue;
      mufu[w % 4] += mufu_cycles(c);
      fma[w % 4] += fma_cycles(c);
      alu[w % 4] += alu_cycles(c);
    }
  }
  auto most = [](const double (&v)[4]) { return *std::max_element(v, v + 4); };

  // A tile's serial path per block (tile_path): the two tiles overlap each other's, so it bounds the period.
  // The PV is handed over in two parts where the Plan says (pv_early_steps) or a counts line does (pv_early=:
  // FA4's). Where P lies over S (TMEM map: P0 inside S0), our QK waits for the PV, in two groups: the drain
  // is what that adds to the path (the wait, and the narrower groups' shared-memory time), and the tensor
  // pipe loses it once per tile and block. A counts line can say a kernel has no such waits (self_waits=0:
  // FA4's).
  const double softmax_alone = std::max({softmax_warp.issue, mufu_cycles(softmax_warp), fma_cycles(softmax_warp), alu_cycles(softmax_warp)});
  const double steps = n / 16, early = k.pv_early >= 0 ? k.pv_early : plan.pv_early_steps > 0 ? plan.pv_early_steps : steps;
  const TmemRegion *s0 = tmem_region(plan, "S0"), *p0 = tmem_region(plan, "P0");
  const bool waits = s0 && p0 && p0->first_column >= s0->first_column && p0->first_column < s0->first_column + s0->columns &&
                     k.self_waits != 0;
  const double below = waits ? p0->first_column - s0->first_column : 0;
  const double qk_whole = qk_group_cycles(m, n, d), qk_below = qk_group_cycles(m, below, d), qk_over = qk_group_cycles(m, n - below, d);
  const double path = tile_path(softmax_alone, pv, steps, early, qk_whole, qk_below, qk_over, waits);
  const double drain = path - tile_path(softmax_alone, pv, steps, early, qk_whole, qk_below, qk_over, false);
  // MMA operand reads from shared memory: Q once per QK group, K (QK), V (PV).
  const double smem_bytes = tiles * ((waits ? 2 : 1) * m * d + n * d + n * dv) * 2;

  p.cycles = {{"tensor", tensor},
              {"tensor+drains", tensor + tiles * drain},
              {"MUFU", most(mufu)},
              {"FMA", most(fma)},
              {"ALU", most(alu)},
              {"issue", most(issue)},
              {"smem", smem_bytes / kSmemBytesPerClk},
              {"chain", path}};
  for (const auto& [name, cycles] : p.cycles)
    if (cycles > p.period) p.period = cycles, p.bound = name;
  p.tflops = p.flops_per_block / p.period * kClockHz * kSms / 1e12;
  p.tflops_useful = p.tflops * p.useful_share;
  return p;
}

std::string speed_model_report(const Plan& plan, const std::vector<KernelCounts>& table, int seqlen) {
  std::ostringstream out;
  const KernelKey& key = plan.key;
  if (plan.q_tiles != 2 || plan.tile_m != 128 || plan.tile_n != 128 || plan.roles.empty()) {
    out << "  (the model describes the sm100 kernel's 2 x 128 x 128 geometry; this Plan has another)\n";
    return out.str();
  }
  auto lookup = [&](const std::string& kernel) -> const KernelCounts* {
    const KernelCounts* best = nullptr;
    for (const KernelCounts& t : table)
      if (t.kernel == kernel && t.d == key.head_dim && t.dv == key.head_dim_v) {
        if (t.causal == key.causal) return &t;
        best = &t;  // the other mask: the steady-state loop is the same shape
      }
    return best;
  };
  out << "  B200 at " << fixed(kClockHz / 1e9, 3) << " GHz (2.25 PFLOP/s dense BF16 over " << kSms << " SMs), "
      << fixed(plan.q_tiles * 2.0 * plan.tile_m * plan.tile_n * (key.head_dim + key.head_dim_v) / 1e6, 1)
      << " MFLOP per K/V block of a CTA; cycles per block, handoff latency " << kHandoffCycles << " cycles (calibrated on FA4)\n";
  out << "  kernel  tensor  +drains   MUFU    FMA    ALU  issue   smem  chain  bound          TFLOP/s\n";
  double ours_tflops = 0, fa4_tflops = 0;
  std::vector<std::string> notes;
  for (const char* kernel : {"ours", "fa4"}) {
    const KernelCounts* k = lookup(kernel);
    if (!k) {
      out << "  " << std::left << std::setw(6) << kernel << "  no counts for d" << key.head_dim << "/dv" << key.head_dim_v
          << " (tools/sass_report.py writes bench/results/sm100-model-counts.txt)\n";
      continue;
    }
    const SpeedPrediction p = predict(plan, *k, seqlen);
    out << "  " << std::left << std::setw(6) << kernel << std::right;
    for (const auto& [name, cycles] : p.cycles) out << std::setw(name == "tensor" ? 8 : 7) << fixed(cycles);
    out << "  " << std::left << std::setw(13) << p.bound << std::right << std::setw(8) << fixed(p.tflops_useful);
    if (key.causal) out << " (" << fixed(p.tflops) << " steady)";
    if (k->causal != key.causal) out << "  [counts of the " << (k->causal ? "causal" : "non-causal") << " kernel]";
    out << "\n";
    (std::string(kernel) == "ours" ? ours_tflops : fa4_tflops) = p.tflops_useful;
    for (const std::string& n : p.notes)
      if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
    if (!k->source.empty()) notes.push_back(std::string(kernel) + " counts: " + k->source);
  }
  for (const std::string& n : notes) out << "  " << n << "\n";
  if (ours_tflops > 0 && fa4_tflops > 0)
    out << "  ours / FA4: " << fixed(ours_tflops / fa4_tflops, 2) << (ours_tflops >= fa4_tflops ? " (target met)" : " (target: >= 1)")
        << "; FA4 published: up to 1613 TFLOP/s (hd128, non-causal, long sequence)\n";
  if (const KernelCounts* k = lookup("ours")) {
    const RoleCounts* s = find(*k, "Softmax");
    const RoleCounts* mma = find(*k, "Mma");
    double bra_div = 0;
    for (const auto& [role, c] : k->roles)
      if (role != "SoftmaxMasked" && role != "CorrectionRescale") bra_div += c.bra_div;
    out << "  issue 12 targets: softmax block " << (s ? fixed(s->issue) : "?") << " instructions (<= 514, aim 480); MMA warp "
        << (mma && mma->tensor ? fixed(mma->issue * 32 / mma->tensor) : "?") << " per 32 MMAs (<= 205); BRA.DIV in the steady loops "
        << fixed(bra_div) << " (0); spills: fa4rt resources\n";
  }
  return out.str();
}

}  // namespace fa4::cli
