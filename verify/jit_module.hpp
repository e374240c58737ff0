// Compiles a kernel file outside the attention path (the references, the tests' probes) with NVRTC and
// loads it into the current context. Sources come from a lookup: verify's own kernels and the library's
// kernel_src/, plus whatever the caller adds (the tests' probes).
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "runtime/codegen.hpp"

namespace fa4::verify {

// verify/kernels/ (e.g. "reference/attention_ref.cu"), then the library's kernel_src/.
std::string_view verify_source(std::string_view path);

class JitModule {
 public:
  // `root` is a path the lookup knows; `target` an NVRTC arch ("sm_90a"); `prefix` is prepended verbatim.
  JitModule(const detail::SourceLookup& sources, const std::string& root, const std::string& target,
            const std::string& prefix = "");
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
std::vector<char> jit_compile(const detail::SourceLookup& sources, const std::string& root, const std::string& target,
                              const std::string& prefix = "", std::string* log = nullptr);

}  // namespace fa4::verify
