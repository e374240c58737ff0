// The tcgen05 emulation on a Hopper GPU (sm_90a): the GEMM test kernel against a float64 reference for
// every operand form, the emulator against real wgmma over the same TMA-loaded tiles (ties the descriptor
// decoding to silicon), every tcgen05.ld/st shape, f32x2, and the negative tests: a consumer that skips
// the commit wait reads NaN; lane-quadrant, leak, double-free, over-allocation, bad-descriptor,
// store-into-pending and non-uniform-address violations trap (each in a child process: a trap kills the
// CUDA context). Kernels: tests/kernels/probe/{tcgen05_gemm,wgmma_compare,tcgen05_faults}.cu.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "verify/jit_module.hpp"
#include "tests/kernels/probe/sm100_probe.h"
#include "kernel_src/sm100/descriptors.h"
#include "runtime/tma.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

using detail::driver;
using sm100::kEmuTmemHeaderBytes;
using sm100::kEmuTmemSlotBytes;

// The emulated kernels are sm_90a code (sm_90 only); the process's context is current before a test allocates.
#define FA4_REQUIRE_EMULATION() \
  do {                          \
    FA4_REQUIRE_SM90();         \
    env();                      \
  } while (0)

// One context and one copy of each module for the whole process (deliberately never destroyed, so that
// the modules outlive every test).
struct Env {
  PrimaryContext ctx{0};
  std::unique_ptr<JitModule> gemm, wgmma, faults;
};
Env& env() {
  static Env* e = new Env();
  return *e;
}
const JitModule& gemm_module() {
  if (!env().gemm) env().gemm = std::make_unique<JitModule>(test_source, "probe/tcgen05_gemm.cu", "sm_90a");
  return *env().gemm;
}
const JitModule& wgmma_module() {
  if (!env().wgmma) env().wgmma = std::make_unique<JitModule>(test_source, "probe/wgmma_compare.cu", "sm_90a");
  return *env().wgmma;
}
const JitModule& faults_module() {
  if (!env().faults) env().faults = std::make_unique<JitModule>(test_source, "probe/tcgen05_faults.cu", "sm_90a");
  return *env().faults;
}

// One CTA's zero-filled TMEM slot; the emulation must leave its header zero after every normal exit.
struct Scratch {
  DeviceBuffer buffer{kEmuTmemSlotBytes};
  Scratch() { buffer.fill_bytes(0); }
  void expect_header_clean() const {
    std::vector<uint8_t> h = buffer.download<uint8_t>(kEmuTmemHeaderBytes);
    size_t dirty = 0;
    for (uint8_t b : h) dirty += b != 0;
    EXPECT_EQ(dirty, 0u) << "the emulated TMEM header was not left clean at kernel exit";
  }
};

int round_up(int v, int to) { return (v + to - 1) / to * to; }

// A host matrix rows x cols (logical), stored for TMA as a [1, rows, 1, cols_padded] tensor whose padding
// holds random junk (never read by a correct kernel).
struct TmaMatrix {
  std::vector<uint16_t> host;  // [rows][ld]
  int rows = 0, ld = 0;
  DeviceBuffer dev;
  CUtensorMap map{};

  TmaMatrix(DType dtype, int rows_, int cols, int box_cols, int swizzle_bytes, uint64_t seed, const char* name)
      : rows(rows_), ld(round_up(cols, box_cols)) {
    host = random_halves(dtype, static_cast<size_t>(rows) * ld, 1.f, seed);
    dev = DeviceBuffer(host.size() * 2);
    dev.upload(host);
    detail::TmaTensor t;
    t.ptr = dev.get();
    t.batch = 1;
    t.seq = rows;
    t.heads = 1;
    t.dim = ld;
    t.batch_stride = static_cast<int64_t>(rows) * ld;
    t.seq_stride = ld;
    t.head_stride = ld;
    t.dtype = dtype;
    t.name = name;
    map = detail::make_tma_descriptor(t, {box_cols, rows, swizzle_bytes});
  }
  uint16_t at(int r, int c) const { return host[static_cast<size_t>(r) * ld + c]; }
};

// Logical operands A [m][k] and B [n][k] taken from their stored (K- or MN-major) form.
struct Operands {
  DType dtype;
  TmaMatrix a, b;
  bool a_mn, b_mn;
  Operands(DType dt, int m, int n, int k, bool a_mn_, bool b_mn_, int swizzle_bytes, uint64_t seed)
      : dtype(dt),
        a(dt, a_mn_ ? k : m, a_mn_ ? m : k, swizzle_bytes / 2, swizzle_bytes, seed, "a"),
        b(dt, b_mn_ ? k : n, b_mn_ ? n : k, swizzle_bytes / 2, swizzle_bytes, seed + 1, "b"),
        a_mn(a_mn_),
        b_mn(b_mn_) {}
  double A(int i, int kk) const { return from_half(dtype, a_mn ? a.at(kk, i) : a.at(i, kk)); }
  double B(int j, int kk) const { return from_half(dtype, b_mn ? b.at(kk, j) : b.at(j, kk)); }
};

