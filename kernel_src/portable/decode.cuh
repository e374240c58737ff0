// Portable decode attention for sm_80 and newer: a few query rows per kv head (the q heads sharing it times
// the new tokens, at most 32 packed rows) against a long KV cache. The work is reading K and V once, so the
// kernel keeps many bytes in flight and does little else:
// - a CTA takes one 16-row tile of one (sequence, kv head group, split part or parts); its warps share the
//   rows and split the keys: warp w takes the 16-key chunks w, w + W, w + 2W, ... of the CTA's keys;
// - each warp streams its chunks through its own kKvStages-deep cp.async ring and waits only on itself
//   (cp.async.wait_group, then __syncwarp), so no warp ever waits for another inside the loop;
// - per chunk: S = Q K^T (16 x 16; Q re-read from smem by ldmatrix, so no registers hold it), softcapping,
//   the mask on boundary chunks only (sequence tail, causal diagonal, window edges), the online softmax of the prefill kernel (softmax.cuh), O += P V;
// - at a part's end the warps' states (unnormalised O, row max, row sum) meet in smem, each O over the ring
//   stage of its warp's last chunk, and the CTA writes O and the LSE, or with split-KV its part's normalised
//   fp32 O and LSE for the combine kernel;
// - with split-KV a CTA may run SplitRule::parts_per_cta consecutive parts through one ring per warp (a
//   part's first chunks load while the one before ends). A sequence of at most SplitRule::fold_blocks KV
//   blocks is its warps' raw part states folded in part order (merge.cuh): a CTA that runs all of its parts folds
//   them in registers, no part's end waiting for another warp, and the launch needs no combine for it; any
//   other writes them for the combine, which folds them with the same functions, so the bits are the same.
//   A longer sequence's parts end as a CTA of their own would (the warps merged, normalised fp32 O and LSE
//   for the combine).
// A paged chunk never crosses a page (pages hold a power of two >= 16 keys, chunks start at multiples of 16),
// so paged K/V cost one page-table read per chunk and load like dense rows.
#pragma once

#include "common/params.h"
#include "portable/merge.cuh"
#include "portable/ptx.cuh"
#include "portable/smem_tile.cuh"
#include "portable/softmax.cuh"
#include "portable/tile.cuh"

namespace fa4p {

__host__ __device__ constexpr int log2_of(int x) { return x <= 1 ? 0 : 1 + log2_of(x / 2); }
constexpr int kWarps = fa4cfg::kThreads / 32;
constexpr int kRows = fa4cfg::kTileM;
constexpr int kChunk = fa4cfg::kTileN / kWarps;  // keys per warp step
constexpr int kStages = fa4cfg::kKvStages;
constexpr int kQkSteps = fa4cfg::kHeadDim / 16;
constexpr int kOTiles = fa4cfg::kHeadDimV / 8;
constexpr int kKChunkBytes = kChunk * fa4cfg::kHeadDim * 2;
constexpr int kVChunkBytes = kChunk * fa4cfg::kHeadDimV * 2;
using SwzQk = Swizzle<fa4cfg::kHeadDim / 8>;
using SwzV = Swizzle<fa4cfg::kHeadDimV / 8>;

static_assert(fa4cfg::kDecode && kRows == 16 && kChunk == 16, "plan: one m16 tile of rows, one k16 step of keys per warp");
static_assert(kStages >= 2, "each warp's ring needs at least double buffering");
static_assert(fa4cfg::kSmemQBytes == kRows * fa4cfg::kHeadDim * 2, "plan: Q buffer size");
static_assert(fa4cfg::kSmemKStride == kKChunkBytes && fa4cfg::kSmemKBytes == kWarps * kStages * kKChunkBytes, "plan: K rings");
static_assert(fa4cfg::kSmemVStride == kVChunkBytes && fa4cfg::kSmemVBytes == kWarps * kStages * kVChunkBytes, "plan: V rings");
static_assert(fa4cfg::kSmemStatsStride == kRows * 2 * 4 && fa4cfg::kSmemStatsBytes >= kWarps * (kRows * 2 * 4 + 4),
              "plan: Stats, each warp's row max and sum, then the ring stage its O lies over");
static_assert(8 * fa4cfg::kHeadDimV * 4 <= kKChunkBytes && 8 * fa4cfg::kHeadDimV * 4 <= kVChunkBytes,
              "half a warp's O (8 rows x dv, fp32) fits one K stage, the other half one V stage");

// S (16 rows x 16 keys: two n8 tiles) = Q K^T over the head dim. Fragment layouts as in flash_fwd.cuh's
// qk_block: A from the Q tile, B = keys {0-7, 8-15} x k {0-7, 8-15} from the chunk.
__device__ __forceinline__ void qk_chunk(float (&s)[1][2][4], u32 sQ, u32 sK, int lane) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
  const int l = static_cast<int>(launder(lane));  // recomputed per chunk: no address registers live in the loop
  const u32 a_lane = SwzQk::offset((l & 7) + ((l >> 3) & 1) * 8, l >> 4);
  const u32 b_lane = SwzQk::offset((l & 7) + (l >> 4) * 8, (l >> 3) & 1);
#pragma unroll
  for (int kk = 0; kk < kQkSteps; ++kk) {
    u32 a[4], b[4];
    ldmatrix_x4(a, sQ + SwzQk::moved(a_lane, 0, kk * 2));
    ldmatrix_x4(b, sK + SwzQk::moved(b_lane, 0, kk * 2));
    mma_16816<fa4cfg::kBf16>(s[0][0], a, b[0], b[1]);
    mma_16816<fa4cfg::kBf16>(s[0][1], a, b[2], b[3]);
  }
}

