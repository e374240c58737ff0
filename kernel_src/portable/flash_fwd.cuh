// Portable attention forward (FlashAttention-2 style) for sm_80 and newer: mma.sync m16n8k16, cp.async,
// ldmatrix. One CTA computes one (m_block, head group, sequence, split) tile of kTileM rows; kWarpsM warps
// each own kTileM / kWarpsM rows (one or two m16 tiles) and walk the KV blocks from the last visible one down.
//
// Rows: with GQA packing (kGqaPack q heads per kv head) row r of a sequence is token r / kGqaPack of q head
// group * kGqaPack + r % kGqaPack, so the q heads of one kv head share every K/V load (decode: one CTA reads
// each K/V byte once for all of them). Sequences: dense, or ragged (cu_seqlens_q/k, seqused_k: lengths read
// on the device, per sequence); K/V dense, ragged or paged (kPaged: row j through the page table). Split-KV
// (kSplit): the CTA walks one part of the sequence's key blocks and writes a normalised fp32 partial O and
// its LSE to the workspace; portable/combine.cuh merges the parts.
//
// Per KV block: S = Q K^T (Q and K fragments from swizzled smem via ldmatrix), mask (boundary blocks
// only), online softmax in exp2 form (one FMA per logit: x * scale_log2 - max * scale_log2; O rescaled
// only when a row max grows by more than 2^kRescaleThresholdLog2), P re-packed from the S accumulators
// as the A operand of O += P V (V via ldmatrix.trans). K/V blocks stream through
// a kKvStages-deep cp.async ring; one __syncthreads per block. The epilogue normalises O, writes the LSE
// and stages O through smem (over the Q buffer) for 16-byte coalesced stores.
//
// Every number comes from the generated fa4cfg:: preamble (the Plan); the asserts below tie them together.
#pragma once

#include "common/params.h"
#include "portable/ptx.cuh"
#include "portable/smem_tile.cuh"
#include "portable/softmax.cuh"
#include "portable/tile.cuh"

namespace fa4p {

constexpr int kRowsPerWarp = fa4cfg::kTileM / fa4cfg::kWarpsM;
constexpr int kMTiles = kRowsPerWarp / 16;         // m16 tiles per warp
constexpr int kSTiles = fa4cfg::kTileN / 8;        // n8 tiles of S per row
constexpr int kQkSteps = fa4cfg::kHeadDim / 16;    // k16 steps of Q K^T
constexpr int kPvSteps = fa4cfg::kTileN / 16;      // k16 steps of P V
constexpr int kOTiles = fa4cfg::kHeadDimV / 8;     // n8 tiles of O
constexpr int kQkChunks = fa4cfg::kHeadDim / 8;    // 16-byte chunks per Q/K row
constexpr int kVChunks = fa4cfg::kHeadDimV / 8;    // 16-byte chunks per V/O row
using SwzQk = Swizzle<kQkChunks>;                 // Q and K tiles
using SwzV = Swizzle<kVChunks>;                   // V tiles and the O staging tile
constexpr int kKStageBytes = fa4cfg::kTileN * fa4cfg::kHeadDim * 2;
constexpr int kVStageBytes = fa4cfg::kTileN * fa4cfg::kHeadDimV * 2;

static_assert(fa4cfg::kThreads == 32 * fa4cfg::kWarpsM, "one warp per row group");
static_assert(kRowsPerWarp == 16 || kRowsPerWarp == 32, "a warp owns one or two m16 tiles");
static_assert(fa4cfg::kTileN % 32 == 0 && fa4cfg::kHeadDim % 32 == 0 && fa4cfg::kHeadDimV % 32 == 0,
              "tiles are whole ldmatrix.x4 blocks and rows whole 64-byte swizzle units");
static_assert(fa4cfg::kKvStages >= 2, "the K/V ring needs at least double buffering");
static_assert(fa4cfg::kSmemQBytes == fa4cfg::kTileM * fa4cfg::kHeadDim * 2, "plan: Q buffer size");
static_assert(fa4cfg::kSmemKBytes == fa4cfg::kKvStages * kKStageBytes, "plan: K ring size");
static_assert(fa4cfg::kSmemVBytes == fa4cfg::kKvStages * kVStageBytes, "plan: V ring size");
static_assert(fa4cfg::kSmemOBytes == fa4cfg::kTileM * fa4cfg::kHeadDimV * 2, "plan: O staging size");
static_assert(fa4cfg::kSmemOOffset == fa4cfg::kSmemQOffset && fa4cfg::kSmemOBytes <= fa4cfg::kSmemQBytes,
              "plan: O is staged over the Q buffer");
static_assert(fa4cfg::kSmemVOffset + fa4cfg::kSmemVBytes <= fa4cfg::kSmemBytes, "plan: smem size");

// S[mt][nt] = Q rows of m16 tile mt times K rows [8 nt, 8 nt + 8) of the block, over the whole head dim.
__device__ __forceinline__ void qk_block(float (&s)[kMTiles][kSTiles][4], u32 sq_tile, u32 sk_tile, int warp,
                                         int lane) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;