// Compares got[rows][n] with A * B^T in float64. Tolerance: rel_tol * sum_k |a b| (+ a tiny absolute
// term), far below the size of any wrong operand element. Reports the first mismatches with indices.
::testing::AssertionResult matches_reference(const std::vector<float>& got, const Operands& op, int rows, int n,
                                             int k, double rel_tol, double* worst_ratio = nullptr) {
  std::ostringstream bad;
  int mismatches = 0;
  double worst = 0;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double p = op.A(i, kk) * op.B(j, kk);
        ref += p;
        mag += std::fabs(p);
      }
      const double g = got[static_cast<size_t>(i) * n + j];
      const double err = std::fabs(g - ref);
      if (std::isfinite(g)) worst = std::max(worst, err / (mag + 1e-30));
      if (!(err <= rel_tol * mag + 1e-6)) {
        if (mismatches < 6) bad << "\n  D[" << i << "][" << j << "] = " << g << ", want " << ref << " (sum|ab| " << mag << ")";
        ++mismatches;
      }
    }
  if (worst_ratio) *worst_ratio = worst;
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << rows * n << " elements differ" << bad.str();
}

// ---------------------------------------------------------------------------------------------------
// tcgen05 GEMM (SS and TS forms, both majornesses, M 64/128, N 64..256, K 16..256)

struct GemmCase {
  int m, n, k;
};
const GemmCase kGemmShapes[] = {{128, 128, 64}, {128, 256, 256}, {128, 64, 16},  {128, 80, 48},
                                {128, 192, 128}, {64, 64, 128},   {64, 256, 32}, {64, 200, 16}};

struct GemmResult {
  std::vector<float> d, d_early;
};

GemmResult run_gemm(const Operands& op, const GemmCase& c, bool ts, bool read_before_commit) {
  const JitModule& module = gemm_module();
  Scratch scratch;
  DeviceBuffer d(static_cast<size_t>(c.m) * c.n * 4), d_early(static_cast<size_t>(c.m) * c.n * 4);
  d.fill_bytes(0xff);  // NaN
  d_early.fill_bytes(0xff);
  // TS: A [m][k] row-major for the tcgen05.st copy into TMEM.
  std::vector<uint16_t> a_rows(static_cast<size_t>(c.m) * c.k);
  for (int i = 0; i < c.m; ++i)
    for (int kk = 0; kk < c.k; ++kk) a_rows[static_cast<size_t>(i) * c.k + kk] = op.a_mn ? op.a.at(kk, i) : op.a.at(i, kk);
  DeviceBuffer a_dev(a_rows.size() * 2);
  a_dev.upload(a_rows);

  fa4probe::GemmArgs args{};
  args.d = static_cast<float*>(d.get());
  args.d_early = static_cast<float*>(d_early.get());
  args.a_rows = static_cast<const unsigned short*>(a_dev.get());
  args.a_ld = c.k;
  args.m = c.m;
  args.n = c.n;
  args.k = c.k;
  args.bf16 = op.dtype == DType::bf16;
  args.a_mn_major = ts ? 0 : op.a_mn;
  args.b_mn_major = op.b_mn;
  args.ts = ts;
  args.read_before_commit = read_before_commit;
  args.tmem_scratch = scratch.buffer.get();
  args.tmem_scratch_bytes = scratch.buffer.bytes();
  void* params[] = {const_cast<CUtensorMap*>(&op.a.map), const_cast<CUtensorMap*>(&op.b.map), &args};
  JitModule::launch(module.function("tcgen05_gemm"), 1, 128, fa4probe::kProbeSmemBytes, params);
  FA4_CU(cuCtxSynchronize());
  scratch.expect_header_clean();
  return {d.download<float>(static_cast<size_t>(c.m) * c.n), d_early.download<float>(static_cast<size_t>(c.m) * c.n)};
}

