/* libfa4rt C ABI: a thin, stable layer over fa4::Attention for engines in other languages and for
 * the Python (ctypes) wrapper python/fa4rt/__init__.py. Every call returns 0 on success or an fa4 error code
 * (FA4_ERR_*); fa4_last_error() gives the message of the calling thread's last failure. */
#ifndef FA4_FA4_H
#define FA4_FA4_H

#include <stddef.h>
#include <stdint.h>

#include "fa4/export.h"

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

/* Versioned structs: the layouts above are frozen; the structs below begin with struct_size, which the
 * caller sets to sizeof(the struct) of the fa4.h it was compiled with. A later fa4.h appends fields; a
 * library accepts the sizes of its own and of earlier fa4.h versions (fields past a smaller size read as 0)
 * and rejects any other with FA4_ERR_INVALID_ARGUMENT ("<name>.struct_size: ..."). */

/* Mirrors the serving fields of fa4::AttentionParams (their rules: fa4.hpp and docs/correctness.md): ragged
 * batches, per-sequence key counts, a paged KV cache, split-KV. All-zero (apart from struct_size) is a
 * dense call. The int32 arrays are device memory; the library never reads them on the host. */
typedef struct fa4_serving {
  uint32_t struct_size;           /* sizeof(fa4_serving) */
  const int32_t* cu_seqlens_q;    /* [batch + 1]: q/o are [total_q, heads_q, dim]; seqlen_q is the longest */
  int64_t total_q;
  const int32_t* cu_seqlens_k;    /* [batch + 1]: k/v are [total_k, heads_kv, dim] (with a page table: lengths only) */
  int64_t total_k;
  const int32_t* seqused_k;       /* [batch]: sequence i sees keys [0, seqused_k[i]) */
  const int32_t* page_table;      /* [batch, max_pages_per_seq]: k/v are [num_pages, page_size, heads_kv, dim] */
  int64_t page_size, num_pages, max_pages_per_seq;
  int32_t num_splits;             /* 1: never split; n > 1: n parts; 0: the library decides (needs a workspace) */
  void* workspace;                /* device memory, 256-byte aligned: fa4_workspace_size bytes */
  size_t workspace_bytes;
  /* Variants (fa4::AttentionParams); all-zero: none. */
  int32_t window;                 /* non-zero: a sliding window, bottom-right aligned, of these sides ... */
  int64_t window_left, window_right; /* ... each -1 (unbounded) or >= 0 */
  float softcap;                  /* > 0: scores become softcap * tanh(score / softcap); 0: off */
  const float* sinks;             /* fp32 [heads_q] on the device: a logit per q head in every row's denominator */
  int32_t split_by_batch;         /* non-zero, with num_splits 0: the batch size chooses the parts too (faster, not batch-invariant) */
} fa4_serving;

/* Prewarm entry with the serving flags (fa4::KernelConfig): varlen (cu_seqlens_q/k or seqused_k set), paged
 * (page_table set), split (split-KV: num_splits > 1, or 0 with a workspace). 0 is false, any other value true. */
typedef struct fa4_config_ex {
  uint32_t struct_size;  /* sizeof(fa4_config_ex) */
  int32_t dtype, head_dim, head_dim_v, causal, lse, q_heads_per_kv;
  int32_t arch;          /* compute capability x10; 0: current device */
  int32_t varlen, paged, split;
  int32_t decode;        /* decode shapes: seqlen_q * q_heads_per_kv <= 32 (fa4::KernelConfig::decode) */
  int32_t window, softcap, sinks; /* the variants in use */
} fa4_config_ex;

/* One partial attention state of fa4_merge: O (dtype of the merge) and its natural-log LSE (fp32). */
typedef struct fa4_merge_state {
  const void* o;
  const float* lse;
} fa4_merge_state;

/* Mirrors fa4::MergeParams (its rules: fa4.hpp): states over disjoint keys of the same queries, each O
 * [batch, seqlen, heads, head_dim_v] (ragged: [total, heads, head_dim_v]) with its LSE [batch, heads, seqlen]
 * (ragged: [heads, total]), as fa4_run writes them with return_lse. Strides in elements; all-zero: contiguous. */
typedef struct fa4_merge_params {
  uint32_t struct_size;          /* sizeof(fa4_merge_params) */
  int32_t num_states;            /* 2 to 8 */
  const fa4_merge_state* states; /* num_states entries */
  int64_t state_stride[3];       /* batch, seq, head: of every state's O */
  void* o;                       /* the merged O */
  int64_t o_stride[3];
  float* lse;                    /* the merged LSE, or NULL */
  int64_t batch, seqlen, heads, head_dim_v;
  const int32_t* cu_seqlens;     /* device [batch + 1], or NULL; then seqlen is the longest sequence */
  int64_t total;                 /* rows when ragged */
  int32_t dtype;                 /* FA4_DTYPE_* */
} fa4_merge_params;

