// Selection per configuration and compile targets (CPU only): the best backend that supports a
// configuration, never an error for a configuration some backend serves; sm_103 devices get a target they
// can load; every selected sm100 target compiles with the hardware tcgen05 path.
#include <gtest/gtest.h>

#include "fa4/fa4.hpp"
#include "runtime/backend.hpp"
#include "runtime/codegen.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/problem.hpp"

namespace fa4 {
namespace {

KernelConfig config(int d, int dv = 0, int q_heads_per_kv = 1) {
  KernelConfig c;
  c.head_dim = d;
  c.head_dim_v = dv;
  c.causal = true;
  c.q_heads_per_kv = q_heads_per_kv;
  return c;
}

struct FamilyTargets {  // forces the NVRTC's answer for one test
  explicit FamilyTargets(bool has) { detail::override_family_targets_for_testing(has ? 1 : 0); }
  ~FamilyTargets() { detail::override_family_targets_for_testing(-1); }
};

TEST(Selection, AutomaticPicksTheBestBackendThatSupportsTheConfiguration) {
  for (int arch : {100, 103}) {
    SCOPED_TRACE(arch);
    EXPECT_EQ(detail::key_for_config(config(128), arch).backend, Backend::sm100);
    EXPECT_EQ(detail::key_for_config(config(192, 128), arch).backend, Backend::sm100);
    EXPECT_EQ(detail::key_for_config(config(256, 256), arch).backend, Backend::sm100);  // one Q tile a CTA
    // head_dim 32 and (192,192) have no sm100 kernel: the portable kernel serves them, with the reason.
    for (auto [d, dv] : {std::pair{32, 32}, {192, 192}}) {
      const KernelKey key = detail::key_for_config(config(d, dv), arch);
      EXPECT_EQ(key.backend, Backend::portable) << d;
      EXPECT_EQ(key.arch, arch);
      EXPECT_NO_THROW(detail::make_plan(key));
      const std::string why = detail::passed_over(config(d, dv), arch);
      EXPECT_NE(why.find("sm100"), std::string::npos) << why;
      EXPECT_NE(why.find("head dims"), std::string::npos) << why;
    }
    EXPECT_EQ(detail::passed_over(config(128), arch), "");
  }
  // sm_90: the Hopper kernel for what it takes, the portable kernel for head_dim 32 and (192, 192), with the reason.
  for (auto [d, dv] : supported_head_dims()) {
    const bool sm90 = d != 32 && !(d == 192 && dv == 192);
    const KernelKey key = detail::key_for_config(config(d, dv), 90);
    EXPECT_EQ(key.backend, sm90 ? Backend::sm90 : Backend::portable) << d << "," << dv;
    EXPECT_EQ(key.target(), sm90 ? "sm_90a" : "sm_90");
    if (!sm90) EXPECT_NE(detail::passed_over(config(d, dv), 90).find("sm90"), std::string::npos);
  }
  for (int arch : {80, 86, 89, 120})
    for (auto [d, dv] : supported_head_dims()) EXPECT_EQ(detail::key_for_config(config(d, dv), arch).backend, Backend::portable);
}

TEST(Selection, EveryHeadDimIsServedOnEveryArchAutomatically) {
  for (int arch : {80, 90, 100, 103, 120})
    for (bool lse : {false, true})
      for (int qh : {1, 3, 4, 8}) {
        for (auto [d, dv] : supported_head_dims()) {
          KernelConfig c = config(d, dv, qh);
          c.lse = lse;
          const KernelKey key = detail::key_for_config(c, arch);
          std::string why;
          EXPECT_TRUE(detail::supports(key, &why)) << key.name() << ": " << why;
        }
        EXPECT_EQ(supported_configs(Backend::automatic, arch).size(), 2 * 2 * 2 * supported_head_dims().size());
      }
}

// Decode shapes (seqlen_q * q heads per kv head <= 32) select the portable decode kernel on every arch,
// packing every ratio up to 32; longer queries the prefill kernels. A decode prewarm names it.
TEST(Selection, DecodeShapesSelectTheDecodeKernel) {
  EXPECT_TRUE(decode_shape(1, 32));
  EXPECT_TRUE(decode_shape(4, 8));
  EXPECT_TRUE(decode_shape(0, 1));
  EXPECT_FALSE(decode_shape(1, 33));
  EXPECT_FALSE(decode_shape(9, 4));
  for (int arch : {80, 90, 100}) {
    SCOPED_TRACE(arch);
    for (int ratio : {1, 3, 8, 32}) {
      KernelConfig c;
      c.q_heads_per_kv = ratio;
      c.decode = true;
      const KernelKey key = detail::key_for_config(c, arch);
      EXPECT_EQ(key.backend, Backend::portable);
      EXPECT_TRUE(key.decode);
      EXPECT_EQ(key.gqa_pack, ratio);
      EXPECT_EQ(detail::make_plan(key).kernel_name, "fa4_portable_decode");
    }
    KernelConfig prefill;
    EXPECT_FALSE(detail::key_for_config(prefill, arch).decode);
  }
  KernelConfig c;
  c.decode = true;
  EXPECT_NE(detail::passed_over(c, 100).find("decode"), std::string::npos) << detail::passed_over(c, 100);
  c.q_heads_per_kv = 64;
  try {
    detail::validate_config(c);
    ADD_FAILURE() << "a decode configuration with 64 q heads per kv head was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_EQ(std::string(e.what()).rfind("decode", 0), 0u) << e.what();
  }
}

TEST(Selection, AnExplicitBackendIsTakenAsAsked) {
  KernelConfig c = config(32);  // a head dim the sm100 kernel does not take
  c.backend = Backend::sm100;
  const KernelKey key = detail::key_for_config(c, 100);
  EXPECT_EQ(key.backend, Backend::sm100);
  EXPECT_FALSE(detail::supports(key, nullptr));
  EXPECT_THROW(detail::make_plan(key), Error);
  EXPECT_EQ(detail::passed_over(c, 100), "");
}

TEST(Selection, TheFallbackOfAFastKernelIsThePortableOne) {
  const KernelKey fast = detail::key_for_config(config(128, 0, 4), 100);
  const KernelKey fallback = detail::fallback_key(fast, config(128, 0, 4), 100);
  EXPECT_EQ(fallback.backend, Backend::portable);
  EXPECT_EQ(fallback.arch, 100);
  EXPECT_EQ(fallback.gqa_pack, 4) << "the portable kernel packs the q heads of a kv head too";
  EXPECT_THROW(detail::fallback_key(fallback, config(128), 100), Error);
}

// Defect: sm_103 selected sm100 but compiled sm_100a, which does not load on 10.3. Both chips now get a
// target they can run: the family target where NVRTC has it (one cubin), else their own arch-specific one.
TEST(Selection, Sm103GetsATargetItCanLoad) {
  {
    FamilyTargets family(true);
    const KernelKey a = detail::key_for_config(config(128), 100), b = detail::key_for_config(config(128), 103);
    EXPECT_EQ(a.target(), "sm_100f");
    EXPECT_EQ(b.target(), "sm_100f");
    EXPECT_EQ(a, b) << "one family cubin serves sm_100 and sm_103";
  }
  {
    FamilyTargets specific(false);
    EXPECT_EQ(detail::key_for_config(config(128), 100).target(), "sm_100a");
    EXPECT_EQ(detail::key_for_config(config(128), 103).target(), "sm_103a");
    EXPECT_NE(detail::key_for_config(config(128), 100), detail::key_for_config(config(128), 103));
  }
  KernelConfig emulated = config(128);
  emulated.backend = Backend::sm100_emulated;
  EXPECT_EQ(detail::key_for_config(emulated, 90).target(), "sm_90a");
  EXPECT_EQ(detail::key_for_config(config(128), 90).target(), "sm_90a");
  EXPECT_EQ(detail::key_for_config(config(32), 90).target(), "sm_90");
}

// Every target selection can produce for the sm100 kernel compiles, with the hardware tcgen05 path (the
// kernel static_asserts that the implementation it got matches the Plan's kEmulated).
TEST(Selection, EverySm100TargetCompilesWithHardwareTcgen05) {
  if (!detail::nvrtc_has_family_targets()) GTEST_SKIP() << "SKIPPED: this NVRTC has no family targets";
  for (bool family : {true, false})
    for (int arch : {100, 103}) {
      FamilyTargets targets(family);
      const KernelKey key = detail::key_for_config(config(128, 0, 4), arch);
      SCOPED_TRACE(key.target());
      const detail::CompiledKernel k =
          detail::nvrtc_compile(detail::assemble_source(detail::make_plan(key)), detail::compile_options(key), key.name(), "");
      EXPECT_GT(k.cubin.size(), 1000u);
    }
}

}  // namespace
}  // namespace fa4