  // A (Q, 16x16): matrices {rows 0-7, 8-15} x {k 0-7, 8-15}; B (K, two n8 tiles): matrices
  // {keys 0-7: k 0-7, k 8-15}, {keys 8-15: k 0-7, k 8-15}. Lane l addresses row l % 8 of matrix l / 8.
  // Lane offsets are rebuilt from an opaque lane id each block, so the compiler cannot hoist every
  // fragment address out of the KV loop (that costs more registers than the few ALU ops it saves).
  const int l = static_cast<int>(launder(lane));
  const u32 a_lane = SwzQk::offset(warp * kRowsPerWarp + (l & 7) + ((l >> 3) & 1) * 8, l >> 4);
  const u32 b_lane = SwzQk::offset((l & 7) + (l >> 4) * 8, (l >> 3) & 1);
#pragma unroll
  for (int kk = 0; kk < kQkSteps; ++kk) {
    u32 a[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) ldmatrix_x4(a[mt], sq_tile + SwzQk::moved(a_lane, mt * 16, kk * 2));
#pragma unroll
    for (int np = 0; np < kSTiles / 2; ++np) {
      u32 b[4];
      ldmatrix_x4(b, sk_tile + SwzQk::moved(b_lane, np * 16, kk * 2));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma_16816<fa4cfg::kBf16>(s[mt][2 * np], a[mt], b[0], b[1]);
        mma_16816<fa4cfg::kBf16>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// O += P V. A fragment of k16 step kk: {P[2kk][h=0], P[2kk][1], P[2kk+1][0], P[2kk+1][1]} (a0: row g keys
// 2q.., a1: row g+8, a2: row g keys 8+2q.., a3: row g+8). V (keys x dv, dv contiguous) is the "col" B
// operand through ldmatrix.trans: matrices {keys 0-7, 8-15} x {dv tile 2dp, 2dp+1}.
__device__ __forceinline__ void pv_block(float (&o)[kMTiles][kOTiles][4], const u32 (&p)[kMTiles][kSTiles][2],
                                         u32 sv_tile, int lane) {
  const int l = static_cast<int>(launder(lane));  // see qk_block
  const u32 v_lane = SwzV::offset((l & 7) + ((l >> 3) & 1) * 8, l >> 4);
#pragma unroll
  for (int kk = 0; kk < kPvSteps; ++kk) {
    u32 a[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      a[mt][0] = p[mt][2 * kk][0];
      a[mt][1] = p[mt][2 * kk][1];
      a[mt][2] = p[mt][2 * kk + 1][0];
      a[mt][3] = p[mt][2 * kk + 1][1];
    }
#pragma unroll
    for (int dp = 0; dp < kOTiles / 2; ++dp) {
      u32 b[4];
      ldmatrix_x4_trans(b, sv_tile + SwzV::moved(v_lane, kk * 16, dp * 2));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma_16816<fa4cfg::kBf16>(o[mt][2 * dp], a[mt], b[0], b[1]);
        mma_16816<fa4cfg::kBf16>(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// Epilogue, after a CTA barrier (O is staged over the Q buffer, and O rows are narrower than Q rows when
// dv < d, so one warp's staging crosses another's Q rows): full row sums, O / sum (rows without keys
// keep O = 0), LSE, O -> swizzled smem -> 16-byte global stores of the valid rows, each warp storing the
// rows it staged. With kSplit, the normalised fp32 O and the LSE of this part go to the workspace instead.
// Coordinates are recomputed from opaque blockIdx/threadIdx, so none stay live across the KV loop.
__device__ __forceinline__ void finish_tile(const fa4k::AttentionArgs& args, const float (&o)[kMTiles][kOTiles][4],
                                            const float (&row_max)[kMTiles][2], const float (&row_sum)[kMTiles][2],
                                            u32 sO) {
  const Tile tile = tile_of(args, static_cast<int>(launder(blockIdx.x)));
  const int tid = static_cast<int>(launder(threadIdx.x));
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int rows = tile.seqlen_q * fa4cfg::kGqaPack;
  // A part of a cut sequence goes to the workspace; a sequence in one part is written as without split-KV.
  const bool partial =
      fa4cfg::kSplit && fa4k::split_parts(args.split, false, /*blocks: no matter for a prefill sequence*/ 0) > 1;
  const u32 o_lane = SwzV::offset(warp * kRowsPerWarp + (lane >> 2), 0);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = row_sum[mt][h];
      sum += shfl_xor(sum, 1);
      sum += shfl_xor(sum, 2);
      float inv = sum > 0.f ? rcp_approx(sum) : 1.f;
      const int row = tile.row0 + warp * kRowsPerWarp + mt * 16 + (lane >> 2) + 8 * h;
      const int token = row_token(row), head = row_head(tile.group, row);
      const long long global_row = tile.row_base + token;
      const float kLn2 = 0.693147180559945309f;
      float lse = sum > 0.f ? (row_max[mt][h] * args.scale_log2 + log2_approx(sum)) * kLn2 : neg_inf();
      if (partial) {  // the sinks join once the parts are merged (combine.cuh)
        if (row >= rows) continue;
        const long long part = static_cast<long long>(tile.split) * args.heads_q;
        const long long rows_per_part = args.split.partial_rows;
        const long long at = fa4k::partial_row(args.split, tile.batch, token, global_row);
        if ((lane & 3) == 0) args.lse_partial[(part + head) * rows_per_part + at] = lse;
        float* out = args.o_partial + ((static_cast<long long>(tile.split) * rows_per_part + at) * args.heads_q + head) *
                                          fa4cfg::kHeadDimV;
#pragma unroll
        for (int ot = 0; ot < kOTiles; ++ot) {
          float2 pair = make_float2(o[mt][ot][2 * h] * inv, o[mt][ot][2 * h + 1] * inv);
          *reinterpret_cast<float2*>(out + ot * 8 + 2 * (lane & 3)) = pair;
        }
        continue;
      }
      if (fa4cfg::kSinks) lse = add_sink(lse, args.sinks[head], inv);
      if (fa4cfg::kWriteLse && (lane & 3) == 0 && row < rows) {
        args.lse[lse_index(args, tile, head, token)] = lse;
      }
#pragma unroll
      for (int ot = 0; ot < kOTiles; ++ot)
        st_shared_b32(sO + SwzV::moved(o_lane, mt * 16 + 8 * h, ot) + 4 * (lane & 3),
                      pack_half2<fa4cfg::kBf16>(o[mt][ot][2 * h] * inv, o[mt][ot][2 * h + 1] * inv));
    }
  if (partial) return;
  __syncwarp();

  u16* o_seq = const_cast<u16*>(sequence_base(args.o, args.cu_seqlens_q, tile.batch));
  static_assert(kRowsPerWarp * kVChunks % 32 == 0, "O rows split evenly over the lanes");
#pragma unroll
  for (int i = 0; i < kRowsPerWarp * kVChunks / 32; ++i) {
    const int idx = lane + 32 * i;
    const int tile_row = warp * kRowsPerWarp + idx / kVChunks;
    const int chunk = idx % kVChunks;
    u32 v[4];
    ld_shared_v4(sO + SwzV::offset(tile_row, chunk), v);
    const int row = tile.row0 + tile_row;
    if (row < rows)
      st_global_v4(o_seq + row_token(row) * args.o.seq_stride + row_head(tile.group, row) * args.o.head_stride + chunk * 8, v);
  }
}

}  // namespace fa4p

extern "C" __global__ void __launch_bounds__(fa4cfg::kThreads, 1) fa4_portable_fwd(const fa4k::AttentionArgs args) {
  using namespace fa4p;
  constexpr int kTileM = fa4cfg::kTileM;
  constexpr int kTileN = fa4cfg::kTileN;
  constexpr int kStages = fa4cfg::kKvStages;
  constexpr int kPack = fa4cfg::kGqaPack;

  extern __shared__ __align__(128) unsigned char smem[];
  const u32 smem_base = shared_address(smem);
  const u32 sQ = smem_base + fa4cfg::kSmemQOffset;
  const u32 sK = smem_base + fa4cfg::kSmemKOffset;
  const u32 sV = smem_base + fa4cfg::kSmemVOffset;
  const u32 sO = smem_base + fa4cfg::kSmemOOffset;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const Tile tile = tile_of(args, blockIdx.x);
  const int rows = tile.seqlen_q * kPack;  // packed rows of this sequence
  const int seqlen_k = tile.seqlen_k;
  const int row0 = tile.row0;
  if (row0 >= rows) return;  // a shorter sequence of a ragged batch: no rows here
  if (tile.seqlen_q <= args.decode_seqlen_q) return;  // a decode sequence of a ragged batch: the decode kernel's
  const int diag = seqlen_k - tile.seqlen_q;  // bottom-right alignment: token t's diagonal is key t + diag

  // KV blocks [n_begin, n_end): those holding a key some row of the tile sees (the first row sees the
  // lowest, the last row the highest: tile.cuh's key ranges); with kSplit, within this part's share.
  const int n_total = (seqlen_k + kTileN - 1) / kTileN;
  const int last_token = row_token(min(row0 + kTileM, rows) - 1);
  int n_end = (last_key(args, last_token, diag, seqlen_k) + kTileN) / kTileN;  // the block of the last key, + 1
  int n_begin = first_key(args, row_token(row0), diag, seqlen_k) / kTileN;
  if (fa4cfg::kSplit) {  // part `split` of `parts` equal shares of the key blocks (an empty share writes -inf)
    const int parts = fa4k::split_parts(args.split, false, n_total);
    if (tile.split >= parts) return;
    n_begin = max(n_begin, static_cast<int>(static_cast<long long>(n_total) * tile.split / parts));
    n_end = min(n_end, static_cast<int>(static_cast<long long>(n_total) * (tile.split + 1) / parts));
  }
  const int n_blocks = max(n_end - n_begin, 0);

  const u16* q_seq = sequence_base(args.q, args.cu_seqlens_q, tile.batch);
  const long long q_seq_stride = args.q.seq_stride, q_head_stride = args.q.head_stride;
  const int group = tile.group;
  // K/V row j of this sequence and kv head: dense or ragged rows, or a slot of a page.
  const u16* k_seq = kv_base(args, args.k, tile);
  const u16* v_seq = kv_base(args, args.v, tile);
  const int* pages = args.page_table + static_cast<long long>(tile.batch) * args.max_pages_per_seq;

  auto load_kv = [&](int n_block, int stage) {
    const int key0 = n_block * kTileN;
    const int t = static_cast<int>(launder(tid));  // per-thread offsets recomputed here, not held in the loop
    if constexpr (fa4cfg::kPaged) {
      const int shift = args.page_size_log2, slot_mask = (1 << shift) - 1;
      auto key_row = [&](const fa4k::TensorArgs& tensor, const u16* base) {
        return [&, base](int r) {
          const int key = key0 + r;
          return base + static_cast<long long>(pages[key >> shift]) * tensor.batch_stride + (key & slot_mask) * tensor.seq_stride;
        };
      };
      load_rows<kTileN, fa4cfg::kHeadDim, fa4cfg::kThreads>(sK + stage * kKStageBytes, key_row(args.k, k_seq), seqlen_k - key0, t);
      load_rows<kTileN, fa4cfg::kHeadDimV, fa4cfg::kThreads>(sV + stage * kVStageBytes, key_row(args.v, v_seq), seqlen_k - key0, t);
    } else {
      load_tile<kTileN, fa4cfg::kHeadDim, fa4cfg::kThreads>(sK + stage * kKStageBytes, k_seq + key0 * args.k.seq_stride,
                                                            args.k.seq_stride, seqlen_k - key0, t);
      load_tile<kTileN, fa4cfg::kHeadDimV, fa4cfg::kThreads>(sV + stage * kVStageBytes, v_seq + key0 * args.v.seq_stride,
                                                             args.v.seq_stride, seqlen_k - key0, t);
    }
  };

  // Prologue: Q with the first KV block in group 0, then blocks 1 .. kStages-2 (one group each, possibly
  // empty so the group count stays uniform).
  if (n_blocks > 0) {
    if constexpr (kPack == 1)
      load_tile<kTileM, fa4cfg::kHeadDim, fa4cfg::kThreads>(sQ, q_seq + group * q_head_stride + row_token(row0) * q_seq_stride,
                                                            q_seq_stride, rows - row0, tid);
    else
      load_rows<kTileM, fa4cfg::kHeadDim, fa4cfg::kThreads>(
          sQ, [&](int r) { return q_seq + row_token(row0 + r) * q_seq_stride + row_head(group, row0 + r) * q_head_stride; },
          rows - row0, tid);
    load_kv(n_end - 1, 0);
    cp_async_commit();
#pragma unroll
    for (int s = 1; s < kStages - 1; ++s) {
      if (s < n_blocks) load_kv(n_end - 1 - s, s);
      cp_async_commit();
    }
  }

  float o[kMTiles][kOTiles][4];
  float row_max[kMTiles][2];
  float row_sum[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int ot = 0; ot < kOTiles; ++ot)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][ot][e] = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) row_sum[mt][h] = 0.f;
  }
  init_row_max(row_max, args.scale_log2);

  const int warp_row0 = row0 + warp * kRowsPerWarp;
  int stage = 0;
  for (int it = 0; it < n_blocks; ++it) {
    const int n_block = n_end - 1 - it;
    // Block `it` has landed for every thread, and every warp is done with block it-1, whose stage the
    // load below refills.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int ahead = it + kStages - 1;
    if (ahead < n_blocks) load_kv(n_end - 1 - ahead, ahead % kStages);
    cp_async_commit();

    float s[kMTiles][kSTiles][4];
    qk_block(s, sQ, sK + stage * kKStageBytes, warp, lane);
    const int key0 = n_block * kTileN;
    if (fa4cfg::kSoftcap) softcap_block(s, args.softcap_scale);
    // Mask code runs only on boundary blocks: the seqlen_k tail, blocks past the first row's last key
    // (causal, window) and blocks before the last row's first key (window).
    const bool boundary = key0 + kTileN > seqlen_k || key0 + kTileN - 1 > last_key(args, row_token(row0), diag, seqlen_k) ||
                          (fa4cfg::kWindow && key0 < first_key(args, last_token, diag, seqlen_k));
    if (boundary) mask_block(s, warp_row0, key0, lane, seqlen_k, diag, args);
    u32 p[kMTiles][kSTiles][2];
    softmax_block(s, p, o, row_max, row_sum, args.scale_log2);
    pv_block(o, p, sV + stage * kVStageBytes, lane);
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();

  __syncthreads();  // every warp is done with Q before O is staged over it
  finish_tile(args, o, row_max, row_sum, sO);
}