// O += P V for one chunk: one k16 step (P's two n8 tiles are its A fragment), V through ldmatrix.trans.
__device__ __forceinline__ void pv_chunk(float (&o)[1][kOTiles][4], const u32 (&p)[1][2][2], u32 sV, int lane) {
  const int l = static_cast<int>(launder(lane));
  const u32 v_lane = SwzV::offset((l & 7) + ((l >> 3) & 1) * 8, l >> 4);
  const u32 a[4] = {p[0][0][0], p[0][0][1], p[0][1][0], p[0][1][1]};
#pragma unroll
  for (int dp = 0; dp < kOTiles / 2; ++dp) {
    u32 b[4];
    ldmatrix_x4_trans(b, sV + SwzV::moved(v_lane, 0, dp * 2));
    mma_16816<fa4cfg::kBf16>(o[0][2 * dp], a, b[0], b[1]);
    mma_16816<fa4cfg::kBf16>(o[0][2 * dp + 1], a, b[2], b[3]);
  }
}

}  // namespace fa4p

extern "C" __global__ void __launch_bounds__(fa4cfg::kThreads, 1) fa4_portable_decode(const fa4k::AttentionArgs args) {
  using namespace fa4p;
  constexpr int kTileN = fa4cfg::kTileN;
  constexpr int kPack = fa4cfg::kGqaPack;

#if __CUDA_ARCH__ >= 900
  // The combine, a programmatic dependent launch, may start once every CTA of this grid runs: it looks up
  // its rows meanwhile and waits for this grid's results itself (griddepcontrol.wait).
  if constexpr (fa4cfg::kSplit) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  extern __shared__ __align__(128) unsigned char smem[];
  const u32 smem_base = shared_address(smem);
  const u32 sQ = smem_base + fa4cfg::kSmemQOffset;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const Tile tile = tile_of(args, blockIdx.x);
  if (tile.seqlen_q > args.decode_seqlen_q) return;  // a longer sequence of a ragged batch: the prefill kernel's
  const int rows = tile.seqlen_q * kPack;  // packed rows of this sequence
  const int seqlen_k = tile.seqlen_k;
  const int row0 = tile.row0;
  if (row0 >= rows) return;                  // a shorter sequence of a ragged batch: no rows here
  const int diag = seqlen_k - tile.seqlen_q;  // bottom-right alignment: token t's diagonal is key t + diag

  // The sequence's key blocks (a window's span), its parts, and the ones this CTA runs.
  const fa4k::KeyBlocks span = fa4k::key_blocks(tile.seqlen_q, seqlen_k, args.window_left, args.window_right, kTileN);
  int parts = 1, part_begin = 0, part_end = 1;
  if (fa4cfg::kSplit) {
    parts = fa4k::split_parts(args.split, true, span.count);
    const int per_cta = fa4cfg::kFoldBlocks > 0 && args.split.parts_per_cta > 1 ? args.split.parts_per_cta : 1;
    part_begin = tile.split * per_cta;
    if (part_begin >= parts) return;
    part_end = fa4cfg::kFoldBlocks > 0 ? min(parts, part_begin + per_cta) : part_begin + 1;
  }
  const int group = tile.group;

  // Keys some row of the tile sees: from the first row's first key to the last row's last (tile.cuh).
  const int last_token = row_token(min(row0 + kRows, rows) - 1);
  const int keys_end = last_key(args, last_token, diag, seqlen_k) + 1;
  const int keys_first_chunk = first_key(args, row_token(row0), diag, seqlen_k) / kChunk;
  // This warp's chunks of a part: every kWarps-th 16-key chunk from the first one of the part a row sees.
  struct Chunks {
    int first, count;
  };
  auto chunks_of = [&](const fa4k::PartWalk& w) {
    const int key_end = min(w.end * kTileN, keys_end);
    const int chunk_end = key_end <= 0 ? 0 : (key_end + kChunk - 1) / kChunk;
    Chunks c;
    c.first = max(w.begin * kWarps, keys_first_chunk) + warp;
    c.count = c.first < chunk_end ? (chunk_end - c.first + kWarps - 1) / kWarps : 0;
    return c;
  };

  const u16* q_seq = sequence_base(args.q, args.cu_seqlens_q, tile.batch);
  const u16* k_seq = kv_base(args, args.k, tile);  // key row 0 of this kv head (paged: page 0)
  const u16* v_seq = kv_base(args, args.v, tile);
  const int* pages = args.page_table + static_cast<long long>(tile.batch) * args.max_pages_per_seq;
  const u32 sK = smem_base + fa4cfg::kSmemKOffset + warp * kStages * kKChunkBytes;  // this warp's rings
  const u32 sV = smem_base + fa4cfg::kSmemVOffset + warp * kStages * kVChunkBytes;
  auto load_chunk = [&](int chunk, int stage) {
    const int key0 = chunk * kChunk;
    long long k_row0 = static_cast<long long>(key0) * args.k.seq_stride;
    long long v_row0 = static_cast<long long>(key0) * args.v.seq_stride;
    if constexpr (fa4cfg::kPaged) {
      const long long page = pages[key0 >> args.page_size_log2];
      const int slot = key0 & ((1 << args.page_size_log2) - 1);
      k_row0 = page * args.k.batch_stride + slot * args.k.seq_stride;
      v_row0 = page * args.v.batch_stride + slot * args.v.seq_stride;
    }
    const int l = static_cast<int>(launder(lane));
    load_tile<kChunk, fa4cfg::kHeadDim, 32>(sK + stage * kKChunkBytes, k_seq + k_row0, args.k.seq_stride, seqlen_k - key0, l);
    load_tile<kChunk, fa4cfg::kHeadDimV, 32>(sV + stage * kVChunkBytes, v_seq + v_row0, args.v.seq_stride, seqlen_k - key0, l);
  };

  // The warp's stream: its chunks of the CTA's parts, one part after another, through one ring. The stream's
  // chunk g uses stage g % kStages, so the next part's first chunks load while a part ends (its merge, its
  // epilogue) and no part restarts the ring.
  int load_part = part_begin, loaded = 0;  // the stream's next chunk to load: the part, and its index there
  fa4k::PartWalk load_walk = fa4k::PartWalk::at(span.first, span.count, parts, part_begin);
  Chunks load_chunks = chunks_of(load_walk);
  fa4k::PartWalk run_walk = load_walk;  // the part run_part runs next
  auto load_next = [&](int stage) {
    if constexpr (fa4cfg::kFoldBlocks > 0)
      while (loaded == load_chunks.count && load_part + 1 < part_end) {
        ++load_part;
        load_walk.next();
        load_chunks = chunks_of(load_walk);
        loaded = 0;
      }
    if (loaded < load_chunks.count) load_chunk(load_chunks.first + loaded++ * kWarps, stage);
  };

  // Prologue: Q (warp 0; rows past the sequence zero-filled) in group 0, then the stream's first kStages - 1
  // chunks, one group each (empty ones too, so every thread counts the same groups).
  if (warp == 0)
    load_rows<kRows, fa4cfg::kHeadDim, 32>(
        sQ, [&](int r) { return q_seq + row_token(row0 + r) * args.q.seq_stride + row_head(group, row0 + r) * args.q.head_stride; },
        rows - row0, lane);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    load_next(s);
    cp_async_commit();
  }
  cp_async_wait<kStages - 1>();  // Q has landed (this thread's share) ...
  __syncthreads();               // ... and every thread's

  const int first_row_last = last_key(args, row_token(row0), diag, seqlen_k);  // the last key every row sees ...
  const int last_row_first = first_key(args, last_token, diag, seqlen_k);     // ... and the first
  // At a part's end each warp's state meets the others': its row max and (quad-summed) row sum in Stats,
  // then the ring stage its O lies over; the O over that stage (its last chunk's, which no load refills
  // before its next chunk), rows 0-7 over the K stage and 8-15 over the V stage.
  float* stats = reinterpret_cast<float*>(smem + fa4cfg::kSmemStatsOffset);
  int* o_stage = reinterpret_cast<int*>(stats + kWarps * 2 * kRows);
  auto o_row = [&](int w, int s, int r) {
    return reinterpret_cast<float*>(
        r < 8 ? smem + fa4cfg::kSmemKOffset + (w * kStages + s) * kKChunkBytes + r * fa4cfg::kHeadDimV * 4
              : smem + fa4cfg::kSmemVOffset + (w * kStages + s) * kVChunkBytes + (r - 8) * fa4cfg::kHeadDimV * 4);
  };
  int stage = 0;  // the stage of the stream's next chunk
  auto stage_before = [](int s) { return s == 0 ? kStages - 1 : s - 1; };

  // Each part as a CTA of its own would run it: the same chunks per warp, the same merge of the warps. A
  // folded sequence's (SplitRule::fold_blocks) warps instead keep their raw part states: folded in registers
  // where this CTA runs all of its parts, and the warps merged once at the end; else written for the combine.
  const bool raw = fa4cfg::kFoldBlocks > 0 && fa4k::folded(args.split, span.count, parts);
  const bool fold = raw && part_begin == 0 && part_end == parts;
  const bool to_workspace = parts > 1 && !fold;  // this CTA's parts go to the combine
  float fold_o[1][kOTiles][4], fold_max[2], fold_sum[2];
  // Workspace state `state` of token `token`, q head `head` (params.h AttentionArgs): its O row, and the index
  // of its LSE (or raw max) and raw sum.
  auto state_o = [&](long long state, int token, int head) {
    const long long at = fa4k::partial_row(args.split, tile.batch, token, tile.row_base + token);
    return args.o_partial + ((state * args.split.partial_rows + at) * args.heads_q + head) * fa4cfg::kHeadDimV;
  };
  auto state_stat = [&](long long state, int token, int head) {
    const long long at = fa4k::partial_row(args.split, tile.batch, token, tile.row_base + token);
    return (state * args.heads_q + head) * args.split.partial_rows + at;
  };

  auto run_part = [&](int part) {
    const Chunks chunks = chunks_of(run_walk);
    if (fa4cfg::kFoldBlocks > 0 && part + 1 < part_end) run_walk.next();
    float o[1][kOTiles][4];
    float row_max[1][2];
    init_row_max(row_max, args.scale_log2);
    float row_sum[1][2] = {{0.f, 0.f}};
#pragma unroll
    for (int ot = 0; ot < kOTiles; ++ot)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[0][ot][e] = 0.f;

    for (int i = 0; i < chunks.count; ++i) {
      // This chunk has landed for every lane, and every lane is done with the one before, whose stage the
      // stream's chunk kStages - 1 ahead refills.
      cp_async_wait<kStages - 2>();
      __syncwarp();
      load_next(stage_before(stage));
      cp_async_commit();

      float s[1][2][4];
      qk_chunk(s, sQ, sK + stage * kKChunkBytes, lane);
      const int key0 = (chunks.first + i * kWarps) * kChunk;
      if (fa4cfg::kSoftcap) softcap_block(s, args.softcap_scale);
      if (key0 + kChunk > seqlen_k || key0 + kChunk - 1 > first_row_last || (fa4cfg::kWindow && key0 < last_row_first))
        mask_block(s, row0, key0, lane, seqlen_k, diag, args);
      u32 p[1][2][2];
      softmax_block(s, p, o, row_max, row_sum, args.scale_log2, /*o_zero=*/i == 0);
      pv_chunk(o, p, sV + stage * kVChunkBytes, lane);
      stage = stage + 1 == kStages ? 0 : stage + 1;
    }

    float sums[2];  // the rows' sums over the quad
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sums[h] = row_sum[0][h];
      sums[h] += shfl_xor(sums[h], 1);
      sums[h] += shfl_xor(sums[h], 2);
    }
    if constexpr (fa4cfg::kFoldBlocks > 0) {
      if (raw && !fold) {  // the warp's raw state to the workspace (valid rows); no other warp waits for it
        const long long state = static_cast<long long>(part) * kWarps + warp;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + (lane >> 2) + 8 * h;
          if (row >= rows) continue;
          const int token = row_token(row), head = row_head(group, row);
          float* out = state_o(state, token, head) + 2 * (lane & 3);
#pragma unroll
          for (int ot = 0; ot < kOTiles; ++ot) *reinterpret_cast<float2*>(out + ot * 8) = make_float2(o[0][ot][2 * h], o[0][ot][2 * h + 1]);
          if ((lane & 3) == 0) {
            const long long stat = state_stat(state, token, head);
            args.lse_partial[stat] = row_max[0][h];
            args.sum_partial[stat] = sums[h];
          }
        }
        return;
      }
      if (fold) {
        if (part == part_begin) {
#pragma unroll
          for (int h = 0; h < 2; ++h) fold_max[h] = row_max[0][h], fold_sum[h] = sums[h];
#pragma unroll
          for (int ot = 0; ot < kOTiles; ++ot)
#pragma unroll
            for (int e = 0; e < 4; ++e) fold_o[0][ot][e] = o[0][ot][e];
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if (h == 1 && rows - row0 <= 8) break;  // rows 8-15 are the tile's padding: never stored
            float a, b;
            fold_weights(fold_max[h], row_max[0][h], args.scale_log2, a, b);
            fold_sum[h] = fold_term(fold_sum[h], a, sums[h], b);
            // Where no row's max moved (most parts once the maxima settle), a = 1 and x_a * a = x_a exactly:
            // the same bits in one instruction.
            if (__all_sync(0xffffffffu, a == 1.f)) {
#pragma unroll
              for (int ot = 0; ot < kOTiles; ++ot)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; ++e) fold_o[0][ot][e] = fmaf(o[0][ot][e], b, fold_o[0][ot][e]);
            } else {
#pragma unroll
              for (int ot = 0; ot < kOTiles; ++ot)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; ++e) fold_o[0][ot][e] = fold_term(fold_o[0][ot][e], a, o[0][ot][e], b);
            }
          }
        }
        if (part + 1 < part_end) return;  // the fold goes on with the next part
        // The last part: the warps merge their folds below, as the warps of an uncut sequence.
