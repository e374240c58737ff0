// One attention problem through the public API, checked element by element against the reference:
// random inputs, outputs poisoned with NaN before the run, EVERY element of O (and of the LSE) compared
// with the float64 CPU reference (small problems) or the float32 GPU reference (large ones), and the
// padding around strided outputs checked untouched. Shared by the portable and the sm100 suites.
//
// Tolerance (per element, |out - ref| <= atol + rtol * |ref|, plus a relative L2 norm of the error):
//   bf16: atol = rtol = 2e-2, L2 1e-2 (P and O are rounded to 8-bit mantissas, 2^-9 relative each);
//   fp16: atol = rtol = 4e-3, L2 2e-3 (11-bit mantissas);
//   LSE (fp32): 2e-3 + 1e-4 * |ref|; -inf exactly where the row sees no key.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "fa4/fa4.hpp"

namespace fa4::verify {

enum class Layout { contiguous, head_major, padded, packed_qkv };

struct Shape {
  int64_t seqlen_q, seqlen_k;
};

struct Case {
  std::string name;
  DType dtype = DType::bf16;
  int d = 128, dv = 128;
  bool causal = false;
  bool lse = true;
  int64_t batch = 1, heads_q = 1, heads_kv = 1;
  std::vector<Shape> shapes;
  Layout layout = Layout::contiguous;
  float qk_range = 1.f;          // q and k uniform in [-qk_range, qk_range]; v in [-1, 1]
  float softmax_scale = 0.f;     // 0: the library default 1/sqrt(d)
  double min_abs_logit = 0;      // the case must reach at least this max |q.k| (extreme-logit cases)
  float softcap = 0.f;           // variants (AttentionParams); the CPU reference checks them, so keep such
  bool sinks = false;            // cases small. Sinks: one logit per q head, normal around sink_mean
  float sink_mean = 0.f;
  int window_left = -1, window_right = -1;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // readable test listings

// Pieces of case names: "d128", "d192_dv128"; "causal", "full".
inline std::string dim_name(int d, int dv) { return "d" + std::to_string(d) + (d != dv ? "_dv" + std::to_string(dv) : ""); }
inline std::string mask_name(bool causal) { return causal ? "causal" : "full"; }

// Case families both kernel suites run (each suite adds its own specific cases).
using HeadDims = std::vector<std::pair<int, int>>;
struct Heads {
  const char* name;
  int64_t q, kv;
};
// bf16, causal and full, GQA 2, tails on both sides, seqlen_q > seqlen_k and <.
std::vector<Case> head_dim_cases(const HeadDims& dims);
// fp16 with MQA, causal and full.
std::vector<Case> fp16_mqa_cases(const HeadDims& dims);
// bf16 d128 with the given q/kv head counts, causal and full.
std::vector<Case> gqa_cases(const std::vector<Heads>& heads);
// |q.k| up to ~1e4 (softmax near one-hot, many rescales), bf16 and fp16, causal and full, per head dim.
std::vector<Case> extreme_logit_cases(const HeadDims& dims = {{128, 128}});
// Every configuration of the given head dims (causal x LSE x GQA 4, which the tile kernels pack, or 3, which
// they do not) on problems with more tiles than an H200 has SMs, tails on both sequence lengths: batch 2,
// 8 kv heads, 600/700 tokens (144-160 tiles of 256 rows, twice that of 128).
std::vector<Case> persistent_tile_cases(const HeadDims& dims);
// The variants (small enough for the CPU reference), causal and full, per head dim: softcapping of scaled
// logits past the cap, sinks that dominate their rows, both with fp16 and GQA 3, a window narrower than a
// block, a window with every variant; plus, at d64, windows wider than several blocks (left side only)
// and all three variants on a persistent grid (160 tiles).
std::vector<Case> variant_cases(const HeadDims& dims);
// Strided layouts on small problems with tails, LSE off once: packed qkv, head-major, padded rows.
std::vector<Case> strided_layout_cases();

struct CheckResult {
  bool passed = false;      // every element within tolerance, no NaN, padding and LSE guard untouched
  double max_error = 0;     // max |O - reference|
  double rel_l2 = 0;
  std::string failures;     // what failed, with the first offending elements
  std::string summary;      // one line for the log
  std::vector<float> o;     // the output, [batch, seqlen_q, heads_q, head_dim_v] (to compare backends)
  double kernel_ms = 0;     // median time of one run() on the device, when timing runs were asked for
};

// Runs the case's shape on `attention` (whose Plan must select `expected`) in the current context.
// With timing_runs > 0, the checked run is repeated that many times more, each timed with CUDA events.
CheckResult check_attention(Attention& attention, Backend expected, const Case& c, const Shape& shape, uint64_t seed,
                            int timing_runs = 0);

}  // namespace fa4::verify
