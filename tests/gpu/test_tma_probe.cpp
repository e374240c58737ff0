// TMA on the device against the host model: the probe kernel (tests/kernels/probe/tma_probe.cu) loads one
// swizzled box of a [batch, seq, head, dim] tensor through a descriptor from runtime/tma.hpp and returns
// the raw shared-memory bytes; every byte must equal the element the swizzle model (tma_box_offset in
// kernel_src/sm100/descriptors.h) puts there, and rows past seqlen must be zero-filled (the shared memory
// was poisoned with 0xA5 first, so a skipped write shows). The box is then TMA-stored into a second
// tensor: exactly the in-bounds part of the box must change (rows past seqlen are clipped). Also
// elect.sync and named barriers (ptx_sync_probe).
#include <sstream>

#include "verify/jit_module.hpp"
#include "tests/kernels/probe/sm100_probe.h"
#include "kernel_src/sm100/descriptors.h"
#include "runtime/tma.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

struct BoxCase {
  int swizzle;  // bytes: 128, 64, 32
  int box_rows;
  int c_dim, c_head, c_seq, c_batch;  // TMA coordinates {dim, head, seq, batch}
};

// sm_90a or sm_100a (whichever the device runs); the probe uses only TMA and mbarriers.
std::string device_target(CUdevice dev) { return "sm_" + std::to_string(detail::device_arch(dev)) + "a"; }

