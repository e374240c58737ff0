#include <gtest/gtest.h>

#include "runtime/codegen.hpp"
#include "runtime/nvrtc.hpp"

namespace fa4::detail {

TEST(Codegen, EmbeddedSourcesArePresent) {
  EXPECT_NE(embedded_source("common/params.h").find("struct AttentionArgs"), std::string_view::npos);
}

TEST(Codegen, NvrtcVersionIsMajorMinor) {
  const std::string v = nvrtc_version();
  EXPECT_NE(v.find('.'), std::string::npos) << v;
}

}  // namespace fa4::detail
