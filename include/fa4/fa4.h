/* libfa4rt C ABI: a thin, stable layer over fa4::Attention for engines in other languages and for
 * the Python (ctypes) wrapper python/fa4rt.py. Every call returns 0 on success or an fa4 error code
 * (FA4_ERR_*); fa4_last_error() gives the message of the calling thread's last failure. */
#ifndef FA4_FA4_H
#define FA4_FA4_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fa4_attention fa4_attention; /* opaque handle */

enum {
  FA4_OK = 0,
  FA4_ERR_INVALID_ARGUMENT = 1,
  FA4_ERR_UNSUPPORTED = 2,
  FA4_ERR_CUDA = 3,
  FA4_ERR_COMPILE = 4,
  FA4_ERR_NOT_CACHED = 5,
  FA4_ERR_GRAPH_CAPTURE = 6,
  FA4_ERR_SELF_CHECK = 7,
  FA4_ERR_CACHE = 8,
  FA4_ERR_INTERNAL = 9
};

enum { FA4_DTYPE_BF16 = 0, FA4_DTYPE_FP16 = 1 };

/* Mirrors fa4::AttentionParams (its rules: fa4.hpp). Strides are in elements; all-zero strides mean
 * contiguous. return_lse and causal: 0 is false, any other value true. */
typedef struct fa4_params {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;          /* written when return_lse != 0 */
  int32_t return_lse;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, head_dim_v;
  int64_t q_stride[3]; /* batch, seq, head */
  int64_t k_stride[3];
  int64_t v_stride[3];
  int64_t o_stride[3];
  int32_t dtype;       /* FA4_DTYPE_* */
  int32_t causal;
  float softmax_scale; /* 0: 1/sqrt(head_dim); else positive, finite, times log2(e) finite */
} fa4_params;

/* Prewarm entry: one configuration. */
typedef struct fa4_config {
  int32_t dtype, head_dim, head_dim_v, causal, lse, q_heads_per_kv;
  int32_t arch;        /* compute capability x10; 0: current device */
} fa4_config;

/* Handles. A handle is an opaque value, not an address: every call looks it up, and ids are never reused.
 * A NULL, destroyed or unknown handle makes a call return FA4_ERR_INVALID_ARGUMENT ("handle: ...") without
 * touching memory. Handles may be used from several threads at once; destroying a handle while another
 * thread is inside fa4_run/fa4_prewarm on it is allowed: that call completes, and the handle's resources are
 * released when it returns.
 *
 * Undefined behaviour that the library cannot detect:
 *  - a non-NULL pointer argument (params, configs, failures, out) that does not point at a valid object of
 *    its type, or a configs array shorter than count;
 *  - q, k, v, o, lse that are not device memory of the current context, too small for the sizes and strides
 *    given, or written by another stream while the kernel runs; a stream that is not a live CUstream;
 *  - using a handle in a child process after fork(), or any call after the library has been unloaded;
 *  - reading the string of fa4_last_error after the calling thread's next fa4 call. */

/* Creates a handle with options from the FA4_* environment variables; *out is NULL on failure. */
int fa4_create(fa4_attention** out);
/* Destroys a handle. NULL is a no-op (FA4_OK); a destroyed or unknown handle is FA4_ERR_INVALID_ARGUMENT. */
int fa4_destroy(fa4_attention* handle);
/* stream: a CUstream (or cudaStream_t) of the current context. */
int fa4_run(fa4_attention* handle, const fa4_params* params, void* stream);
/* Compiles `count` configurations; *failures (may be NULL) receives the number that failed. When any
 * failed, returns the first failure's code and fa4_last_error() names that configuration. A configuration
 * with q_heads_per_kv outside [1, 256], unsupported head dims or an arch that is neither 0 nor a target
 * NVRTC compiles for (80 or newer) fails with FA4_ERR_INVALID_ARGUMENT or FA4_ERR_UNSUPPORTED. */
int fa4_prewarm(fa4_attention* handle, const fa4_config* configs, int32_t count, int32_t* failures);
/* The message of this thread's last failed call ("" if none). Valid until the next call on this thread. */
const char* fa4_last_error(void);
const char* fa4_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FA4_FA4_H */
