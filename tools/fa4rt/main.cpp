// fa4rt: the command-line face of the library. `fa4rt --help` lists the commands, `fa4rt <command> --help`
// gives each one's options. A command is a row of kCommands: its code lives in its own function (cli.hpp).
#include <cuda.h>

#include <iostream>
#include <string>
#include <vector>

#include "runtime/nvrtc.hpp"
#include "tools/fa4rt/cli.hpp"

namespace {

using fa4::cli::Command;

const Command kCommands[] = {
    {"info", "library, NVRTC and driver versions, devices, cache directory, backend per configuration",
     fa4::cli::kInfoUsage, fa4::cli::info},
    {"prewarm", "compile every kernel for one arch into the disk cache (no GPU needed)", fa4::cli::kPrewarmUsage,
     fa4::cli::prewarm},
    {"plan", "print one configuration's Plan (or its barrier graph as Graphviz DOT)", fa4::cli::kPlanUsage,
     fa4::cli::plan},
    {"dump", "write one configuration's generated source, NVRTC log and cubin", fa4::cli::kDumpUsage, fa4::cli::dump},
    {"resources", "registers, spills and memory of every configuration (ptxas --verbose, Markdown)",
     fa4::cli::kResourcesUsage, fa4::cli::resources},
    {"cache", "the disk cache: dir, ls, verify, prune, clear", fa4::cli::kCacheUsage, fa4::cli::cache},
    {"bundle", "compile archs x configurations into a read-only cache bundle to ship (no GPU needed)",
     fa4::cli::kBundleUsage, fa4::cli::bundle},
    {"selftest", "check every configuration this GPU runs against the references and the other backends",
     fa4::cli::kSelftestUsage, fa4::cli::selftest},
};

void print_help(std::ostream& out) {
  out << "fa4rt " << fa4::version() << ": JIT-compiled attention kernels (NVRTC, CUDA Driver API)\n"
      << "\n"
      << "usage: fa4rt <command> [options]\n"
      << "       fa4rt <command> --help    a command's options\n"
      << "       fa4rt --version           library, NVRTC and build versions\n"
      << "       fa4rt -h, --help          this text\n"
      << "\n"
      << "commands:\n";
  for (const Command& c : kCommands) {
    const std::string name = c.name;
    out << "  " << name << std::string(name.size() < 11 ? 11 - name.size() : 1, ' ') << c.summary << "\n";
  }
  out << "\nEnvironment: FA4_CACHE_DIR, FA4_DISK_CACHE, FA4_BACKEND, FA4_LOG_LEVEL, ... (README.md).\n";
}

void print_version() {
  std::cout << "fa4rt " << fa4::version() << " (headers " << FA4_VERSION_STRING << ")\n"
            << "NVRTC " << fa4::detail::nvrtc_version() << " (loaded); CUDA headers " << CUDA_VERSION / 1000 << "."
            << CUDA_VERSION % 1000 / 10 << "\n"
            << "built " << FA4_BUILD_TYPE << " with " << FA4_COMPILER << ", C++" << __cplusplus / 100 % 100 << "\n";
}

// A usage problem: the message and the relevant usage on stderr, exit status 2.
int usage_error(const std::string& message, const char* usage) {
  std::cerr << "fa4rt: " << message << "\n\n";
  if (usage) std::cerr << usage;
  else print_help(std::cerr);
  return 2;
}

bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h"; }

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("missing command", nullptr);
  if (is_help(args[0])) {
    print_help(std::cout);
    return 0;
  }
  if (args[0] == "--version") {
    print_version();
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& c : kCommands)
    if (args[0] == c.name) command = &c;
  if (!command)
    return usage_error((args[0].rfind("-", 0) == 0 ? "unknown option " : "unknown command ") + args[0], nullptr);
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const std::string& a : rest)
    if (is_help(a)) {
      std::cout << command->usage;
      return 0;
    }
  try {
    return command->run(rest);
  } catch (const fa4::cli::UsageError& e) {
    return usage_error(std::string(command->name) + ": " + e.what(), command->usage);
  } catch (const fa4::Error& e) {
    std::cerr << "fa4rt " << command->name << ": error (" << fa4::to_string(e.code()) << "): " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "fa4rt " << command->name << ": error: " << e.what() << "\n";
    return 1;
  }
}
