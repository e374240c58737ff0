// What the fa4rt commands share: the command table's row type, argument reading, and the commands
// themselves (each one a function taking the arguments after its name). A new command is a function, a
// usage text and one row in main.cpp's table.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "fa4/fa4.hpp"

namespace fa4::cli {

struct Command {
  const char* name;
  const char* summary;  // one line in `fa4rt --help`
  const char* usage;    // `fa4rt <name> --help`: synopsis and options
  int (*run)(const std::vector<std::string>& args);
};

// A bad command line: main prints it with the command's usage on stderr and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads a command's arguments flag by flag: while (flags.next()) { if (flags.flag() == "--x") ... }.
class Flags {
 public:
  explicit Flags(const std::vector<std::string>& args) : args_(args) {}
  bool next();                         // moves to the next argument; false after the last
  const std::string& flag() const { return flag_; }
  std::string value();                 // the argument after the flag
  int number(int min = 0);             // the same, as an integer in [min, 2^30]
  int q_heads_per_kv();                // the same, in [1, kMaxQHeadsPerKv] (a usage error otherwise)
  [[noreturn]] void unknown() const;   // "unknown option ..."

 private:
  const std::vector<std::string>& args_;
  size_t next_ = 0;
  std::string flag_;
};

// --arch N and --backend B; returns whether the flag was one of them.
bool read_target_flag(Flags& flags, KernelConfig& config);
// A whole configuration: --arch --backend --dtype --d --dv --causal --lse --qh-per-kv.
bool read_config_flag(Flags& flags, KernelConfig& config);
// config.arch when given, else device 0's, else 100 (no GPU: plan and compile for B200).
int target_arch(const KernelConfig& config);

// The directory the disk cache of these options uses, and what it holds.
std::string cache_directory(const Options& options);
struct DirectorySize {
  size_t kernels = 0;  // .cubin files
  size_t bytes = 0;    // all files
};
DirectorySize directory_size(const std::string& dir);
std::string describe_size(const DirectorySize& size);  // "12 kernels, 3.4 MB"

// The commands (usage texts beside them).
extern const char kInfoUsage[], kPrewarmUsage[], kPlanUsage[], kDumpUsage[], kResourcesUsage[], kCacheUsage[],
    kBundleUsage[], kSelftestUsage[];
int info(const std::vector<std::string>& args);
int prewarm(const std::vector<std::string>& args);
int plan(const std::vector<std::string>& args);
int dump(const std::vector<std::string>& args);
int resources(const std::vector<std::string>& args);
int cache(const std::vector<std::string>& args);   // cache_command.cpp
int bundle(const std::vector<std::string>& args);
int selftest(const std::vector<std::string>& args);  // selftest.cpp

// What `prewarm` and `bundle` compile for one arch, one configuration per distinct kernel: every supported
// configuration of the backend; with the automatic backend also the portable ones (the sm100 kernel's
// first-use self-check reference and its fallback); and the README's example. With `serving`, each
// configuration's serving forms too: ragged, paged, both, decode and split-KV (whichever kernel serves each).
std::vector<KernelConfig> prewarm_set(Backend backend, int arch, int q_heads_per_kv, bool serving = false);
// The configurations followed by their serving forms that some backend serves on `arch`.
std::vector<KernelConfig> with_serving_forms(std::vector<KernelConfig> configs, int arch);

}  // namespace fa4::cli
