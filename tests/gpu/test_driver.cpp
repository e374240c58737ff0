#include "test_util.hpp"

namespace fa4::test {

TEST(GpuDriver, LoadsAndReportsACuda12Point8OrNewerDriver) {
  FA4_REQUIRE_GPU();
  int version = 0;
  FA4_CU(cuDriverGetVersion(&version));
  EXPECT_GE(version, 12080) << "tcgen05/sm_100a toolchains need a CUDA 12.8+ driver";
}

}  // namespace fa4::test
