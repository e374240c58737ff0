// The sm100 primitives compile with NVRTC for both implementations, with no GPU: the tcgen05 GEMM test
// kernel for sm_100a (real PTX) and sm_90a (emulation), the wgmma cross-check for sm_90a, the TMA probe
// and the fault probes; the target alone picks the implementation.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fa4/error.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

// Every emulator fault message starts with this text; it is in a cubin exactly when the emulation is.
const std::string kEmulationMarker = "fa4 tcgen05 emulation fault";

bool contains(const std::vector<char>& blob, const std::string& text) {
  return std::search(blob.begin(), blob.end(), text.begin(), text.end()) != blob.end();
}

TEST(Sm100Compile, GemmKernelCompilesNativeForSm100a) {
  const std::vector<char> cubin = jit_compile(test_source, "probe/tcgen05_gemm.cu", "sm_100a");
  EXPECT_GT(cubin.size(), 1000u);
  EXPECT_FALSE(contains(cubin, kEmulationMarker)) << "sm_100a must use the real tcgen05 instructions";
}

TEST(Sm100Compile, GemmKernelCompilesNativeForTheSm100Family) {
  EXPECT_FALSE(contains(jit_compile(test_source, "probe/tcgen05_gemm.cu", "sm_100f"), kEmulationMarker));
}

TEST(Sm100Compile, GemmKernelCompilesEmulatedForSm90a) {
  std::string log;
  const std::vector<char> cubin = jit_compile(test_source, "probe/tcgen05_gemm.cu", "sm_90a", "", &log);
  EXPECT_TRUE(contains(cubin, kEmulationMarker)) << "sm_90a must use the emulation";
  EXPECT_EQ(log.find("warning"), std::string::npos) << log;
}

TEST(Sm100Compile, WgmmaCrossCheckCompilesForSm90a) {
  EXPECT_TRUE(contains(jit_compile(test_source, "probe/wgmma_compare.cu", "sm_90a"), kEmulationMarker));
}

TEST(Sm100Compile, FaultAndTmaProbesCompile) {
  EXPECT_TRUE(contains(jit_compile(test_source, "probe/tcgen05_faults.cu", "sm_90a"), kEmulationMarker));
  EXPECT_FALSE(contains(jit_compile(test_source, "probe/tcgen05_faults.cu", "sm_100a"), kEmulationMarker));
  EXPECT_GT(jit_compile(test_source, "probe/tma_probe.cu", "sm_90a").size(), 0u);
  EXPECT_GT(jit_compile(test_source, "probe/tma_probe.cu", "sm_100a").size(), 0u);
}

TEST(Sm100Compile, TargetsWithoutTcgen05OrItsEmulationAreRejected) {
  try {
    jit_compile(test_source, "probe/tcgen05_gemm.cu", "sm_80");
    ADD_FAILURE() << "sm_80 must not compile the sm100 primitives";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::compile_error);
    EXPECT_NE(std::string(e.what()).find("compile for sm_100a (native tcgen05) or sm_90a (emulation)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fa4::test
