// The device scratch of kernels that keep state across their CTAs (the sm90 causal and ragged scheduler's
// tile counters, the sm100 emulation's TMEM store): which launches may share a buffer, and one context's
// buffers.
#pragma once

#include <cuda.h>

#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace fa4::detail {

// Who owns a scratch buffer: launches that may run at the same time must not share one (the state in it is
// one launch's at a time). A stream handle orders its launches, except CU_STREAM_PER_THREAD, which names
// each host thread's own stream: there the calling thread owns it too. A launch recorded into a CUDA graph
// replays whenever and on whatever stream the graph is launched: there the capture sequence owns it too.
struct ScratchOwner {
  CUstream stream = nullptr;
  std::thread::id thread;           // no thread, except for CU_STREAM_PER_THREAD
  unsigned long long capture = 0;   // the stream's capture sequence (cuStreamGetCaptureInfo's id), 0: none
  bool operator==(const ScratchOwner& o) const { return stream == o.stream && thread == o.thread && capture == o.capture; }
};
struct ScratchOwnerHash {
  size_t operator()(const ScratchOwner& o) const {
    return std::hash<CUstream>()(o.stream) ^ (std::hash<std::thread::id>()(o.thread) << 1) ^
           (std::hash<unsigned long long>()(o.capture) << 2);
  }
};
ScratchOwner scratch_owner(CUstream stream, unsigned long long capture = 0);

struct ScratchReleases;  // buffers of destroyed graphs, queued by their user objects' destructors

// One context's scratch buffers: one per owner, grown on demand. Kernels leave the state they keep there
// zero at exit, so a buffer is zeroed once, when it is allocated. A buffer of a capture belongs to the graph
// it was captured into (a CUDA user object the graph holds): once that graph and its executable instances
// are gone and their launches done, it is kept, still zero, for a later owner. Every buffer is freed with
// the pool (errors ignored: the context may be gone).
class ScratchPool {
 public:
  struct Buffer {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
  };
  ScratchPool();
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // A zeroed buffer of at least `bytes` for a launch enqueued next on `stream`, in the current context.
  // During a capture it allocates in relaxed capture mode, outside the capture, so that nothing is recorded.
  Buffer get(CUstream stream, size_t bytes);

 private:
  Buffer take_spare(size_t bytes);
  Buffer allocate_for_capture(size_t bytes, CUgraph graph);
  void reclaim_released();

  std::mutex mutex_;
  std::unordered_map<ScratchOwner, Buffer, ScratchOwnerHash> current_;
  std::vector<Buffer> spare_;                  // zero and owned by no launch
  std::vector<CUdeviceptr> allocations_;       // every buffer, for the destructor
  std::shared_ptr<ScratchReleases> released_;
  CUstream zeroing_ = nullptr;                 // zeroes a capture's buffers outside the capture
};

}  // namespace fa4::detail
