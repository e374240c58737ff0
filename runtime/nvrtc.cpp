#include "runtime/nvrtc.hpp"

#include <nvrtc.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <regex>

#include "base/log.hpp"
#include "fa4/error.hpp"

namespace fa4::detail {
namespace {

void check_nvrtc(nvrtcResult result, const char* what) {
  if (result != NVRTC_SUCCESS)
    throw Error(ErrorCode::compile_error, std::string(what) + " failed: " + nvrtcGetErrorString(result));
}

std::string program_log(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The Attention constructor has checked the directory; a later failure (disk full, directory removed) is
// logged, not thrown: a dump is a debugging aid and must not fail the compile.
void dump(const std::string& dir, const std::string& file, const std::string& text) {
  if (dir.empty()) return;
  std::ofstream out(dir + "/" + file, std::ios::binary);
  if (!(out << text).flush()) log().warn("dump: could not write {}/{}: {}", dir, file, std::strerror(errno));
}

}  // namespace

CompiledKernel nvrtc_compile(const std::string& source, const std::vector<std::string>& options,
                             const std::string& name, const std::string& dump_dir) {
  const auto start = std::chrono::steady_clock::now();
  dump(dump_dir, name + ".cu", source);

  nvrtcProgram program = nullptr;
  check_nvrtc(nvrtcCreateProgram(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram& p;
    ~Destroy() { nvrtcDestroyProgram(&p); }
  } destroy{program};

  std::vector<const char*> argv;
  for (const std::string& option : options) argv.push_back(option.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());

  CompiledKernel result;
  result.log = program_log(program);
  std::string option_text;
  for (const std::string& option : options) option_text += " " + option;
  dump(dump_dir, name + ".log", "options:" + option_text + "\n" + result.log + "\n");
  if (compiled != NVRTC_SUCCESS)
    throw Error(ErrorCode::compile_error, "NVRTC could not compile " + name + " (" +
                                              nvrtcGetErrorString(compiled) + "), options:" + option_text +
                                              "\n" + result.log);

  size_t size = 0;
  check_nvrtc(nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize");
  result.cubin.resize(size);
  check_nvrtc(nvrtcGetCUBIN(program, result.cubin.data()), "nvrtcGetCUBIN");
  result.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

ResourceUsage parse_ptxas_report(const std::string& log) {
  ResourceUsage r;
  std::smatch m;
  if (std::regex_search(log, m, std::regex(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
    r.stack_bytes = std::stoi(m[1]);
    r.spill_store_bytes = std::stoi(m[2]);
    r.spill_load_bytes = std::stoi(m[3]);
    if (std::regex_search(log, m, std::regex(R"(Used (\d+) registers)"))) {
      r.registers = std::stoi(m[1]);
      r.found = true;
    }
  }
  return r;
}

NvrtcVersion nvrtc_version_numbers() {
  static const NvrtcVersion v = [] {
    NvrtcVersion n;
    check_nvrtc(nvrtcVersion(&n.major, &n.minor), "nvrtcVersion");
    return n;
  }();
  return v;
}

std::string nvrtc_version() {
  const NvrtcVersion v = nvrtc_version_numbers();
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

const std::vector<int>& nvrtc_supported_archs() {
  static const std::vector<int> archs = [] {
    int count = 0;
    check_nvrtc(nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
    std::vector<int> list(static_cast<size_t>(count));
    if (count) check_nvrtc(nvrtcGetSupportedArchs(list.data()), "nvrtcGetSupportedArchs");
    return list;
  }();
  return archs;
}

}  // namespace fa4::detail