// Every operand form (SS with A and B K- or MN-major; TS with B K- or MN-major) for every shape.
void check_every_gemm_form(DType dtype) {
  struct Form {
    bool a_mn, b_mn, ts;
    const char* name;
  };
  const Form forms[] = {{false, false, false, "SS A K-major, B K-major"},  {false, true, false, "SS A K-major, B MN-major"},
                        {true, false, false, "SS A MN-major, B K-major"},  {true, true, false, "SS A MN-major, B MN-major"},
                        {false, false, true, "TS A in TMEM, B K-major"},   {false, true, true, "TS A in TMEM, B MN-major"}};
  uint64_t seed = dtype == DType::bf16 ? 1000 : 2000;
  for (const Form& f : forms)
    for (const GemmCase& c : kGemmShapes) {
      SCOPED_TRACE(std::string(f.name) + ", M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) +
                   " K=" + std::to_string(c.k));
      const Operands op(dtype, c.m, c.n, c.k, f.a_mn, f.b_mn, 128, seed += 7);
      const GemmResult r = run_gemm(op, c, f.ts, false);
      EXPECT_TRUE(matches_reference(r.d, op, c.m, c.n, c.k, 1e-4));
    }
}

TEST(Sm100Emulation, GemmMatchesFloat64ReferenceBf16) {
  FA4_REQUIRE_EMULATION();
  check_every_gemm_form(DType::bf16);
}

TEST(Sm100Emulation, GemmMatchesFloat64ReferenceFp16) {
  FA4_REQUIRE_EMULATION();
  check_every_gemm_form(DType::fp16);
}

TEST(Sm100Emulation, ReadingBeforeTheCommitSeesNaNThenTheResult) {
  FA4_REQUIRE_EMULATION();
  for (bool ts : {false, true}) {
    SCOPED_TRACE(ts ? "TS" : "SS");
    const GemmCase c{128, 128, 64};
    const Operands op(DType::bf16, c.m, c.n, c.k, false, true, 128, 77);
    const GemmResult r = run_gemm(op, c, ts, true);
    size_t not_nan = 0;
    for (float v : r.d_early) not_nan += !std::isnan(v);
    EXPECT_EQ(not_nan, 0u) << "a consumer that does not wait for the commit must read NaN everywhere";
    EXPECT_TRUE(matches_reference(r.d, op, c.m, c.n, c.k, 1e-4)) << "after the commit the result is complete";
  }
}

// ---------------------------------------------------------------------------------------------------
// Emulator vs. real wgmma over the same TMA-loaded tiles

struct WgmmaCase {
  DType dtype;
  int swizzle;
  bool a_mn, b_mn;
  int n, k, m_emu;
};

