// Plan -> one self-contained CUDA source text (the thing that is hashed, dumped and compiled).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fa4/plan.hpp"

namespace fa4::detail {

// `constexpr` constants in namespace fa4cfg, one per Plan fact (see codegen.cpp for the names).
std::string generate_preamble(const Plan& plan);

// Preamble + the Plan's root kernel file, with every `#include "..."` of a kernel_src/ file inlined once
// (in first-use order), so the result needs no headers and is byte-for-byte deterministic.
std::string assemble_source(const Plan& plan);

// Where kernel sources come from: a path relative to the source tree -> its text (throws when missing).
using SourceLookup = std::function<std::string_view(std::string_view path)>;

// Inlines the includes of an arbitrary root file after a given prefix (used by probes and tests); by default
// from the library's own kernel_src/.
std::string assemble_from(std::string_view root_path, const std::string& prefix);
std::string assemble_from(std::string_view root_path, const std::string& prefix, const SourceLookup& sources);

// NVRTC options for a key (target, language standard, ...). Part of the cache key.
std::vector<std::string> compile_options(const KernelKey& key);
std::vector<std::string> compile_options_for_target(const std::string& target);

// The text of an embedded kernel_src/ file; throws Error(internal) if there is none.
std::string_view embedded_source(std::string_view path);

}  // namespace fa4::detail