/* Handles. A handle is an opaque value, not an address: every call looks it up, and ids are never reused.
 * A NULL, destroyed or unknown handle makes a call return FA4_ERR_INVALID_ARGUMENT ("handle: ...") without
 * touching memory. Handles may be used from several threads at once; destroying a handle while another
 * thread is inside a call on it is allowed: that call completes, and the handle's resources are released
 * when it returns.
 *
 * Undefined behaviour that the library cannot detect:
 *  - a non-NULL pointer argument (params, serving, merge, configs, failures, out) that does not point at a
 *    valid object of its type, or at fewer bytes than its struct_size says; a configs array shorter than
 *    count; a merge states array shorter than num_states;
 *  - q, k, v, o, lse, the workspace and the merge states that are not device memory of the current context,
 *    too small for the sizes and strides given, or written by another stream while the kernel runs; a
 *    stream that is not a live CUstream;
 *  - device arrays of a serving call (cu_seqlens_q/k, seqused_k, page_table) shorter than their documented
 *    entries, or whose values break the serving contract (docs/correctness.md: offsets that start at 0, do
 *    not decrease and end at total_*, no sequence longer than seqlen_q / seqlen_k, page indices in
 *    [0, num_pages)): run never reads them on the host, so it cannot check them;
 *  - using a handle in a child process after fork(), or any call after the library has been unloaded;
 *  - reading the string of fa4_last_error after the calling thread's next fa4 call. */

/* Creates a handle with options from the FA4_* environment variables; *out is NULL on failure. */
FA4_API int fa4_create(fa4_attention** out);
/* Destroys a handle. NULL is a no-op (FA4_OK); a destroyed or unknown handle is FA4_ERR_INVALID_ARGUMENT. */
FA4_API int fa4_destroy(fa4_attention* handle);
/* stream: a CUstream (or cudaStream_t) of the current context. */
FA4_API int fa4_run(fa4_attention* handle, const fa4_params* params, void* stream);
/* Compiles `count` configurations; *failures (may be NULL) receives the number that failed. When any
 * failed, returns the first failure's code and fa4_last_error() names that configuration. A configuration
 * with q_heads_per_kv outside [1, 256], unsupported head dims or an arch that is neither 0 nor a target
 * NVRTC compiles for (80 or newer) fails with FA4_ERR_INVALID_ARGUMENT or FA4_ERR_UNSUPPORTED. */
FA4_API int fa4_prewarm(fa4_attention* handle, const fa4_config* configs, int32_t count, int32_t* failures);
/* fa4_run with serving shapes: ragged batches, seqused_k, a paged KV cache, split-KV (fa4_serving). serving
 * NULL is a dense call, the same as fa4_run. Every host-side value is checked before anything is launched
 * (FA4_ERR_INVALID_ARGUMENT naming the field: total_q without cu_seqlens_q, a page_size that is not a power
 * of two from 16 to 256, a workspace that is misaligned or shorter than fa4_workspace_size, ...). */
FA4_API int fa4_run_serving(fa4_attention* handle, const fa4_params* params, const fa4_serving* serving, void* stream);
/* *out receives the workspace bytes fa4_run_serving needs for these parameters (0: none); serving may be
 * NULL. With num_splits 0 and no workspace it is the size a workspace must have to be used. Checks the same
 * rules as fa4_run_serving (a short workspace apart) and needs a current context (the size depends on its
 * device), but launches nothing; *out is 0 on failure. Size it once for the largest decode call (batch and
 * lengths; calls with no decode-sized sequence need none: docs/correctness.md). */
FA4_API int fa4_workspace_size(fa4_attention* handle, const fa4_params* params, const fa4_serving* serving, size_t* out);
/* Merges partial attention states into one: LSE = log sum_s exp(LSE_s), O = sum_s exp(LSE_s - LSE) O_s
 * (cascade or shared-prefix attention, context parallelism). Asynchronous on stream. */
FA4_API int fa4_merge(fa4_attention* handle, const fa4_merge_params* merge, void* stream);
/* fa4_prewarm with the serving flags: the same rules and reports; every configs[i].struct_size is checked. */
FA4_API int fa4_prewarm_ex(fa4_attention* handle, const fa4_config_ex* configs, int32_t count, int32_t* failures);
/* The message of this thread's last failed call ("" if none). Valid until the next call on this thread. */
FA4_API const char* fa4_last_error(void);
FA4_API const char* fa4_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FA4_FA4_H */