TEST(Sm100Emulation, MatchesRealWgmmaForEveryOperandLayout) {
  FA4_REQUIRE_EMULATION();
  std::vector<WgmmaCase> cases;
  for (DType dt : {DType::bf16, DType::fp16})
    for (int sw : {128, 64})
      for (bool a_mn : {false, true})
        for (bool b_mn : {false, true}) cases.push_back({dt, sw, a_mn, b_mn, 128, 128, 128});
  cases.push_back({DType::bf16, 128, false, true, 256, 128, 128});  // PV-like: V MN-major, N = 256
  cases.push_back({DType::fp16, 64, false, true, 256, 64, 128});
  cases.push_back({DType::bf16, 128, false, false, 256, 256, 128});  // K = 256: four 128B boxes along K
  cases.push_back({DType::bf16, 128, false, false, 128, 128, 64});   // M = 64 (layout F)
  cases.push_back({DType::fp16, 64, true, true, 128, 64, 64});

  const JitModule& module = wgmma_module();
  double worst_emu_vs_wgmma = 0;
  uint64_t seed = 5000;
  for (const WgmmaCase& c : cases) {
    std::ostringstream name;
    name << (c.dtype == DType::bf16 ? "bf16" : "fp16") << " swizzle " << c.swizzle << (c.a_mn ? " A MN" : " A K")
         << (c.b_mn ? " B MN" : " B K") << " N=" << c.n << " K=" << c.k << " emulated M=" << c.m_emu;
    SCOPED_TRACE(name.str());
    const Operands op(c.dtype, 128, c.n, c.k, c.a_mn, c.b_mn, c.swizzle, seed += 11);
    Scratch scratch;
    DeviceBuffer d_wgmma(128 * c.n * 4), d_emu(static_cast<size_t>(c.m_emu) * c.n * 4);
    d_wgmma.fill_bytes(0xff);
    d_emu.fill_bytes(0xff);
    fa4probe::WgmmaArgs args{};
    args.d_wgmma = static_cast<float*>(d_wgmma.get());
    args.d_emu = static_cast<float*>(d_emu.get());
    args.m_emu = c.m_emu;
    args.n = c.n;
    args.k = c.k;
    args.bf16 = c.dtype == DType::bf16;
    args.a_mn_major = c.a_mn;
    args.b_mn_major = c.b_mn;
    args.swizzle_bytes = c.swizzle;
    args.tmem_scratch = scratch.buffer.get();
    args.tmem_scratch_bytes = scratch.buffer.bytes();
    void* params[] = {const_cast<CUtensorMap*>(&op.a.map), const_cast<CUtensorMap*>(&op.b.map), &args};
    JitModule::launch(module.function("wgmma_compare"), 1, 128, fa4probe::kProbeSmemBytes, params);
    FA4_CU(cuCtxSynchronize());
    scratch.expect_header_clean();
    const std::vector<float> wg = d_wgmma.download<float>(128 * c.n);
    const std::vector<float> emu = d_emu.download<float>(static_cast<size_t>(c.m_emu) * c.n);
    // Both against float64 (which one is wrong, if any), then against each other.
    EXPECT_TRUE(matches_reference(wg, op, 128, c.n, c.k, 1e-4)) << "real wgmma vs float64";
    EXPECT_TRUE(matches_reference(emu, op, c.m_emu, c.n, c.k, 1e-4)) << "emulated tcgen05.mma vs float64";
    int differ = 0;
    std::ostringstream bad;
    for (int i = 0; i < c.m_emu; ++i)
      for (int j = 0; j < c.n; ++j) {
        double mag = 0;
        for (int kk = 0; kk < c.k; ++kk) mag += std::fabs(op.A(i, kk) * op.B(j, kk));
        const double e = emu[static_cast<size_t>(i) * c.n + j], w = wg[static_cast<size_t>(i) * c.n + j];
        const double diff = std::fabs(e - w);
        if (std::isfinite(diff)) worst_emu_vs_wgmma = std::max(worst_emu_vs_wgmma, diff / (mag + 1e-30));
        if (!(diff <= 5e-5 * mag + 1e-6)) {
          if (differ < 6) bad << "\n  [" << i << "][" << j << "] emulated " << e << " wgmma " << w;
          ++differ;
        }
      }
    EXPECT_EQ(differ, 0) << "emulated tcgen05.mma and real wgmma disagree beyond fp32 accumulation order"
                         << bad.str();
  }
  std::printf("[ INFO ] max |emulated - wgmma| / sum|a*b| over all layouts: %.3g\n", worst_emu_vs_wgmma);
}

// ---------------------------------------------------------------------------------------------------
// tcgen05.ld/st shapes and packed f32x2

TEST(Sm100Emulation, EveryLdStShapeRoundTrips) {
  FA4_REQUIRE_EMULATION();
  const JitModule& module = gemm_module();
  Scratch scratch;
  std::vector<uint32_t> in(128 * 256);
  std::mt19937 rng(3);
  for (auto& v : in) v = rng();
  DeviceBuffer din(in.size() * 4), dout(in.size() * 4);
  din.upload(in);
  dout.fill_bytes(0xee);
  void* scratch_ptr = scratch.buffer.get();
  unsigned long long scratch_bytes = scratch.buffer.bytes();
  void* din_ptr = din.get();
  void* dout_ptr = dout.get();
  void* params[] = {&din_ptr, &dout_ptr, &scratch_ptr, &scratch_bytes};
  JitModule::launch(module.function("tcgen05_roundtrip"), 1, 128, 0, params);
  FA4_CU(cuCtxSynchronize());
  scratch.expect_header_clean();
  const std::vector<uint32_t> out = dout.download<uint32_t>(in.size());
  int differ = 0;
  for (size_t i = 0; i < in.size(); ++i)
    if (out[i] != in[i] && differ++ < 6)
      ADD_FAILURE() << "thread " << i / 256 << " column " << i % 256 << ": got " << out[i] << " want " << in[i];
  EXPECT_EQ(differ, 0);
}

TEST(Sm100Emulation, PackedF32x2IsTwoRoundedScalarOps) {
  FA4_REQUIRE_EMULATION();
  const JitModule& module = gemm_module();
  const int count = 1000;
  std::vector<float> in(6 * count);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  for (auto& v : in) v = dist(rng);
  DeviceBuffer din(in.size() * 4), dout(in.size() * 4);
  din.upload(in);
  dout.fill_bytes(0xff);
  void* din_ptr = din.get();
  void* dout_ptr = dout.get();
  int n = count;
  void* params[] = {&din_ptr, &dout_ptr, &n};
  JitModule::launch(module.function("f32x2_probe"), (count + 127) / 128, 128, 0, params);
  FA4_CU(cuCtxSynchronize());
  const std::vector<float> out = dout.download<float>(in.size());
  for (int i = 0; i < count; ++i)
    for (int h = 0; h < 2; ++h) {
      const float a = in[6 * i + h], b = in[6 * i + 2 + h], c = in[6 * i + 4 + h];
      ASSERT_EQ(out[6 * i + h], a + b) << i;
      ASSERT_EQ(out[6 * i + 2 + h], a * b) << i;
      ASSERT_EQ(out[6 * i + 4 + h], std::fma(a, b, c)) << i;
    }
}

