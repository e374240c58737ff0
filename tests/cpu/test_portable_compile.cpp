// Every supported portable configuration for sm_80, sm_90 and sm_100 compiles with NVRTC (no GPU needed)
// and ptxas reports no register spills and no stack frame (local memory would cost far more than a spill
// warning suggests in the inner loop). One ctest per configuration so they run in parallel.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <tuple>

#include "fa4/fa4.hpp"
#include "verify/jit_module.hpp"
#include "verify/reference.hpp"
#include "test_util.hpp"
#include "runtime/codegen.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/backend.hpp"
#include "runtime/launch.hpp"

namespace fa4::detail {
namespace {

struct CompileCase {
  KernelConfig config;
  int arch = 0;
  KernelKey key() const { return key_for_config(config, arch); }
};

void PrintTo(const CompileCase& c, std::ostream* os) { *os << c.key().name(); }  // readable test listings

std::vector<CompileCase> all_cases() {
  std::vector<CompileCase> out;
  for (int arch : {80, 90, 100})
    for (const KernelConfig& c : supported_configs(Backend::portable, arch)) out.push_back({c, arch});
  // The serving variants of every head dim on sm_90: GQA-packed rows (decode), paged K/V, split-KV, and all
  // of them at once; the flags are independent code paths of one kernel.
  for (KernelConfig c : supported_configs(Backend::portable, 90)) {
    if (c.dtype != DType::bf16 || c.lse != c.causal) continue;  // one dtype; LSE on with causal, off without
    for (auto [pack, paged, split] : {std::tuple{4, false, false}, {1, true, false}, {1, false, true}, {8, true, true}}) {
      c.q_heads_per_kv = pack, c.paged = paged, c.split = split, c.varlen = true;
      out.push_back({c, 90});
    }
  }
  // The decode kernel: every head dim, causal or not, dense and with every serving flag, on sm_90; its ring
  // depth and warps depend on the arch's shared memory, so sm_80 and sm_86 (99 KB) build too.
  for (int arch : {80, 86, 90})
    for (KernelConfig c : supported_configs(Backend::portable, arch)) {
      if (c.dtype != DType::bf16 || c.lse != c.causal) continue;
      for (auto [pack, paged, split] : {std::tuple{8, false, false}, {1, true, true}, {32, true, false}, {4, false, true}}) {
        if (arch != 90 && !(paged && split)) continue;
        c.q_heads_per_kv = pack, c.paged = paged, c.split = split, c.varlen = true, c.decode = true;
        out.push_back({c, arch});
      }
    }
  // The variants (window, softcap, sinks) together, on both kernels, every head dim, with split-KV.
  for (KernelConfig c : supported_configs(Backend::portable, 90)) {
    if (c.dtype != DType::bf16 || c.lse != c.causal) continue;
    for (bool decode : {false, true}) {
      c.q_heads_per_kv = decode ? 8 : 4, c.split = true, c.varlen = true, c.decode = decode;
      c.window = c.softcap = c.sinks = true;
      out.push_back({c, 90});
    }
  }
  return out;
}

class PortableCompile : public ::testing::TestWithParam<CompileCase> {};

TEST_P(PortableCompile, BuildsACubinWithoutSpills) {
  const KernelKey key = GetParam().key();
  const Plan plan = make_plan(key);
  std::vector<std::string> options = compile_options(key);
  options.push_back("--ptxas-options=--verbose");
  const CompiledKernel kernel = nvrtc_compile(assemble_source(plan), options, key.name(), "");

  ASSERT_FALSE(kernel.cubin.empty()) << key.name();
  const std::string& log = kernel.log;
  ASSERT_NE(log.find("Compiling entry function '" + plan.kernel_name + "'"), std::string::npos)
      << "no ptxas report for the kernel in the log:\n" << log;
  const ResourceUsage r = parse_ptxas_report(log);
  ASSERT_TRUE(r.found) << log;
  EXPECT_EQ(r.spill_store_bytes, 0) << "spill stores\n" << log;
  EXPECT_EQ(r.spill_load_bytes, 0) << "spill loads\n" << log;
  EXPECT_EQ(r.stack_bytes, 0) << "local memory stack frame\n" << log;
  EXPECT_LE(r.registers * plan.threads, 65536) << log;

  RecordProperty("compile_ms", static_cast<int>(kernel.milliseconds));
  RecordProperty("registers", r.registers);
  std::cout << "[portable-compile] " << key.name() << ": " << static_cast<int>(kernel.milliseconds) << " ms, "
            << r.registers << " registers, smem " << plan.smem_bytes << " B, tile " << plan.tile_m << "x"
            << plan.tile_n << "\n";
}

INSTANTIATE_TEST_SUITE_P(Configs, PortableCompile, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<CompileCase>& info) { return info.param.key().name(); });

// The combine kernel (split-KV's merge and Attention::merge) for every dv, both state types, with and without
// the LSE, without spills.
TEST(PortableCompile, CombineKernelsBuildWithoutSpills) {
  for (int dv : {32, 64, 96, 128, 192, 256})
    for (bool f32 : {false, true})
      for (bool lse : {false, true}) {
        KernelKey attention;
        attention.dtype = dv == 96 ? DType::fp16 : DType::bf16;
        attention.head_dim_v = dv;
        attention.lse = lse;
        const KernelKey key = combine_key(attention, 90, f32);
        SCOPED_TRACE(key.name());
        std::vector<std::string> options = compile_options(key);
        options.push_back("--ptxas-options=--verbose");
        const CompiledKernel kernel = nvrtc_compile(assemble_source(make_plan(key)), options, key.name(), "");
        const ResourceUsage r = parse_ptxas_report(kernel.log);
        ASSERT_TRUE(r.found) << kernel.log;
        EXPECT_EQ(r.spill_store_bytes + r.spill_load_bytes, 0) << kernel.log;
      }
}

// The test oracles of test_portable_attention.cpp: the GPU reference kernel compiles for the GPUs the
// suite runs on, and the CPU reference gets known answers and treats strides and GQA consistently.
TEST(PortableReference, GpuReferenceKernelCompiles) {
  for (const char* target : {"sm_80", "sm_90", "sm_100"})
    EXPECT_FALSE(test::jit_compile(test::test_source, "reference/attention_ref.cu", target).empty()) << target;
}

using test::RefProblem;
using test::RefResult;
using test::reference_attention_cpu;

RefProblem tiny(int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal) {
  RefProblem p;
  p.seqlen_q = sq, p.seqlen_k = sk, p.heads_q = hq, p.heads_kv = hkv, p.head_dim = p.head_dim_v = d;
  p.causal = causal;
  p.scale = 0.5;
  p.q = {sq * hq * d, hq * d, d};
  p.k = p.v = {sk * hkv * d, hkv * d, d};
  return p;
}

std::vector<uint16_t> halves(std::initializer_list<float> values) {
  std::vector<uint16_t> out;
  for (float f : values) out.push_back(test::to_half(DType::bf16, f));
  return out;
}

TEST(PortableReference, CpuReferenceKnownAnswers) {
  // One key: O is its V row, LSE the scaled logit.
  const auto q = halves({1, 2}), k = halves({3, -1}), v = halves({0.5f, -4});
  RefResult r = reference_attention_cpu(tiny(1, 1, 1, 1, 2, false), q.data(), k.data(), v.data());
  EXPECT_EQ(r.o, (std::vector<double>{0.5, -4}));
  EXPECT_DOUBLE_EQ(r.lse[0], 0.5 * (3 - 2));
  EXPECT_DOUBLE_EQ(r.max_abs_logit, 1);

  // Two equal keys: the mean of the V rows, LSE + ln 2.
  const auto k2 = halves({3, -1, 3, -1}), v2 = halves({1, 2, 3, 6});
  r = reference_attention_cpu(tiny(1, 2, 1, 1, 2, false), q.data(), k2.data(), v2.data());
  EXPECT_EQ(r.o, (std::vector<double>{2, 4}));
  EXPECT_NEAR(r.lse[0], 0.5 + std::log(2.0), 1e-12);

  // Causal, bottom-right, 3 queries over 1 key: rows 0 and 1 see nothing (O = 0, LSE = -inf).
  const auto q3 = halves({1, 2, 1, 2, 1, 2});
  r = reference_attention_cpu(tiny(3, 1, 1, 1, 2, true), q3.data(), k.data(), v.data());
  EXPECT_EQ(r.o, (std::vector<double>{0, 0, 0, 0, 0.5, -4}));
  EXPECT_TRUE(std::isinf(r.lse[0]) && r.lse[0] < 0);
  EXPECT_TRUE(std::isinf(r.lse[1]) && r.lse[1] < 0);
  EXPECT_DOUBLE_EQ(r.lse[2], 0.5);
}

TEST(PortableReference, CpuReferenceStridesAndGqaAreConsistent) {
  const int64_t b = 2, sq = 5, sk = 7, hq = 4, hkv = 2, d = 8;
  RefProblem p = tiny(sq, sk, hq, hkv, d, true);
  p.batch = b;
  p.q = {sq * hq * d, hq * d, d};
  p.k = p.v = {sk * hkv * d, hkv * d, d};
  const auto q = test::random_halves(DType::bf16, b * sq * hq * d, 1.f, 1);
  const auto k = test::random_halves(DType::bf16, b * sk * hkv * d, 1.f, 2);
  const auto v = test::random_halves(DType::bf16, b * sk * hkv * d, 1.f, 3);
  const RefResult base = reference_attention_cpu(p, q.data(), k.data(), v.data());

  // The same tensors stored head-major [b, h, s, d].
  auto head_major = [&](const std::vector<uint16_t>& x, int64_t s, int64_t h) {
    std::vector<uint16_t> out(x.size());
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t si = 0; si < s; ++si)
        for (int64_t hi = 0; hi < h; ++hi)
          for (int64_t j = 0; j < d; ++j) out[((bi * h + hi) * s + si) * d + j] = x[((bi * s + si) * h + hi) * d + j];
    return out;
  };
  RefProblem hm = p;
  hm.q = {hq * sq * d, d, sq * d};
  hm.k = hm.v = {hkv * sk * d, d, sk * d};
  const auto qh = head_major(q, sq, hq), kh = head_major(k, sk, hkv), vh = head_major(v, sk, hkv);
  const RefResult strided = reference_attention_cpu(hm, qh.data(), kh.data(), vh.data());
  EXPECT_EQ(strided.o, base.o);
  EXPECT_EQ(strided.lse, base.lse);

  // GQA 2 equals plain attention over K/V heads repeated per q head (kv head = h / 2).
  RefProblem mha = p;
  mha.heads_kv = hq;
  mha.k = mha.v = {sk * hq * d, hq * d, d};
  std::vector<uint16_t> k4(b * sk * hq * d), v4(k4.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t si = 0; si < sk; ++si)
      for (int64_t hi = 0; hi < hq; ++hi)
        for (int64_t j = 0; j < d; ++j) {
          k4[((bi * sk + si) * hq + hi) * d + j] = k[((bi * sk + si) * hkv + hi / 2) * d + j];
          v4[((bi * sk + si) * hq + hi) * d + j] = v[((bi * sk + si) * hkv + hi / 2) * d + j];
        }
  const RefResult expanded = reference_attention_cpu(mha, q.data(), k4.data(), v4.data());
  EXPECT_EQ(expanded.o, base.o);
  EXPECT_EQ(expanded.lse, base.lse);
}

}  // namespace
}  // namespace fa4::detail
