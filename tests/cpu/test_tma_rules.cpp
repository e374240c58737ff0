// The TMA encode rules are checked on the host, with an error naming the tensor, field and rule.
#include <gtest/gtest.h>

#include "fa4/error.hpp"
#include "runtime/tma.hpp"

namespace fa4::detail {
namespace {

TmaTensor valid_tensor() {
  TmaTensor t;
  t.ptr = reinterpret_cast<const void*>(0x10000000);
  t.batch = 2;
  t.seq = 1000;
  t.heads = 8;
  t.dim = 128;
  t.head_stride = 128;
  t.seq_stride = 8 * 128;
  t.batch_stride = 1000 * 8 * 128;
  t.name = "k";
  return t;
}

void expect_rule(const TmaTensor& t, const TmaBoxSpec& box, const std::string& part) {
  try {
    check_tma_rules(t, box);
    ADD_FAILURE() << "expected a TMA rule error containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("k: TMA ", 0), 0u) << what;
    EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

TEST(TmaRules, AcceptsTheAttentionBoxes) {
  EXPECT_NO_THROW(check_tma_rules(valid_tensor(), {64, 128, 128}));
  EXPECT_NO_THROW(check_tma_rules(valid_tensor(), {32, 128, 64}));
  EXPECT_NO_THROW(check_tma_rules(valid_tensor(), {128, 64, 0}));
}

TEST(TmaRules, ColumnBoxesCoverTheWholeRow) {
  EXPECT_NO_THROW(check_tma_rules(valid_tensor(), {64, 16, 128, 1, 2}));
  expect_rule(valid_tensor(), {64, 16, 128, 1, 3}, "col_boxes must be 1, or head dim / box_cols (128 / 64)");
  expect_rule(valid_tensor(), {32, 16, 64, 1, 2}, "col_boxes must be 1, or head dim / box_cols (128 / 32)");
  TmaTensor grouped = valid_tensor();
  grouped.heads_per_group = 4;
  expect_rule(grouped, {64, 16, 128, 1, 2}, "on a map without head groups");
}

TEST(TmaRules, MisalignedAddress) {
  TmaTensor t = valid_tensor();
  t.ptr = reinterpret_cast<const void*>(0x10000008);
  expect_rule(t, {64, 128, 128}, "global address must be 16-byte aligned");
}

TEST(TmaRules, StrideNotMultipleOf16Bytes) {
  TmaTensor t = valid_tensor();
  t.seq_stride = 8 * 128 + 4;
  expect_rule(t, {64, 128, 128}, "seq_stride must be a positive multiple of 16 bytes");
}

TEST(TmaRules, StrideTooLarge) {
  TmaTensor t = valid_tensor();
  t.batch_stride = int64_t{1} << 39;
  expect_rule(t, {64, 128, 128}, "below 2^40");
}

TEST(TmaRules, UnitDimensionsIgnoreTheirStride) {
  TmaTensor t = valid_tensor();
  t.batch = 1;
  t.batch_stride = 3;  // never stepped
  EXPECT_NO_THROW(check_tma_rules(t, {64, 128, 128}));
}

TEST(TmaRules, BoxDims) {
  expect_rule(valid_tensor(), {64, 300, 128}, "box dims must be in [1, 256]");
  expect_rule(valid_tensor(), {0, 128, 128}, "box dims must be in [1, 256]");
}

TEST(TmaRules, InnerBoxBytes) {
  expect_rule(valid_tensor(), {12, 128, 0}, "multiple of 16");
  expect_rule(valid_tensor(), {128, 128, 128}, "must not exceed the 128-byte swizzle span");
  expect_rule(valid_tensor(), {64, 128, 64}, "must not exceed the 64-byte swizzle span");
}

TEST(TmaRules, SwizzleMode) { expect_rule(valid_tensor(), {64, 128, 96}, "swizzle must be 0, 32, 64 or 128"); }

TEST(TmaRules, GlobalDims) {
  TmaTensor t = valid_tensor();
  t.seq = 0;
  expect_rule(t, {64, 128, 128}, "global seq must be in [1, 2^32]");
}

}  // namespace
}  // namespace fa4::detail
