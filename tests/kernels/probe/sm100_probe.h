// Argument blocks and shared-memory sizes of the sm100 primitive test kernels (probe/*.cu), shared by
// the kernels and the host tests. Plain types only (NVRTC sees no system headers).
#pragma once

namespace fa4probe {

// Shared-memory plan of tcgen05_gemm and wgmma_compare: A and B tiles, then the mbarriers and the TMEM
// address slot; plus 1 KiB so the kernel can align its base to the 1024-byte swizzle repeat.
constexpr unsigned kProbeSmemA = 0;            // A: up to 128 x 256 16-bit elements (64 KiB)
constexpr unsigned kProbeSmemB = 64 * 1024;    // B: up to 256 x 256 16-bit elements (128 KiB)
constexpr unsigned kProbeSmemBars = 192 * 1024;
constexpr unsigned kProbeSmemBytes = kProbeSmemBars + 64 + 1024;

// tma_probe: one box of up to 256 rows of 128 bytes, then its mbarrier, plus the alignment slack.
constexpr unsigned kTmaProbeMaxBoxBytes = 256 * 128;
constexpr unsigned kTmaProbeSmemBytes = kTmaProbeMaxBoxBytes + 64 + 1024;

// D[m][n] = A[m][k] * B[n][k]^T with one tcgen05 MMA chain (K = 16 per instruction), one CTA of 128
// threads. A and B arrive by TMA as 128B-swizzled boxes of 64 elements from tensors [1, rows, 1, cols]
// (K-major: rows = m or n, cols = k; MN-major: rows = k, cols = m or n). TS: A is copied from a_rows
// into TMEM by tcgen05.st instead.
struct GemmArgs {
  float* d;                  // fp32 [m][n], written from TMEM after the commit
  float* d_early;            // read_before_commit: what the readers saw before the commit, [m][n]
  const unsigned short* a_rows;  // TS only: A [m][a_ld], K contiguous
  int a_ld;
  int m, n, k;
  int bf16;                  // 1 bf16, 0 fp16
  int a_mn_major, b_mn_major;
  int ts;                    // A from TMEM (tcgen05.mma TS form)
  int read_before_commit;    // negative test: read D after the MMAs are issued but before their commit
  void* tmem_scratch;        // emulation (sm_90a) only
  unsigned long long tmem_scratch_bytes;
};

// The same TMA-loaded tiles multiplied by real wgmma (Hopper silicon, M = 64 per instruction, N = 128
// per instruction) and by the emulated tcgen05.mma decoding the Blackwell descriptors.
struct WgmmaArgs {
  float* d_wgmma;            // fp32 [128][n]
  float* d_emu;              // fp32 [m_emu][n]
  int m_emu;                 // 64 or 128
  int n;                     // 128 or 256
  int k;                     // multiple of 16, <= 256
  int bf16;
  int a_mn_major, b_mn_major;
  int swizzle_bytes;         // 128 or 64
  void* tmem_scratch;
  unsigned long long tmem_scratch_bytes;
};

// Emulator checks that must trap (each in its own process), and the control that must not.
enum FaultMode : int {
  kFaultNone = 0,            // control: valid alloc, st, ld, dealloc, exit check
  kFaultLaneQuadrant = 1,    // warp 1 reads lanes 0..31
  kFaultLeak = 2,            // exit check with columns still allocated
  kFaultDoubleFree = 3,      // dealloc twice
  kFaultOverAllocation = 4,  // 512 columns, then 32 more
  kFaultBadDescriptor = 5,   // smem descriptor without the 0b001 version bits
  kFaultStoreIntoPending = 6,  // tcgen05.st into an issued, uncommitted MMA's destination
  kFaultNonUniformAddress = 7, // tcgen05.ld with a per-lane address
};

}  // namespace fa4probe
