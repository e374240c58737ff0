// Typed errors of libfa4rt. Every failure the library reports is an fa4::Error with a code and a
// message that names the field (or the operation) and the rule that was broken.
#pragma once

#include <stdexcept>
#include <string>

#include "fa4/export.h"

namespace fa4 {

enum class ErrorCode {
  invalid_argument = 1,  // a parameter breaks a rule (null, misaligned, bad size, overlap, ...)
  unsupported = 2,       // valid, but no kernel of the chosen backend handles it
  cuda_error = 3,        // a CUDA driver call failed
  compile_error = 4,     // NVRTC rejected the generated source (the message holds the full log)
  not_cached = 5,        // no-JIT mode and the kernel is in neither cache
  graph_capture = 6,     // the call would compile or load a module while a stream is being captured
  self_check_failed = 7, // a fast kernel disagreed with the portable kernel on its first use
  cache_error = 8,       // a disk-cache operation failed in a way that cannot fall back
  internal = 9,
};

FA4_API const char* to_string(ErrorCode code);

// Exported so that its type information is shared: a catch in the caller matches what the library throws.
class FA4_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace fa4