TEST(TmaProbe, SwizzledBoxesMatchTheHostModelByteForByte) {
  FA4_REQUIRE_GPU();
  PrimaryContext ctx;
  const std::string target = device_target(ctx.device());
  if (target != "sm_90a" && target != "sm_100a") GTEST_SKIP() << "SKIPPED: TMA probe needs sm_90 or sm_100, got " << target;
  const JitModule module(test_source, "probe/tma_probe.cu", target);

  // Tensor [batch 2, seq 100, heads 3, dim 128]; rows >= 100 of a box are out of bounds.
  const int batch = 2, seq = 100, heads = 3, dim = 128;
  for (DType dtype : {DType::bf16, DType::fp16}) {
    const std::vector<uint16_t> host = random_halves(dtype, static_cast<size_t>(batch) * seq * heads * dim, 1.f, 11);
    DeviceBuffer dev(host.size() * 2);
    dev.upload(host);
    detail::TmaTensor t;
    t.ptr = dev.get();
    t.batch = batch;
    t.seq = seq;
    t.heads = heads;
    t.dim = dim;
    t.head_stride = dim;
    t.seq_stride = heads * dim;
    t.batch_stride = static_cast<int64_t>(seq) * heads * dim;
    t.dtype = dtype;
    t.name = "probe";

    const BoxCase cases[] = {
        {128, 128, 64, 2, 0, 1},  // 64 x 128 box, rows 100..127 out of bounds
        {128, 128, 0, 0, 40, 1},  // starts mid-sequence: rows 60..127 of the box out of bounds
        {128, 256, 0, 1, 0, 0},   // the largest box
        {64, 64, 32, 1, 64, 0},   // 64B swizzle (head dim 96-style boxes of 32 elements)
        {64, 128, 96, 2, 0, 1},
        {32, 64, 16, 0, 8, 1},    // 32B swizzle
    };
    for (const BoxCase& c : cases) {
      std::ostringstream name;
      name << (dtype == DType::bf16 ? "bf16" : "fp16") << " swizzle " << c.swizzle << " box " << c.swizzle / 2 << "x"
           << c.box_rows << " at {dim " << c.c_dim << ", head " << c.c_head << ", seq " << c.c_seq << ", batch "
           << c.c_batch << "}";
      SCOPED_TRACE(name.str());
      const int row_bytes = c.swizzle;
      const unsigned box_bytes = static_cast<unsigned>(row_bytes * c.box_rows);
      ASSERT_LE(box_bytes, fa4probe::kTmaProbeMaxBoxBytes);
      const CUtensorMap map = detail::make_tma_descriptor(t, {c.swizzle / 2, c.box_rows, c.swizzle});
      // The store target: same shape, filled with 0x5A, plus a guard region after it.
      const size_t tensor_bytes = host.size() * 2, guard_bytes = 4096;
      DeviceBuffer stored(tensor_bytes + guard_bytes);
      stored.fill_bytes(0x5a);
      detail::TmaTensor st = t;
      st.ptr = stored.get();
      st.name = "probe_store";
      const CUtensorMap store_map = detail::make_tma_descriptor(st, {c.swizzle / 2, c.box_rows, c.swizzle});
      DeviceBuffer out(box_bytes);
      out.fill_bytes(0x5a);
      void* out_ptr = out.get();
      int c_dim = c.c_dim, c_head = c.c_head, c_seq = c.c_seq, c_batch = c.c_batch, store = 1;
      unsigned bytes = box_bytes;
      void* params[] = {const_cast<CUtensorMap*>(&map), const_cast<CUtensorMap*>(&store_map), &out_ptr, &c_dim,
                        &c_head, &c_seq, &c_batch, &bytes, &store};
      JitModule::launch(module.function("tma_probe"), 1, 128, fa4probe::kTmaProbeSmemBytes, params);
      FA4_CU(cuCtxSynchronize());
      const std::vector<uint8_t> got = out.download<uint8_t>(box_bytes);

      // Model: byte b of box row r (element c_dim + b/2 of sequence row c_seq + r) sits at
      // tma_box_offset(r, b); rows past seqlen are zero.
      std::vector<int> expected(box_bytes, -1);
      for (int r = 0; r < c.box_rows; ++r)
        for (int b = 0; b < row_bytes; ++b) {
          const int s = c.c_seq + r, d = c.c_dim + b / 2;
          int value = 0;
          if (s < seq && d < dim) {
            const uint16_t e = host[((static_cast<size_t>(c.c_batch) * seq + s) * heads + c.c_head) * dim + d];
            value = b % 2 ? e >> 8 : e & 0xff;
          }
          const unsigned at = sm100::tma_box_offset(r, b, row_bytes, sm100::swizzle_from_bytes(c.swizzle));
          ASSERT_LT(at, box_bytes);
          ASSERT_EQ(expected[at], -1) << "the model maps two bytes to offset " << at;
          expected[at] = value;
        }
      int differ = 0;
      std::ostringstream bad;
      for (unsigned i = 0; i < box_bytes; ++i)
        if (got[i] != expected[i]) {
          if (differ < 8)
            bad << "\n  smem byte " << i << " (row " << i / row_bytes << ", chunk " << (i % row_bytes) / 16 << "): got 0x"
                << std::hex << int(got[i]) << " want 0x" << expected[i] << std::dec;
          ++differ;
        }
      EXPECT_EQ(differ, 0) << differ << " of " << box_bytes << " bytes differ" << bad.str();

      // The store wrote exactly the in-bounds part of the box.
      const std::vector<uint16_t> after = stored.download<uint16_t>((tensor_bytes + guard_bytes) / 2);
      int wrong = 0;
      std::ostringstream bad_store;
      for (size_t i = 0; i < after.size(); ++i) {
        uint16_t want = 0x5a5a;
        if (i < host.size()) {
          const int d = static_cast<int>(i % dim), h = static_cast<int>(i / dim % heads);
          const int s = static_cast<int>(i / (static_cast<size_t>(dim) * heads) % seq);
          const int bt = static_cast<int>(i / (static_cast<size_t>(dim) * heads * seq));
          if (bt == c.c_batch && h == c.c_head && s >= c.c_seq && s < c.c_seq + c.box_rows && d >= c.c_dim &&
              d < c.c_dim + c.swizzle / 2)
            want = host[i];
        }
        if (after[i] != want) {
          if (wrong < 8) bad_store << "\n  element " << i << ": got 0x" << std::hex << after[i] << " want 0x" << want << std::dec;
          ++wrong;
        }
      }
      EXPECT_EQ(wrong, 0) << "TMA store: " << wrong << " elements differ (guard and clipped rows must stay 0x5a5a)"
                          << bad_store.str();
    }
  }
}

TEST(PtxProbe, ElectOneLanePerWarpAndNamedBarrierHandoff) {
  FA4_REQUIRE_GPU();
  PrimaryContext ctx;
  const std::string target = device_target(ctx.device());
  if (target != "sm_90a" && target != "sm_100a") GTEST_SKIP() << "SKIPPED: needs sm_90 or sm_100, got " << target;
  const JitModule module(test_source, "probe/tma_probe.cu", target);
  DeviceBuffer out((8 + 128) * 4);
  out.fill_bytes(0);
  void* out_ptr = out.get();
  int use_setmaxnreg = 0;
  void* params[] = {&out_ptr, &use_setmaxnreg};
  JitModule::launch(module.function("ptx_sync_probe"), 1, 256, 0, params);
  FA4_CU(cuCtxSynchronize());
  const std::vector<uint32_t> got = out.download<uint32_t>(8 + 128);
  for (int w = 0; w < 8; ++w) EXPECT_EQ(got[w], 1u) << "elect.sync must pick exactly one lane of warp " << w;
  for (uint32_t i = 0; i < 128; ++i) ASSERT_EQ(got[8 + i], 3 * i + 1) << "named barrier handoff, thread " << i;
}

}  // namespace
}  // namespace fa4::test
