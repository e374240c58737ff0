// Source assembly (embedded kernel_src, generated preamble, include inlining) and NVRTC error reporting.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fa4/fa4.hpp"
#include "runtime/codegen.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/backend.hpp"
#include "test_util.hpp"

namespace fa4::detail {
namespace {

KernelKey key_of(Backend backend, int arch, int d, bool causal) {
  KernelConfig c;
  c.backend = backend;
  c.head_dim = d;
  c.causal = causal;
  return key_for_config(c, arch);
}

TEST(Codegen, EmbeddedSourcesArePresent) {
  EXPECT_NE(embedded_source("common/params.h").find("struct AttentionArgs"), std::string_view::npos);
  EXPECT_THROW(embedded_source("no/such/file.cuh"), Error);
}

TEST(Codegen, NvrtcVersionIsMajorMinor) {
  const std::string v = nvrtc_version();
  EXPECT_NE(v.find('.'), std::string::npos) << v;
}

TEST(Codegen, AssemblyIsDeterministicSelfContainedAndInlinesEachFileOnce) {
  for (Backend backend : {Backend::portable, Backend::sm100}) {
    const Plan plan = make_plan(key_of(backend, 100, 128, true));
    const std::string a = assemble_source(plan), b = assemble_source(make_plan(plan.key));
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.find("#include"), std::string::npos) << "every include must be inlined";
    EXPECT_EQ(a.find("#pragma once"), std::string::npos);
    size_t count = 0;
    for (size_t at = a.find("#line 1 \"common/params.h\""); at != std::string::npos;
         at = a.find("#line 1 \"common/params.h\"", at + 1))
      ++count;
    EXPECT_EQ(count, 1u) << "common/params.h must be inlined exactly once";
    EXPECT_EQ(a.rfind(generate_preamble(plan), 0), 0u) << "the source starts with the Plan's preamble";
  }
}

TEST(Codegen, PreambleCarriesThePlan) {
  const Plan plan = make_plan(key_of(Backend::sm100, 100, 96, false));
  const std::string pre = generate_preamble(plan);
  EXPECT_NE(pre.find("constexpr int kHeadDim = 96;"), std::string::npos) << pre;
  EXPECT_NE(pre.find("constexpr int kKvStages = " + std::to_string(plan.kv_stages) + ";"), std::string::npos);
  for (const BarrierSpec& b : plan.barriers)
    EXPECT_NE(pre.find("kBar" + b.name + "Arrivals = " + std::to_string(b.arrivals) + ";"), std::string::npos) << b.name;
  for (const TmemRegion& r : plan.tmem)
    EXPECT_NE(pre.find("kTmem" + r.name + "Col = " + std::to_string(r.first_column) + ";"), std::string::npos) << r.name;
}

TEST(Codegen, DifferentKeysGiveDifferentSources) {
  const std::string a = assemble_source(make_plan(key_of(Backend::portable, 90, 128, false)));
  const std::string b = assemble_source(make_plan(key_of(Backend::portable, 90, 128, true)));
  const std::string c = assemble_source(make_plan(key_of(Backend::portable, 90, 64, false)));
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

TEST(Codegen, CompileErrorCarriesTheFullLogAndDumpsSourceAndLog) {
  test::TempDir dump;
  const std::string source = "extern \"C\" __global__ void broken() { int x = undefined_symbol_fa4; }\n";
  try {
    nvrtc_compile(source, compile_options_for_target("sm_90"), "broken_kernel", dump.path());
    FAIL() << "a broken kernel must not compile";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::compile_error);
    EXPECT_NE(std::string(e.what()).find("undefined_symbol_fa4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--gpu-architecture=sm_90"), std::string::npos) << e.what();
  }
  std::ifstream cu(dump.path() + "/broken_kernel.cu"), log(dump.path() + "/broken_kernel.log");
  ASSERT_TRUE(cu && log);
  const std::string cu_text((std::istreambuf_iterator<char>(cu)), {}), log_text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_EQ(cu_text, source);
  EXPECT_NE(log_text.find("undefined_symbol_fa4"), std::string::npos);
}

}  // namespace
}  // namespace fa4::detail
