// NVRTC compilation to a cubin.
#pragma once

#include <string>
#include <vector>

namespace fa4::detail {

struct CompiledKernel {
  std::vector<char> cubin;
  std::string log;        // NVRTC's log (warnings), trailing NULs removed
  double milliseconds = 0;
};

// Compiles `source` with `options`; throws Error(compile_error) with the full log on failure. When
// dump_dir is not empty the source and the log are written there as <name>.cu / <name>.log.
CompiledKernel nvrtc_compile(const std::string& source, const std::vector<std::string>& options,
                             const std::string& name, const std::string& dump_dir);

// "major.minor" of the loaded NVRTC, part of every cache key.
std::string nvrtc_version();
struct NvrtcVersion {
  int major = 0, minor = 0;
};
NvrtcVersion nvrtc_version_numbers();

// The compute capabilities (x10) the loaded NVRTC can target, ascending; read once.
const std::vector<int>& nvrtc_supported_archs();

// The kernel resources ptxas reports in the log of a compile with "--ptxas-options=--verbose".
struct ResourceUsage {
  bool found = false;  // the log held a report
  int registers = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_bytes = 0;
};
ResourceUsage parse_ptxas_report(const std::string& log);

}  // namespace fa4::detail
