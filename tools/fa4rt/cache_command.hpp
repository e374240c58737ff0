// `fa4rt cache ...` and `fa4rt bundle ...`: inspect and maintain the disk cache, and build read-only
// cache bundles offline (NVRTC only, no GPU).
//   fa4rt cache dir                    the directories (FA4_CACHE_DIR), which one is writable, the bound
//   fa4rt cache ls                     every entry: configuration, size, age, last use; totals
//   fa4rt cache verify                 re-check every entry's checksum; exit 1 naming the bad ones
//   fa4rt cache prune --max-bytes N    evict least recently used entries down to N (K/M/G/T suffixes)
//   fa4rt cache clear                  remove every entry of the writable directory
//   fa4rt bundle --out DIR [--arch 100,90] [--backend B] [--qh-per-kv N] [--config bf16_d128_causal,...]
//                                      compile archs x configurations into DIR (default: every supported
//                                      configuration of each arch), to be mounted read-only and listed
//                                      after the writable directory: FA4_CACHE_DIR=<writable>:DIR
#pragma once

#include <vector>

#include "fa4/fa4.hpp"

namespace fa4::tool {

// argv[0] is the first argument after the command word.
int cache_command(int argc, char** argv);
int bundle_command(int argc, char** argv);

// What `prewarm` and `bundle` compile for an arch: every supported configuration of the backend, and
// with the automatic backend also the portable kernels (on sm_100 they are the sm100 kernel's first-use
// self-check reference and its fallback).
std::vector<KernelConfig> default_configs(Backend backend, int arch, int q_heads_per_kv);

}  // namespace fa4::tool
