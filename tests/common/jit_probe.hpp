// Compiles a kernel_src/ file (plus a prefix of definitions) with NVRTC and loads it into the current
// context: for probe and primitive tests that launch their own kernels outside the attention path.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

namespace fa4::test {

class JitModule {
 public:
  // `root` is a path under kernel_src/ (e.g. "probe/tma_probe.cu"); `target` an NVRTC arch
  // ("sm_90a"); `prefix` is prepended verbatim (constants, #defines).
  JitModule(const std::string& root, const std::string& target, const std::string& prefix = "");
  ~JitModule();
  JitModule(const JitModule&) = delete;
  JitModule& operator=(const JitModule&) = delete;

  CUfunction function(const std::string& name) const;
  const std::vector<char>& cubin() const { return cubin_; }

  // Launches `fn` with cuLaunchKernelEx (raises the dynamic smem limit when needed) and does not sync.
  static void launch(CUfunction fn, unsigned grid, unsigned block, unsigned smem_bytes, void** args,
                     CUstream stream = nullptr);

 private:
  std::vector<char> cubin_;
  CUmodule module_ = nullptr;
};

// NVRTC-compiles the same way without loading (CPU tests). Returns the cubin; throws on error.
std::vector<char> jit_compile(const std::string& root, const std::string& target, const std::string& prefix = "",
                              std::string* log = nullptr);

}  // namespace fa4::test
