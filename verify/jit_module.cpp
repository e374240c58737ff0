#include "verify/jit_module.hpp"

#include <cstdlib>

#include "runtime/codegen.hpp"
#include "runtime/embedded_sources.hpp"
#include "runtime/driver.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/launch.hpp"

namespace fa4::verify {

const std::vector<detail::EmbeddedSource>& verify_kernel_sources();  // generated from verify/kernels/

std::string_view verify_source(std::string_view path) {
  for (const detail::EmbeddedSource& s : verify_kernel_sources())
    if (s.path == path) return s.text;
  return detail::embedded_source(path);
}

std::vector<char> jit_compile(const detail::SourceLookup& sources, const std::string& root, const std::string& target,
                              const std::string& prefix, std::string* log) {
  const std::string source = detail::assemble_from(root, prefix, sources);
  const char* dump = std::getenv("FA4_DUMP_DIR");
  std::string name = root;
  for (char& c : name)
    if (c == '/' || c == '.') c = '_';
  detail::CompiledKernel k = detail::nvrtc_compile(source, detail::compile_options_for_target(target),
                                                   name + "_" + target, dump ? dump : "");
  if (log) *log = k.log;
  return std::move(k.cubin);
}

JitModule::JitModule(const detail::SourceLookup& sources, const std::string& root, const std::string& target,
                     const std::string& prefix)
    : cubin_(jit_compile(sources, root, target, prefix)) {
  FA4_CU(cuModuleLoadData(&module_, cubin_.data()));
}

JitModule::~JitModule() {
  if (module_) detail::driver().cuModuleUnload(module_);
}

CUfunction JitModule::function(const std::string& name) const {
  CUfunction fn = nullptr;
  FA4_CU(cuModuleGetFunction(&fn, module_, name.c_str()));
  return fn;
}

void JitModule::launch(CUfunction fn, unsigned grid, unsigned block, unsigned smem_bytes, void** args,
                       CUstream stream) {
  if (smem_bytes > 48 * 1024)
    FA4_CU(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem_bytes)));
  LaunchShape shape;
  shape.grid[0] = grid;
  shape.block[0] = block;
  shape.smem_bytes = smem_bytes;
  const detail::LaunchConfig config(shape, stream);
  FA4_CU(cuLaunchKernelEx(config.get(), fn, args, nullptr));
}

}  // namespace fa4::verify
