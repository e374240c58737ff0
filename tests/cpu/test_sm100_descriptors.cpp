// Host-side checks of kernel_src/sm100/descriptors.h: the instruction and shared-memory descriptor
// encodings (values from docs/blackwell-facts.md, instruction descriptor), decode round trips and every rejection, the
// swizzles, the canonical layouts (PTX ISA examples), and an address walk proving that the descriptors
// built for TMA-loaded tiles read exactly the element TMA stored, for every layout fa4 uses.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "kernel_src/sm100/descriptors.h"

namespace fa4::sm100 {
namespace {

TEST(Sm100Descriptors, InstructionDescriptorValuesFromTheFacts) {
  EXPECT_EQ(make_idesc_f16(128, 128, Format::bf16, Major::K, Major::K), 0x08200490u);   // QK
  EXPECT_EQ(make_idesc_f16(128, 128, Format::bf16, Major::K, Major::MN), 0x08210490u);  // PV, V MN-major
  EXPECT_EQ(make_idesc_f16(128, 64, Format::bf16, Major::K, Major::MN), 0x08110490u);   // PV, N = 64
  EXPECT_EQ(make_idesc_f16(128, 128, Format::f16, Major::K, Major::K), 0x08200490u & ~((1u << 7) | (1u << 10)));
  EXPECT_EQ(make_idesc_f16(64, 8, Format::bf16, Major::MN, Major::K), (1u << 4) | (1u << 7) | (1u << 10) |
                                                                         (1u << 15) | (1u << 17) | (4u << 24));
}

TEST(Sm100Descriptors, InstructionDescriptorRoundTripsEveryValidShape) {
  int count = 0;
  for (u32 m : {64u, 128u})
    for (u32 n = 8; n <= 256; n += 8)
      for (Format f : {Format::f16, Format::bf16})
        for (Major am : {Major::K, Major::MN})
          for (Major bm : {Major::K, Major::MN}) {
            const u32 idesc = make_idesc_f16(m, n, f, am, bm);
            InstrDesc d{};
            const DescError e = decode_idesc_f16(idesc, d);
            if (!valid_mma_shape(m, n)) {
              EXPECT_EQ(e, DescError::idesc_n) << m << "x" << n;
              continue;
            }
            ASSERT_EQ(e, DescError::ok) << desc_error_name(e) << " " << m << "x" << n;
            EXPECT_EQ(d.m, m);
            EXPECT_EQ(d.n, n);
            EXPECT_EQ(d.format, f);
            EXPECT_EQ(d.a_major, am);
            EXPECT_EQ(d.b_major, bm);
            EXPECT_FALSE(d.negate_a || d.negate_b);
            ++count;
          }
  EXPECT_EQ(count, (32 + 16) * 8);
  EXPECT_FALSE(valid_mma_shape(128, 8));
  EXPECT_FALSE(valid_mma_shape(128, 24));
  EXPECT_TRUE(valid_mma_shape(64, 24));
  EXPECT_FALSE(valid_mma_shape(256, 128));  // cta_group::2 only
  EXPECT_FALSE(valid_mma_shape(64, 264));
}

TEST(Sm100Descriptors, InstructionDescriptorRejectsEveryInvalidField) {
  const u32 ok = make_idesc_f16(128, 128, Format::bf16, Major::K, Major::K);
  InstrDesc d{};
  ASSERT_EQ(decode_idesc_f16(ok, d), DescError::ok);
  EXPECT_EQ(decode_idesc_f16(ok | 1u, d), DescError::idesc_sparse);
  EXPECT_EQ(decode_idesc_f16(ok | 4u, d), DescError::idesc_sparse);
  EXPECT_EQ(decode_idesc_f16(ok | 8u, d), DescError::idesc_saturate);
  EXPECT_EQ(decode_idesc_f16(ok & ~(3u << 4), d), DescError::idesc_d_format);  // F16 accumulator
  EXPECT_EQ(decode_idesc_f16(ok | (1u << 6), d), DescError::idesc_reserved_bits);
  EXPECT_EQ(decode_idesc_f16(ok | (1u << 23), d), DescError::idesc_reserved_bits);
  EXPECT_EQ(decode_idesc_f16(ok | (1u << 29), d), DescError::idesc_reserved_bits);
  EXPECT_EQ(decode_idesc_f16(ok | (1u << 30), d), DescError::idesc_max_shift);
  EXPECT_EQ(decode_idesc_f16(ok | (2u << 7), d), DescError::idesc_ab_format);   // TF32-style format 3
  EXPECT_EQ(decode_idesc_f16(ok & ~(1u << 10), d), DescError::idesc_ab_format);  // A bf16, B fp16
  EXPECT_EQ(decode_idesc_f16((ok & ~(0x1Fu << 24)) | (16u << 24), d), DescError::idesc_m);  // M = 256
  EXPECT_EQ(decode_idesc_f16((ok & ~(0x3Fu << 17)) | (3u << 17), d), DescError::idesc_n);   // N = 24, M = 128
  EXPECT_EQ(decode_idesc_f16(ok & ~(0x3Fu << 17), d), DescError::idesc_n);                  // N = 0
  EXPECT_EQ(decode_idesc_f16(ok | (1u << 13) | (1u << 14), d), DescError::ok);
  EXPECT_TRUE(d.negate_a && d.negate_b);
  for (u32 e = 0; e <= static_cast<u32>(DescError::idesc_ts_a_major); ++e)
    EXPECT_STRNE(desc_error_name(static_cast<DescError>(e)), "unknown");
}

TEST(Sm100Descriptors, SmemDescriptorFieldsAndRoundTrip) {
  // K-major 128B Q tile at 0x2400 + 32 (second K step): SBO 1024, LBO 16 (encoded 1).
  const u64 d = make_smem_desc(0x2420, 16, 1024, Swizzle::b128);
  EXPECT_EQ(d & 0x3FFF, 0x2420u >> 4);
  EXPECT_EQ((d >> 16) & 0x3FFF, 1u);
  EXPECT_EQ((d >> 32) & 0x3FFF, 64u);
  EXPECT_EQ((d >> 46) & 7, 1u);  // version 0b001
  EXPECT_EQ((d >> 49) & 0xF, 0u);
  EXPECT_EQ(d >> 61, 2u);
  EXPECT_EQ(make_smem_desc(0, 0, 0, Swizzle::b64) >> 61, 4u);
  EXPECT_EQ(make_smem_desc(0, 0, 0, Swizzle::b32) >> 61, 6u);
  EXPECT_EQ(make_smem_desc(0, 0, 0, Swizzle::none) >> 61, 0u);

  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const Swizzle sw = std::vector<Swizzle>{Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128}[rng() % 4];
    const u32 span = swizzle_span(sw);
    u32 start = (rng() % (1u << 14)) << 4;
    if (span) start = start / (8 * span) * (8 * span) + (rng() % (span / 16)) * 16;  // first row of a repeat
    const u32 lbo = (rng() % (1u << 14)) << 4, sbo = (rng() % (1u << 14)) << 4;
    SmemDesc out{};
    ASSERT_EQ(decode_smem_desc(make_smem_desc(start, lbo, sbo, sw), out), DescError::ok);
    EXPECT_EQ(out.start, start);
    EXPECT_EQ(out.lbo, lbo);
    EXPECT_EQ(out.sbo, sbo);
    EXPECT_EQ(out.swizzle, sw);
    EXPECT_EQ(out.base_offset, 0u);
    EXPECT_EQ(out.lbo_mode, 0u);
  }
  // The start field keeps address bits 17:4 only.
  EXPECT_EQ(make_smem_desc(0x40000 + 0x1230, 0, 0, Swizzle::none) & 0x3FFF, 0x123u);
}

TEST(Sm100Descriptors, SmemDescriptorRejectsEveryInvalidField) {
  const u64 ok = make_smem_desc(0x1000, 16, 1024, Swizzle::b128);
  SmemDesc d{};
  ASSERT_EQ(decode_smem_desc(ok, d), DescError::ok);
  for (int bit : {14, 15, 30, 31, 53, 56, 60})
    EXPECT_EQ(decode_smem_desc(ok | (1ull << bit), d), DescError::smem_reserved_bits) << bit;
  EXPECT_EQ(decode_smem_desc(ok & ~(1ull << 46), d), DescError::smem_version);  // a Hopper-style descriptor
  EXPECT_EQ(decode_smem_desc(ok | (1ull << 47), d), DescError::smem_version);
  EXPECT_EQ(decode_smem_desc(ok | (1ull << 48), d), DescError::smem_version);
  for (u64 layout : {3ull, 5ull, 7ull})
    EXPECT_EQ(decode_smem_desc((ok & ~(7ull << 61)) | (layout << 61), d), DescError::smem_layout_invalid);
  EXPECT_EQ(decode_smem_desc((ok & ~(7ull << 61)) | (1ull << 61), d), DescError::smem_layout_unsupported);
  EXPECT_EQ(decode_smem_desc(ok | (1ull << 49), d), DescError::smem_base_offset);
  EXPECT_EQ(decode_smem_desc(ok | (1ull << 52), d), DescError::smem_lbo_mode);
  // 128B swizzle: the start must lie in the first 128-byte row of a 1024-byte repeat.
  EXPECT_EQ(decode_smem_desc(make_smem_desc(0x1000 + 96, 16, 1024, Swizzle::b128), d), DescError::ok);
  EXPECT_EQ(decode_smem_desc(make_smem_desc(0x1000 + 128, 16, 1024, Swizzle::b128), d),
            DescError::smem_start_unaligned);
  EXPECT_EQ(decode_smem_desc(make_smem_desc(0x1000 + 64, 16, 512, Swizzle::b64), d), DescError::smem_start_unaligned);
  EXPECT_EQ(decode_smem_desc(make_smem_desc(0x1000 + 128, 16, 1024, Swizzle::none), d), DescError::ok);
}

TEST(Sm100Descriptors, WgmmaDescriptorLayoutEncoding) {
  const u64 d = make_wgmma_desc(0x2400, 16384, 1024, Swizzle::b128);
  EXPECT_EQ(d & 0x3FFF, 0x240u);
  EXPECT_EQ((d >> 16) & 0x3FFF, 1024u);
  EXPECT_EQ((d >> 32) & 0x3FFF, 64u);
  EXPECT_EQ((d >> 46) & 0x7FFF, 0u);  // no version field, base offset 0
  EXPECT_EQ(d >> 62, 1u);
  EXPECT_EQ(make_wgmma_desc(0, 0, 0, Swizzle::b64) >> 62, 2u);
  EXPECT_EQ(make_wgmma_desc(0, 0, 0, Swizzle::b32) >> 62, 3u);
  EXPECT_EQ(make_wgmma_desc(0, 0, 0, Swizzle::none) >> 62, 0u);
}

TEST(Sm100Descriptors, SwizzleIsTheXorOfRowIntoChunk) {
  // 128B: 16-byte chunk c of 128-byte row r lands at chunk c ^ (r % 8).
  for (u32 r = 0; r < 16; ++r)
    for (u32 c = 0; c < 8; ++c)
      for (u32 b = 0; b < 16; b += 5)
        EXPECT_EQ(swizzle_address(0x4000 + r * 128 + c * 16 + b, Swizzle::b128),
                  0x4000 + r * 128 + ((c ^ (r % 8)) * 16) + b);
  // 64B rows: chunk c of row r lands at c ^ ((r / 2) % 4); 32B rows: c ^ ((r / 4) % 2).
  for (u32 r = 0; r < 16; ++r)
    for (u32 c = 0; c < 4; ++c) EXPECT_EQ(tma_box_offset(r, c * 16, 64, Swizzle::b64), r * 64 + ((c ^ ((r / 2) % 4)) * 16));
  for (u32 r = 0; r < 16; ++r)
    for (u32 c = 0; c < 2; ++c) EXPECT_EQ(tma_box_offset(r, c * 16, 32, Swizzle::b32), r * 32 + ((c ^ ((r / 4) % 2)) * 16));
  EXPECT_EQ(swizzle_address(0x1234, Swizzle::none), 0x1234u);
}

TEST(Sm100Descriptors, SwizzleIsAnInvolutionAndAPermutationOfEachRepeat) {
  for (Swizzle sw : {Swizzle::b32, Swizzle::b64, Swizzle::b128}) {
    const u32 repeat = 8 * swizzle_span(sw);
    std::set<u32> seen;
    for (u32 a = 0x8000; a < 0x8000 + repeat; ++a) {
      const u32 s = swizzle_address(a, sw);
      EXPECT_EQ(swizzle_address(s, sw), a);
      EXPECT_GE(s, 0x8000u);
      EXPECT_LT(s, 0x8000u + repeat);
      EXPECT_EQ(s % 16, a % 16);  // 16-byte chunks move whole
      seen.insert(s);
    }
    EXPECT_EQ(seen.size(), repeat);
  }
}

TEST(Sm100Descriptors, CanonicalLayoutsMatchThePtxIsaExamples) {
  // PTX ISA "canonical layouts" examples for bf16 (element strides, T = 8):
  //   MN-major, none: ((8,1,2),(8,2)):((1,8,64),(8,128)), LBO = 256 B, SBO = 128 B
  //   MN-major, 32B : ((8,2,2),(8,2)):((1,8,128),(16,256)), LBO = 256 B, SBO = 512 B
  //   MN-major, 64B : ((8,4,2),(8,2)):((1,8,256),(32,512)), LBO = 512 B, SBO = 1024 B
  for (u32 mn = 0; mn < 64; ++mn)
    for (u32 k = 0; k < 16; ++k) {
      if (mn < 16)
        EXPECT_EQ(canonical_offset(Major::MN, Swizzle::none, 256, 128, mn, k),
                  2 * (mn % 8 + (mn / 8) * 64 + (k % 8) * 8 + (k / 8) * 128));
      if (mn < 32)
        EXPECT_EQ(canonical_offset(Major::MN, Swizzle::b32, 256, 512, mn, k),
                  2 * (mn % 8 + ((mn / 8) % 2) * 8 + (mn / 16) * 128 + (k % 8) * 16 + (k / 8) * 256));
      EXPECT_EQ(canonical_offset(Major::MN, Swizzle::b64, 512, 1024, mn, k),
                2 * (mn % 8 + ((mn / 8) % 4) * 8 + (mn / 32) * 256 + (k % 8) * 32 + (k / 8) * 512));
    }
  // K-major: 8-row core matrices; rows are 16 B (none) or one swizzle span; SBO between 8-row groups.
  for (u32 mn = 0; mn < 32; ++mn)
    for (u32 k = 0; k < 16; ++k) {
      EXPECT_EQ(canonical_offset(Major::K, Swizzle::none, 128, 256, mn, k),
                (mn % 8) * 16 + (mn / 8) * 256 + (k % 8) * 2 + (k / 8) * 128);
      EXPECT_EQ(canonical_offset(Major::K, Swizzle::b128, 16, 1024, mn, k), (mn % 8) * 128 + (mn / 8) * 1024 + 2 * k);
      EXPECT_EQ(canonical_offset(Major::K, Swizzle::b64, 16, 512, mn, k), (mn % 8) * 64 + (mn / 8) * 512 + 2 * k);
    }
}

TEST(Sm100Descriptors, FactsSection4TileParameters) {
  // K-major 128B: SBO = 1024; K steps of 16 at +0/+32/+64/+96 B, then the next box at +R*128 B.
  for (u32 s = 0; s < 8; ++s) {
    const OperandStep st = kmajor_step(Swizzle::b128, 128, 16 * s);
    EXPECT_EQ(st.sbo, 1024u);
    EXPECT_EQ(st.start, (s / 4) * 128 * 128 + (s % 4) * 32);
  }
  // MN-major 128B (V with 128 K rows): SBO = 1024, LBO = 128 * 128 = 16384, a K step = +2048 B.
  for (u32 s = 0; s < 8; ++s) {
    const OperandStep st = mnmajor_step(Swizzle::b128, 128, 16 * s);
    EXPECT_EQ(st.sbo, 1024u);
    EXPECT_EQ(st.lbo, 16384u);
    EXPECT_EQ(st.start, 2048u * s);
  }
  EXPECT_EQ(mnmajor_step(Swizzle::b64, 128, 16).lbo, 8192u);
  EXPECT_EQ(mnmajor_step(Swizzle::b64, 128, 16).sbo, 512u);
}

// Builds the shared-memory image TMA produces for a rows x cols tile (boxes of span/2 columns, each
// swizzled by tma_box_offset), then checks that the descriptor of every K step, decoded as the emulator
// decodes it, addresses exactly element (mn, k) for all mn and k < 16.
void check_tile_walk(Swizzle sw, bool mn_major, u32 mn_extent, u32 k_extent) {
  const u32 span = swizzle_span(sw), width = span / 2;
  const u32 rows = mn_major ? k_extent : mn_extent, cols = mn_major ? mn_extent : k_extent;
  const u32 base = 0x3000 - 0x3000 % (8 * span) + 8 * span;  // 1024-aligned like the kernels' tiles
  const u32 boxes = (cols + width - 1) / width;
  std::vector<uint32_t> smem(base + boxes * rows * span, 0xFFFFFFFFu);  // element id per byte offset
  for (u32 j = 0; j < boxes; ++j)
    for (u32 r = 0; r < rows; ++r)
      for (u32 e = 0; e < width; ++e) {
        const u32 col = j * width + e;
        const u32 id = mn_major ? col * 1000 + r : r * 1000 + col;  // (mn, k) -> mn * 1000 + k
        smem.at(base + j * rows * span + tma_box_offset(r, 2 * e, span, sw)) = id;
      }
  for (u32 s = 0; s < k_extent / 16; ++s) {
    const OperandStep st = mn_major ? mnmajor_step(sw, rows, 16 * s) : kmajor_step(sw, rows, 16 * s);
    SmemDesc d{};
    ASSERT_EQ(decode_smem_desc(make_smem_desc(base + st.start, st.lbo, st.sbo, sw), d), DescError::ok);
    for (u32 mn = 0; mn < mn_extent; ++mn)
      for (u32 k = 0; k < 16; ++k) {
        const u32 addr = operand_address(d, mn_major ? Major::MN : Major::K, mn, k);
        ASSERT_LT(addr, smem.size());
        ASSERT_EQ(smem[addr], mn * 1000 + 16 * s + k)
            << (mn_major ? "MN" : "K") << "-major span " << span << " extent " << mn_extent << "x" << k_extent
            << " step " << s << " (mn " << mn << ", k " << k << ")";
      }
  }
}

TEST(Sm100Descriptors, DescriptorsOfTmaTilesAddressEveryElement) {
  for (Swizzle sw : {Swizzle::b128, Swizzle::b64, Swizzle::b32})
    for (bool mn_major : {false, true})
      for (u32 mn : {64u, 128u, 256u})
        for (u32 k : {16u, 64u, 128u, 256u}) check_tile_walk(sw, mn_major, mn, k);
}

// The same walk over an MN-major tile that whole-row copies laid out piece by piece (pieced_mnmajor_step:
// the sm90 kernel's V slots, paged in pieces of `piece` keys): piece p holds K rows [p * piece, (p + 1) *
// piece), its boxes one after another.
void check_pieced_walk(Swizzle sw, u32 mn_extent, u32 k_extent, u32 piece) {
  const u32 span = swizzle_span(sw), width = span / 2, boxes = mn_extent / width;
  const u32 base = 8 * span * 4;
  std::vector<uint32_t> smem(base + k_extent * mn_extent * 2, 0xFFFFFFFFu);
  for (u32 r = 0; r < k_extent; ++r)
    for (u32 j = 0; j < boxes; ++j)
      for (u32 e = 0; e < width; ++e)
        smem.at(base + (r / piece) * piece * mn_extent * 2 + j * piece * span + tma_box_offset(r % piece, 2 * e, span, sw)) =
            (j * width + e) * 1000 + r;
  for (u32 s = 0; s < k_extent / 16; ++s) {
    const OperandStep st = pieced_mnmajor_step(sw, k_extent, mn_extent, piece, 16 * s);
    SmemDesc d{};
    ASSERT_EQ(decode_smem_desc(make_smem_desc(base + st.start, st.lbo, st.sbo, sw), d), DescError::ok);
    for (u32 mn = 0; mn < mn_extent; ++mn)
      for (u32 k = 0; k < 16; ++k)
        ASSERT_EQ(smem.at(operand_address(d, Major::MN, mn, k)), mn * 1000 + 16 * s + k)
            << "span " << span << " " << mn_extent << "x" << k_extent << " piece " << piece << " step " << s;
  }
}

TEST(Sm100Descriptors, PiecedDescriptorsAddressEveryElement) {
  for (Swizzle sw : {Swizzle::b128, Swizzle::b64})
    for (u32 mn : {64u, 96u, 128u, 256u})
      for (u32 k : {80u, 128u, 160u, 192u}) {
        if (mn % (swizzle_span(sw) / 2)) continue;  // whole boxes only (96 columns: 64B swizzle)
        for (u32 piece = 16; piece < k && k % piece == 0; piece *= 2) check_pieced_walk(sw, mn, k, piece);
        check_pieced_walk(sw, mn, k, k);
        for (u32 s = 0; s < k / 16; ++s) {  // a single piece is the box-by-box tile
          EXPECT_EQ(pieced_mnmajor_step(sw, k, mn, k, 16 * s).start, mnmajor_step(sw, k, 16 * s).start);
          EXPECT_EQ(pieced_mnmajor_step(sw, k, mn, k, 16 * s).lbo, mnmajor_step(sw, k, 16 * s).lbo);
        }
      }
}

// swizzle_row_xor: a row's swizzle as one XOR on its chunk bits, for every byte pair of every row of every
// tile shape the kernels store (the sm90 epilogue's O tile).
TEST(Sm100Descriptors, ASwizzledRowIsItsOffsetXorOneValue) {
  for (Swizzle sw : {Swizzle::b128, Swizzle::b64, Swizzle::b32})
    for (u32 rows : {64u, 128u, 192u})
      for (u32 row = 0; row < rows; ++row)
        for (u32 col = 0; col < 256; col += 2) {
          const u32 chunk = col - col % 8;
          ASSERT_EQ(swizzle_address(tile_offset(sw, rows, row, col), sw),
                    (tile_offset(sw, rows, row, chunk) ^ fa4::swizzle_row_xor(sw, row)) + (col - chunk) * 2)
              << "span " << swizzle_span(sw) << " rows " << rows << " row " << row << " col " << col;
          ASSERT_EQ(fa4::swizzle_row_xor(sw, row), fa4::swizzle_row_xor(sw, row + 8));
        }
}

// desc_advance: the descriptor of an operand moved by a k-step's start is the base descriptor plus
// start >> 4, for Hopper's and Blackwell's encodings, at every base and step the kernels use (tiles start on
// 1024-byte swizzle repeats below 228 KiB; K-major, MN-major and pieced steps).
TEST(Sm100Descriptors, AdvancingADescriptorIsDescribingTheMovedOperand) {
  int checked = 0;
  for (Swizzle sw : {Swizzle::b128, Swizzle::b64, Swizzle::b32})
    for (u32 rows : {64u, 80u, 128u, 192u, 256u})
      for (u32 k0 = 0; k0 < 256; k0 += 16) {
        std::vector<OperandStep> steps = {kmajor_step(sw, rows, k0)};
        if (k0 < rows) {
          steps.push_back(mnmajor_step(sw, rows, k0));
          for (u32 piece = 16; piece <= rows; piece *= 2)
            if (rows % piece == 0) steps.push_back(pieced_mnmajor_step(sw, rows, 256, piece, k0));
        }
        for (const OperandStep& st : steps)
          for (u32 base = 0; base + st.start < 228u * 1024; base += 1024 * 13) {
            const u64 w0 = make_wgmma_desc(base, st.lbo, st.sbo, sw), t0 = make_smem_desc(base, st.lbo, st.sbo, sw);
            ASSERT_EQ(desc_advance(w0, st.start), make_wgmma_desc(base + st.start, st.lbo, st.sbo, sw))
                << "base " << base << " start " << st.start;
            ASSERT_EQ(desc_advance(t0, st.start), make_smem_desc(base + st.start, st.lbo, st.sbo, sw));
            // Moving back by the distance in 16-byte units, as the MMA warp derives Q's descriptor from K's.
            ASSERT_EQ(desc_advance(t0, st.start) - st.start / 16, t0);
            ++checked;
          }
      }
  EXPECT_GT(checked, 10000);
}

TEST(Sm100Descriptors, TmemAddressesAndAccumulatorLanes) {
  EXPECT_EQ(tmem_addr(96, 300), (96u << 16) | 300u);
  EXPECT_EQ(tmem_lane(tmem_addr(96, 300)), 96u);
  EXPECT_EQ(tmem_col(tmem_addr(96, 300)), 300u);
  std::set<u32> lanes;
  for (u32 r = 0; r < 128; ++r) EXPECT_EQ(mma_row_lane(128, r), r);
  for (u32 r = 0; r < 64; ++r) {
    const u32 lane = mma_row_lane(64, r);
    EXPECT_EQ(lane / 32, r / 16);  // 16 rows per warp quadrant
    EXPECT_LT(lane % 32, 16u);
    lanes.insert(lane);
  }
  EXPECT_EQ(lanes.size(), 64u);
  // Header, TMEM data (128 lanes x 512 columns of 4 bytes), then 1 KiB of adversarial state per thread.
  EXPECT_EQ(kEmuTmemSlotBytes, 4096ull + 128ull * 512 * 4 + 512ull * 1024);
}

}  // namespace
}  // namespace fa4::sm100
