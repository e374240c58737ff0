// Decode speed: K+V bytes read per second (GB/s) for seqlen_q 1..4 against a long cache, dense and paged
// (page 64), with num_splits 0 (the library decides) and a workspace. The peers (cuDNN, PyTorch flash,
// FA4-cute) run from Python; bench_decode.py times them next to fa4rt. Here, what fa4rt itself reaches.
//
//   bench_decode [--iters N] [--splits 0,8,...] [--pages 16,64,256]
//
// --splits: num_splits values to time (default 0, the library's choice; others for tuning the rule);
// --pages: page sizes of the paged rows (default 64).
//
// Exit status: 0, 1 on error, 77 no GPU (prints SKIPPED).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "fa4/fa4.hpp"
#include "runtime/driver.hpp"

namespace {

using namespace fa4;

struct Shape {
  int batch, seqlen_k, heads_q, heads_kv, seqlen_q;
};

// The shapes of the H200 decode table the peers were measured on.
const Shape kShapes[] = {{1, 8192, 32, 8, 1},  {1, 131072, 32, 8, 1}, {8, 8192, 32, 8, 1},
                         {64, 4096, 32, 8, 1}, {1, 32768, 8, 1, 1},   {16, 16384, 32, 8, 4}};

CUdeviceptr alloc_random(size_t halves, uint64_t seed) {
  std::vector<uint16_t> host(halves);
  std::mt19937_64 rng(seed);
  for (auto& h : host) h = static_cast<uint16_t>(0x3f00 + rng() % 0x80) ^ (rng() & 0x8000);  // bf16, |x| in [0.5, 1)
  CUdeviceptr p = 0;
  FA4_CU(cuMemAlloc(&p, halves * 2));
  FA4_CU(cuMemcpyHtoD(p, host.data(), halves * 2));
  return p;
}

double time_ms(Attention& attention, const AttentionParams& p, CUstream stream, int iters) {
  CUevent begin = nullptr, end = nullptr;
  FA4_CU(cuEventCreate(&begin, CU_EVENT_DEFAULT));
  FA4_CU(cuEventCreate(&end, CU_EVENT_DEFAULT));
  for (int i = 0; i < 3; ++i) attention.run(p, stream);  // compile, load, warm
  std::vector<double> times;
  for (int rep = 0; rep < 7; ++rep) {
    FA4_CU(cuEventRecord(begin, stream));
    for (int i = 0; i < iters; ++i) attention.run(p, stream);
    FA4_CU(cuEventRecord(end, stream));
    FA4_CU(cuEventSynchronize(end));
    float ms = 0;
    FA4_CU(cuEventElapsedTime(&ms, begin, end));
    times.push_back(ms / iters);
  }
  cuEventDestroy(begin);
  cuEventDestroy(end);
  return bench::median(times);
}

}  // namespace

int main(int argc, char** argv) try {
  int iters = 20;
  std::vector<int> splits = {0}, page_sizes = {64};
  auto list = [](const std::string& text) {
    std::vector<int> out;
    for (size_t at = 0; at < text.size();) {
      const size_t comma = std::min(text.find(',', at), text.size());
      out.push_back(std::stoi(text.substr(at, comma - at)));
      at = comma + 1;
    }
    return out;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--iters" && i + 1 < argc) iters = std::stoi(argv[++i]);
    else if (arg == "--splits" && i + 1 < argc) splits = list(argv[++i]);
    else if (arg == "--pages" && i + 1 < argc) page_sizes = list(argv[++i]);
    else {
      std::printf("usage: %s [--iters N] [--splits 0,8,...] [--pages 16,64,256]\n", argv[0]);
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  const CUstream stream = bench::open_device_stream();
  if (!stream) return 77;
  Attention attention;

  std::printf("| batch x KV | q/kv heads | seqlen_q | layout | num_splits | ms | K+V GB/s |\n|---|---|---|---|---|---|---|\n");
  for (const Shape& s : kShapes) {
    const int d = 128, page = 64;
    const size_t kv_halves = size_t{1} * s.batch * s.seqlen_k * s.heads_kv * d;
    const CUdeviceptr q = alloc_random(size_t{1} * s.batch * s.seqlen_q * s.heads_q * d, 1);
    const CUdeviceptr k = alloc_random(kv_halves, 2), v = alloc_random(kv_halves, 3);
    CUdeviceptr o = 0;
    FA4_CU(cuMemAlloc(&o, size_t{2} * s.batch * s.seqlen_q * s.heads_q * d));
    std::vector<int> layouts = {0};  // 0: dense, else a page size
    layouts.insert(layouts.end(), page_sizes.begin(), page_sizes.end());
    for (const int page : layouts)
      for (const int num_splits : splits) {
        AttentionParams p;
        p.q = reinterpret_cast<void*>(q), p.k = reinterpret_cast<void*>(k), p.v = reinterpret_cast<void*>(v);
        p.o = reinterpret_cast<void*>(o);
        p.batch = s.batch, p.seqlen_q = s.seqlen_q, p.seqlen_k = s.seqlen_k;
        p.heads_q = s.heads_q, p.heads_kv = s.heads_kv, p.head_dim = d, p.head_dim_v = d;
        p.causal = s.seqlen_q > 1;
        p.num_splits = num_splits;
        CUdeviceptr table = 0;
        if (page) {  // every page of the cache, shuffled
          const int pages_per_seq = s.seqlen_k / page;
          std::vector<int32_t> pages(static_cast<size_t>(s.batch) * pages_per_seq);
          for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(i);
          std::shuffle(pages.begin(), pages.end(), std::mt19937(4));
          FA4_CU(cuMemAlloc(&table, pages.size() * 4));
          FA4_CU(cuMemcpyHtoD(table, pages.data(), pages.size() * 4));
          p.page_table = reinterpret_cast<const int32_t*>(table);
          p.page_size = page, p.num_pages = static_cast<int>(pages.size()), p.max_pages_per_seq = pages_per_seq;
        }
        CUdeviceptr workspace = 0;
        p.workspace_bytes = attention.workspace_size(p);
        if (p.workspace_bytes) FA4_CU(cuMemAlloc(&workspace, p.workspace_bytes));
        p.workspace = reinterpret_cast<void*>(workspace);
        const double ms = time_ms(attention, p, stream, iters);
        const double gbs = 2.0 * kv_halves * 2 / (ms * 1e-3) / 1e9;
        const std::string layout = page ? "paged " + std::to_string(page) : "dense";
        std::printf("| %dx%d | %d/%d | %d | %s | %d | %.4f | %.0f |\n", s.batch, s.seqlen_k, s.heads_q, s.heads_kv,
                    s.seqlen_q, layout.c_str(), num_splits, ms, gbs);
        std::fflush(stdout);
        if (workspace) cuMemFree(workspace);
        if (table) cuMemFree(table);
      }
    cuMemFree(q), cuMemFree(k), cuMemFree(v), cuMemFree(o);
  }
  std::printf("RESULT decode table above (K+V bytes / median time of %d runs)\n", iters);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_decode: %s\n", e.what());
  return 1;
}
