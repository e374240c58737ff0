// The C ABI's serving calls on a GPU: each gives the bits the C++ API gives for the same call (so every field
// crosses the ABI), fa4_workspace_size the same bytes, and a short workspace a typed error that writes
// nothing. The numbers themselves are checked against references by test_serving.cpp and the Python tests.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "fa4/fa4.h"
#include "test_util.hpp"

namespace fa4::test {
namespace {

// A handle, destroyed at the end of the test.
struct Handle {
  fa4_attention* h = nullptr;
  Handle() { EXPECT_EQ(fa4_create(&h), FA4_OK) << fa4_last_error(); }
  ~Handle() { fa4_destroy(h); }
};

// Paged decode: 3 sequences of 1 query token over 4000, 70 and 1500 keys in shuffled 64-key pages, 8 q heads
// over 2 kv heads, d 128, with its LSE; num_splits 0 (the library cuts the long ones given a workspace).
struct PagedDecode {
  static constexpr int kBatch = 3, kHq = 8, kHkv = 2, kD = 128, kPage = 64, kMaxPages = 63;
  const std::vector<int> used = {4000, 70, 1500};
  DeviceBuffer q, k, v, o, lse, table, seqused;
  fa4_params params{};
  fa4_serving serving{};

  PagedDecode() {
    const int pages = kBatch * kMaxPages;
    std::vector<int> order(pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(5));
    q = DeviceBuffer(size_t{kBatch} * kHq * kD * 2);
    k = DeviceBuffer(size_t{pages} * kPage * kHkv * kD * 2);
    v = DeviceBuffer(k.bytes());
    o = DeviceBuffer(q.bytes());
    lse = DeviceBuffer(size_t{kBatch} * kHq * 4);
    table = DeviceBuffer(order.size() * 4);
    seqused = DeviceBuffer(used.size() * 4);
    q.upload(random_halves(DType::bf16, q.bytes() / 2, 1.f, 1));
    k.upload(random_halves(DType::bf16, k.bytes() / 2, 1.f, 2));
    v.upload(random_halves(DType::bf16, v.bytes() / 2, 1.f, 3));
    table.upload(order);
    seqused.upload(used);
    poison();
    params.q = q.get(), params.k = k.get(), params.v = v.get(), params.o = o.get();
    params.lse = static_cast<float*>(lse.get()), params.return_lse = 1;
    params.batch = kBatch, params.seqlen_q = 1, params.seqlen_k = *std::max_element(used.begin(), used.end());
    params.heads_q = kHq, params.heads_kv = kHkv, params.head_dim = kD, params.dtype = FA4_DTYPE_BF16;
    serving.struct_size = sizeof(fa4_serving);
    serving.seqused_k = static_cast<const int32_t*>(seqused.get());
    serving.page_table = static_cast<const int32_t*>(table.get());
    serving.page_size = kPage, serving.num_pages = pages, serving.max_pages_per_seq = kMaxPages;
  }
  void poison() {
    o.fill_bytes(0xff);
    lse.fill_bytes(0xff);
  }
  // The same call through the C++ API.
  AttentionParams cpp() const {
    AttentionParams p;
    p.q = params.q, p.k = params.k, p.v = params.v, p.o = params.o, p.lse = params.lse, p.return_lse = true;
    p.batch = params.batch, p.seqlen_q = params.seqlen_q, p.seqlen_k = params.seqlen_k;
    p.heads_q = params.heads_q, p.heads_kv = params.heads_kv, p.head_dim = params.head_dim;
    p.seqused_k = serving.seqused_k, p.page_table = serving.page_table, p.page_size = serving.page_size;
    p.num_pages = serving.num_pages, p.max_pages_per_seq = serving.max_pages_per_seq;
    p.num_splits = serving.num_splits, p.workspace = serving.workspace, p.workspace_bytes = serving.workspace_bytes;
    return p;
  }
  std::vector<uint16_t> output() const { return o.download<uint16_t>(o.bytes() / 2); }
  std::vector<float> lse_values() const { return lse.download<float>(lse.bytes() / 4); }
};

bool untouched(const std::vector<uint16_t>& o) {
  return std::all_of(o.begin(), o.end(), [](uint16_t x) { return x == 0xffff; });
}

TEST(CApiServing, PagedSplitDecodeGivesTheCppBitsAndWorkspaceSize) {
  FA4_REQUIRE_GPU();
  PrimaryContext context;
  Handle handle;
  Attention attention;
  PagedDecode d;
  size_t bytes = 0;
  ASSERT_EQ(fa4_workspace_size(handle.h, &d.params, &d.serving, &bytes), FA4_OK) << fa4_last_error();
  EXPECT_EQ(bytes, attention.workspace_size(d.cpp()));
  ASSERT_GT(bytes, 0u) << "a 4000-key decode with num_splits 0 should be cut";
  DeviceBuffer workspace(bytes);
  d.serving.workspace = workspace.get(), d.serving.workspace_bytes = bytes;

  ASSERT_EQ(fa4_run_serving(handle.h, &d.params, &d.serving, nullptr), FA4_OK) << fa4_last_error();
  FA4_CU(cuCtxSynchronize());
  const std::vector<uint16_t> c_out = d.output();
  const std::vector<float> c_lse = d.lse_values();
  EXPECT_FALSE(std::any_of(c_out.begin(), c_out.end(), [](uint16_t x) { return x == 0xffff; })) << "O not fully written";
  d.poison();
  attention.run(d.cpp(), nullptr);
  FA4_CU(cuCtxSynchronize());
  EXPECT_EQ(d.output(), c_out) << "fa4_run_serving and Attention::run differ";
  const std::vector<float> cpp_lse = d.lse_values();
  EXPECT_EQ(0, std::memcmp(cpp_lse.data(), c_lse.data(), c_lse.size() * 4)) << "the LSEs differ";
}

TEST(CApiServing, ShortWorkspaceIsATypedErrorAndWritesNothing) {
  FA4_REQUIRE_GPU();
  PrimaryContext context;
  Handle handle;
  PagedDecode d;
  size_t bytes = 0;
  ASSERT_EQ(fa4_workspace_size(handle.h, &d.params, &d.serving, &bytes), FA4_OK) << fa4_last_error();
  ASSERT_GT(bytes, 256u);
  DeviceBuffer workspace(bytes);
  d.serving.workspace = workspace.get(), d.serving.workspace_bytes = bytes - 256;
  EXPECT_EQ(fa4_run_serving(handle.h, &d.params, &d.serving, nullptr), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(fa4_last_error()).rfind("workspace_bytes: ", 0), 0u) << fa4_last_error();
  FA4_CU(cuCtxSynchronize());
  EXPECT_TRUE(untouched(d.output())) << "O was written although the call failed";
}

// serving NULL and fa4_run: the same dense call, the same bits.
TEST(CApiServing, NullServingRunsTheDenseCall) {
  FA4_REQUIRE_GPU();
  PrimaryContext context;
  Handle handle;
  PagedDecode d;
  DeviceBuffer k(size_t{PagedDecode::kBatch} * 300 * PagedDecode::kHkv * PagedDecode::kD * 2);
  k.upload(random_halves(DType::bf16, k.bytes() / 2, 1.f, 9));
  fa4_params p = d.params;
  p.k = p.v = k.get();
  p.seqlen_q = 1, p.seqlen_k = 300;
  ASSERT_EQ(fa4_run(handle.h, &p, nullptr), FA4_OK) << fa4_last_error();
  FA4_CU(cuCtxSynchronize());
  const std::vector<uint16_t> dense = d.output();
  EXPECT_FALSE(untouched(dense));
  d.poison();
  ASSERT_EQ(fa4_run_serving(handle.h, &p, nullptr, nullptr), FA4_OK) << fa4_last_error();
  FA4_CU(cuCtxSynchronize());
  EXPECT_EQ(d.output(), dense);
}

// fa4_merge of two states gives the bits of Attention::merge.
TEST(CApiServing, MergeGivesTheCppBits) {
  FA4_REQUIRE_GPU();
  PrimaryContext context;
  Handle handle;
  Attention attention;
  const int b = 2, s = 17, h = 4, dv = 128;
  const size_t n = size_t{b} * s * h * dv, nl = size_t{b} * h * s;
  DeviceBuffer o[2] = {DeviceBuffer(n * 2), DeviceBuffer(n * 2)}, lse[2] = {DeviceBuffer(nl * 4), DeviceBuffer(nl * 4)};
  for (int i = 0; i < 2; ++i) {
    o[i].upload(random_halves(DType::bf16, n, 1.f, 10 + i));
    std::vector<float> l(nl);
    std::mt19937 rng(20 + i);
    for (float& x : l) x = std::uniform_real_distribution<float>(-3.f, 3.f)(rng);
    lse[i].upload(l);
  }
  DeviceBuffer out(n * 2), out_lse(nl * 4);
  out.fill_bytes(0xff);
  out_lse.fill_bytes(0xff);
  const fa4_merge_state states[2] = {{o[0].get(), static_cast<const float*>(lse[0].get())},
                                     {o[1].get(), static_cast<const float*>(lse[1].get())}};
  fa4_merge_params m{};
  m.struct_size = sizeof(fa4_merge_params);
  m.num_states = 2, m.states = states;
  m.o = out.get(), m.lse = static_cast<float*>(out_lse.get());
  m.batch = b, m.seqlen = s, m.heads = h, m.head_dim_v = dv, m.dtype = FA4_DTYPE_BF16;
  ASSERT_EQ(fa4_merge(handle.h, &m, nullptr), FA4_OK) << fa4_last_error();
  FA4_CU(cuCtxSynchronize());
  const std::vector<uint16_t> c_out = out.download<uint16_t>(n);
  const std::vector<float> c_lse = out_lse.download<float>(nl);
  EXPECT_FALSE(untouched(c_out));
  out.fill_bytes(0xff);
  out_lse.fill_bytes(0xff);
  MergeParams cpp;
  cpp.states = {{states[0].o, states[0].lse}, {states[1].o, states[1].lse}};
  cpp.o = m.o, cpp.lse = m.lse, cpp.batch = b, cpp.seqlen = s, cpp.heads = h, cpp.head_dim_v = dv;
  attention.merge(cpp, nullptr);
  FA4_CU(cuCtxSynchronize());
  EXPECT_EQ(out.download<uint16_t>(n), c_out);
  const std::vector<float> cpp_lse = out_lse.download<float>(nl);
  EXPECT_EQ(0, std::memcmp(cpp_lse.data(), c_lse.data(), nl * 4));
}

}  // namespace
}  // namespace fa4::test