// ---------------------------------------------------------------------------------------------------
// Violations trap. Each runs in a child process (gtest "threadsafe" death test: the binary re-executes
// itself), which creates its own context, launches the probe and exits with a code naming the outcome.

constexpr int kExitTrapped = 42, kExitNoTrap = 43, kExitOtherError = 44;

[[noreturn]] void run_fault_in_child(int mode) {
  dup2(2, 1);  // the device printf (stdout) then shows in the death test's captured stderr
  PrimaryContext ctx(0);
  const JitModule module(test_source, "probe/tcgen05_faults.cu", "sm_90a");
  DeviceBuffer scratch(kEmuTmemSlotBytes), out(128 * 4);
  scratch.fill_bytes(0);
  void* scratch_ptr = scratch.get();
  unsigned long long scratch_bytes = scratch.bytes();
  void* out_ptr = out.get();
  void* params[] = {&mode, &out_ptr, &scratch_ptr, &scratch_bytes};
  JitModule::launch(module.function("tcgen05_fault"), 1, 128, 0, params);
  const CUresult r = driver().cuCtxSynchronize();
  const char* name = "?";
  driver().cuGetErrorName(r, &name);
  std::fflush(stdout);
  if (r == CUDA_ERROR_LAUNCH_FAILED || r == CUDA_ERROR_ILLEGAL_INSTRUCTION || r == CUDA_ERROR_ASSERT) {
    std::fprintf(stderr, "kernel trapped (%s)\n", name);
    std::_Exit(kExitTrapped);
  }
  std::fprintf(stderr, "kernel finished without a trap: %s\n", name);
  std::_Exit(r == CUDA_SUCCESS ? kExitNoTrap : kExitOtherError);
}

TEST(Sm100Emulation, FaultProbeControlRunsCleanInProcess) {
  FA4_REQUIRE_EMULATION();
  const JitModule& module = faults_module();
  Scratch scratch;
  DeviceBuffer out(128 * 4);
  out.fill_bytes(0);
  int mode = fa4probe::kFaultNone;
  void* scratch_ptr = scratch.buffer.get();
  unsigned long long scratch_bytes = scratch.buffer.bytes();
  void* out_ptr = out.get();
  void* params[] = {&mode, &out_ptr, &scratch_ptr, &scratch_bytes};
  JitModule::launch(module.function("tcgen05_fault"), 1, 128, 0, params);
  FA4_CU(cuCtxSynchronize());
  scratch.expect_header_clean();
  const std::vector<uint32_t> got = out.download<uint32_t>(128);
  for (uint32_t t = 0; t < 128; ++t) ASSERT_EQ(got[t], t + 1000) << "thread " << t;
}

class Sm100EmulationDeathTest : public ::testing::TestWithParam<int> {};

TEST_P(Sm100EmulationDeathTest, ViolationTraps) {
  FA4_REQUIRE_EMULATION();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_fault_in_child(GetParam()), ::testing::ExitedWithCode(kExitTrapped), "kernel trapped");
}

std::string fault_name(const ::testing::TestParamInfo<int>& info) {
  switch (info.param) {
    case fa4probe::kFaultLaneQuadrant: return "LaneQuadrant";
    case fa4probe::kFaultLeak: return "LeakedAllocation";
    case fa4probe::kFaultDoubleFree: return "DoubleFree";
    case fa4probe::kFaultOverAllocation: return "OverAllocation";
    case fa4probe::kFaultBadDescriptor: return "BadDescriptorVersion";
    case fa4probe::kFaultStoreIntoPending: return "StoreIntoPendingMmaDestination";
    case fa4probe::kFaultNonUniformAddress: return "NonUniformAddress";
  }
  return "Mode" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(Faults, Sm100EmulationDeathTest,
                         ::testing::Values(fa4probe::kFaultLaneQuadrant, fa4probe::kFaultLeak,
                                           fa4probe::kFaultDoubleFree, fa4probe::kFaultOverAllocation,
                                           fa4probe::kFaultBadDescriptor, fa4probe::kFaultStoreIntoPending,
                                           fa4probe::kFaultNonUniformAddress),
                         fault_name);

}  // namespace
}  // namespace fa4::test
