/* FA4_API marks what libfa4rt.so exports. The library is compiled with hidden visibility, so only the
 * declarations marked here (the C++ API of fa4.hpp and the C ABI of fa4.h) are visible to its users; the
 * internals and the spdlog/fmt code compiled into it stay private. C and C++. */
#ifndef FA4_EXPORT_H
#define FA4_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define FA4_API __attribute__((visibility("default")))
#else
#define FA4_API
#endif

#endif /* FA4_EXPORT_H */
