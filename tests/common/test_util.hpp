// Shared helpers for the test suites: GPU availability, device memory, random data, dtype conversion.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "fa4/fa4.hpp"
#include "runtime/driver.hpp"
#include "verify/attention_check.hpp"
#include "verify/device.hpp"
#include "verify/jit_module.hpp"

namespace fa4::test {

// Skips the current test, printing SKIPPED and the reason, when no CUDA device can be used.
#define FA4_REQUIRE_GPU()                                                               \
  do {                                                                                  \
    if (!::fa4::detail::driver_available())                                             \
      GTEST_SKIP() << "SKIPPED: no CUDA device (" << ::fa4::detail::driver_unavailable_reason() << ")"; \
  } while (0)

// Skips unless device 0 is an sm_90 GPU: the tcgen05 emulation (sm_90a code) runs only there.
#define FA4_REQUIRE_SM90()                                                                              \
  do {                                                                                                  \
    FA4_REQUIRE_GPU();                                                                                  \
    CUdevice dev0 = 0;                                                                                  \
    FA4_CU(cuDeviceGet(&dev0, 0));                                                                      \
    if (const int arch = ::fa4::detail::device_arch(dev0); arch != 90)                                  \
      GTEST_SKIP() << "SKIPPED: needs an sm_90 device (the sm90 kernel, the tcgen05 emulation), this one is sm_" << arch; \
  } while (0)

// The Plan's shared-memory buffer called `name` (throws when there is none).
inline const SmemBuffer& smem_buffer(const Plan& plan, const std::string& name) {
  for (const SmemBuffer& b : plan.smem)
    if (b.name == name) return b;
  throw std::runtime_error("plan has no smem buffer " + name);
}

// The Plan's barrier called `name` (throws when there is none).
inline const BarrierSpec& barrier(const Plan& plan, const std::string& name) {
  for (const BarrierSpec& b : plan.barriers)
    if (b.name == name) return b;
  throw std::runtime_error("plan has no barrier " + name);
}

// The check machinery the tests share with `fa4rt selftest` (verify/): device buffers, contexts, random
// inputs, references, the attention check harness.
using namespace fa4::verify;

// A valid problem (batch 2, seqlen_q 100, seqlen_k 300, 8 q heads over 2 kv heads, head_dim 128) at fake,
// aligned device addresses 2^50 apart: validation never dereferences them, and tensors of 2^31 tokens still
// do not overlap. The host-side rule tests start from it.
inline AttentionParams fake_valid_params() {
  AttentionParams p;
  p.q = reinterpret_cast<const void*>(uintptr_t{1} << 50);
  p.k = reinterpret_cast<const void*>(uintptr_t{2} << 50);
  p.v = reinterpret_cast<const void*>(uintptr_t{3} << 50);
  p.o = reinterpret_cast<void*>(uintptr_t{4} << 50);
  p.batch = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 300;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 128;
  return p;
}

// tests/kernels/ (the probes), then verify's kernels and the library's kernel_src/.
std::string_view test_source(std::string_view path);

// Runs every shape of the case; EXPECTs each to pass and logs one line per shape with `tag`.
void expect_case_passes(Attention& attention, Backend expected, const Case& c, const char* tag);

// Copies what the library logs while it lives.
class CapturedLog {
 public:
  CapturedLog();
  ~CapturedLog();
  std::string text() const;

 private:
  struct Sink;
  std::shared_ptr<Sink> sink_;
};

// A fresh temporary directory, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Non-blocking streams of the current context, destroyed with the object (errors ignored).
struct Streams {
  std::vector<CUstream> s;
  explicit Streams(int n);
  ~Streams();
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;
};

// A captured graph and its executable instance, destroyed with the object (errors ignored).
struct Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
};

// Captures attention.run(p, stream) in `mode` into `g` and instantiates it; the capture is ended (and its
// partial graph destroyed) if run() throws.
void capture_run(Attention& attention, const AttentionParams& p, CUstream stream, CUstreamCaptureMode mode, Graph& g);

}  // namespace fa4::test

namespace fa4 {
// Parameterised tests print keys by name.
inline void PrintTo(const KernelKey& key, std::ostream* os) { *os << key.name(); }
}  // namespace fa4
