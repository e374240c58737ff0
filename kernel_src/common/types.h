// Fixed-width integers for kernel sources and the host code that shares their headers (NVRTC sees no
// system headers, so no <cstdint>).
#pragma once

namespace fa4 {

using u32 = unsigned int;
using u64 = unsigned long long;

}  // namespace fa4
