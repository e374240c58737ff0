// The steady-state cycle model of the sm100 kernel on a B200 (docs/speed-model.md): per K/V block of one CTA
// (2 Q tiles x 128 rows x 128 keys), the cycles each pipe needs from the Plan's shapes and the instructions
// each warp role issues per block (counted from SASS by tools/sass_report.py), the bound, and the TFLOP/s it
// predicts. The B200 rates live in speed_model.cpp only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fa4/plan.hpp"

namespace fa4::cli {

// Instructions one warp of a role issues per K/V block, by pipe (tools/sass_report.py's columns).
struct RoleCounts {
  double issue = 0, mufu = 0, fp32 = 0, fp32x2 = 0, fp_alu = 0, imad = 0, int_alu = 0, convert = 0, tensor = 0,
         tmem = 0, waits = 0, bra_div = 0;
};

// One kernel's counts for one shape: role -> counts ("Softmax", "Correction", "CorrectionRescale" = the extra
// instructions of a block whose O is rescaled, "Mma", "Load").
struct KernelCounts {
  std::string kernel;  // "ours", "fa4"
  int d = 0, dv = 0;
  bool causal = false;
  std::string source;     // where the numbers come from
  double self_waits = -1;  // 0: the MMA warp never waits on its own MMAs (FA4); -1: as the Plan's TMEM map says
  double pv_early = -1;    // the PV's k-steps issued before the last of P is stored (FA4: 6); -1: the Plan's
  std::map<std::string, RoleCounts> roles;
};

// The counts table: lines "KERNEL d=D dv=DV causal=0|1 role=ROLE key=value ...", '#' comments. Throws
// std::runtime_error on a malformed line.
std::vector<KernelCounts> parse_counts(const std::string& text);
const std::string& embedded_counts();  // bench/results/sm100-model-counts.txt at build time

struct SpeedPrediction {
  double flops_per_block = 0;
  std::vector<std::pair<std::string, double>> cycles;  // per K/V block: each pipe's or path's cycles
  std::string bound;                                   // the largest of them
  double period = 0;                                   // its cycles
  double tflops = 0;                                   // steady state, before the causal share
  double useful_share = 1;                             // causal: benchmark FLOPs / computed FLOPs
  double tflops_useful = 0;                            // tflops * useful_share
  std::vector<std::string> notes;
};

// The model for one kernel's counts on the Plan's geometry. seqlen: causal share of useful FLOPs and
// masked blocks (0: 16384).
SpeedPrediction predict(const Plan& plan, const KernelCounts& counts, int seqlen);

// The Plan report's last section: our prediction and FA4's for the Plan's shape, from the given table.
std::string speed_model_report(const Plan& plan, const std::vector<KernelCounts>& table, int seqlen);

}  // namespace fa4::cli