#pragma unroll
        for (int h = 0; h < 2; ++h) row_max[0][h] = fold_max[h], sums[h] = fold_sum[h];
#pragma unroll
        for (int ot = 0; ot < kOTiles; ++ot)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[0][ot][e] = fold_o[0][ot][e];
      }
    }

    // The warp's state to smem (O[row][col] unnormalised), over the stage of its last chunk.
    __syncwarp();  // every lane has read that stage
    const int free_stage = stage_before(stage);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = (lane >> 2) + 8 * h;
      if ((lane & 3) == 0) {
        stats[warp * 2 * kRows + r] = row_max[0][h];
        stats[warp * 2 * kRows + kRows + r] = sums[h];
      }
      if (row0 + r >= rows) continue;  // a padding row of the tile: the merge never reads it
      float* out = o_row(warp, free_stage, r) + 2 * (lane & 3);
#pragma unroll
      for (int ot = 0; ot < kOTiles; ++ot) *reinterpret_cast<float2*>(out + ot * 8) = make_float2(o[0][ot][2 * h], o[0][ot][2 * h + 1]);
    }
    if (lane == 0) o_stage[warp] = free_stage;
    __syncthreads();

    // The merge: the warps' states weighed against the largest max (a warp without keys weighs 0; merge.cuh,
    // as the combine merges a folded sequence's warps). A row's threads compute its weights once and take
    // every row_threads-th 8-column vector (one 16-byte store each). All threads share the valid rows: a GQA
    // decode tile often has 8 or 4 (q heads per kv head x tokens), and the part's end waits for its slowest
    // warp.
    constexpr int kVecs = fa4cfg::kHeadDimV / 8;
    constexpr int kRowShift = log2_of(fa4cfg::kThreads / kRows);
    static_assert(fa4cfg::kThreads == kRows << kRowShift, "plan: a power of two of threads per row");
    int row_shift = kRowShift;
#pragma unroll
    for (int valid = kRows / 2; valid >= 1; valid /= 2)
      if ((1 << row_shift) < kVecs && rows - row0 <= valid) ++row_shift;
    const int row_threads = 1 << row_shift;
    u16* o_seq = const_cast<u16*>(sequence_base(args.o, args.cu_seqlens_q, tile.batch));
    const int r = tid >> row_shift;
    const int row = row0 + r;
    if (row < rows) {  // r < kRows: row_shift >= kRowShift
      float weight[kWarps], inv;
      float lse = warp_merge_weights<kWarps>(
          kWarps, [&](int w) { return stats[w * 2 * kRows + r]; }, [&](int w) { return stats[w * 2 * kRows + kRows + r]; },
          args.scale_log2, weight, inv);
      const int token = row_token(row), head = row_head(group, row);
      if (fa4cfg::kSinks && !to_workspace) lse = add_sink(lse, args.sinks[head], inv);  // cut: in the merge
      for (int vec = tid & (row_threads - 1); vec < kVecs; vec += row_threads) {
        float acc[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
          const float4* in = reinterpret_cast<const float4*>(o_row(w, o_stage[w], r) + vec * 8);
          const float4 lo = in[0], hi = in[1];
          const float x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[j] = fmaf(weight[w], x[j], acc[j]);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] *= inv;
        if (to_workspace) {
          float4* out = reinterpret_cast<float4*>(state_o(part, token, head) + vec * 8);
          out[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
          out[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
          if (vec == 0) args.lse_partial[state_stat(part, token, head)] = lse;
          continue;
        }
        const u32 packed[4] = {pack_half2<fa4cfg::kBf16>(acc[0], acc[1]), pack_half2<fa4cfg::kBf16>(acc[2], acc[3]),
                               pack_half2<fa4cfg::kBf16>(acc[4], acc[5]), pack_half2<fa4cfg::kBf16>(acc[6], acc[7])};
        st_global_v4(o_seq + token * args.o.seq_stride + head * args.o.head_stride + vec * 8, packed);
        if (fa4cfg::kWriteLse && vec == 0) args.lse[lse_index(args, tile, head, token)] = lse;
      }
    }
    // The states are read: each warp's stage may be refilled, Stats rewritten, by the next part.
    if (fa4cfg::kFoldBlocks > 0) __syncthreads();
  };
  // A loop, even of one trip, cost the dv 256 kernels 12 registers (and spills): one part runs without it.
  if constexpr (fa4cfg::kFoldBlocks > 0) {
    for (int part = part_begin; part < part_end; ++part) run_part(part);
  } else {
    run_part(part_begin);
  }

}
