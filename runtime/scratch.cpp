#include "runtime/scratch.hpp"

#include <algorithm>
#include <unordered_set>

#include "fa4/fa4.hpp"
#include "runtime/driver.hpp"

namespace fa4::detail {

ScratchOwner scratch_owner(CUstream stream, unsigned long long capture) {
  return {stream, stream == CU_STREAM_PER_THREAD ? std::this_thread::get_id() : std::thread::id(), capture};
}

struct ScratchReleases {
  std::mutex mutex;
  std::vector<ScratchPool::Buffer> buffers;
};

namespace {

// A graph's reference to one of its buffers. Its destructor runs on a driver thread once the graph, its
// executable instances and their launches are gone (so it makes no CUDA call): the buffer is queued for the
// pool, which may be gone too (the queue outlives it).
struct GraphBuffer {
  std::shared_ptr<ScratchReleases> queue;
  ScratchPool::Buffer buffer;
};

void CUDA_CB release_graph_buffer(void* data) {
  const std::unique_ptr<GraphBuffer> g(static_cast<GraphBuffer*>(data));
  std::lock_guard guard(g->queue->mutex);
  g->queue->buffers.push_back(g->buffer);
}

// This thread may make calls that a capture forbids (an allocation, a synchronous memset on another
// stream): they are not recorded and do not invalidate the capture.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { check_cu(driver().cuThreadExchangeStreamCaptureMode(&mode_), "cuThreadExchangeStreamCaptureMode"); }
  ~RelaxedCaptureMode() { driver().cuThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
};

// A capture buffer's size: rounded up, so that a later capture of another grid can reuse it.
constexpr size_t kCaptureGranule = 4096;

}  // namespace

ScratchPool::ScratchPool() : released_(std::make_shared<ScratchReleases>()) {}

ScratchPool::~ScratchPool() {
  if (allocations_.empty()) return;
  const DriverApi& d = driver();
  for (CUdeviceptr p : allocations_) d.cuMemFree(p);
  if (zeroing_) d.cuStreamDestroy(zeroing_);
}

ScratchPool::Buffer ScratchPool::get(CUstream stream, size_t bytes) {
  const DriverApi& d = driver();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t capture = 0;
  CUgraph graph = nullptr;
#if CUDA_VERSION >= 13000  // the 12.x headers map the name to _v2, without the edge data
  check_cu(d.cuStreamGetCaptureInfo(stream, &status, &capture, &graph, nullptr, nullptr, nullptr), "cuStreamGetCaptureInfo");
#else
  check_cu(d.cuStreamGetCaptureInfo(stream, &status, &capture, &graph, nullptr, nullptr), "cuStreamGetCaptureInfo");
#endif
  if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
    throw Error(ErrorCode::graph_capture, "stream: its capture sequence has been invalidated by an earlier call; end it and capture again");
  const bool capturing = status == CU_STREAM_CAPTURE_STATUS_ACTIVE;

  std::lock_guard guard(mutex_);
  reclaim_released();
  Buffer& b = current_[scratch_owner(stream, capturing ? capture : 0)];
  if (b.bytes >= bytes) return b;
  if (capturing) return b = allocate_for_capture(bytes, graph);
  // A buffer this stream outgrew stays allocated: a launch still running on the stream may use it.
  if (const Buffer spare = take_spare(bytes); spare.ptr) return b = spare;
  b = {};
  check_cu(d.cuMemAlloc(&b.ptr, bytes), "cuMemAlloc (kernel scratch)");
  allocations_.push_back(b.ptr);
  check_cu(d.cuMemsetD8Async(b.ptr, 0, bytes, stream), "cuMemsetD8Async (kernel scratch)");  // before the launch
  b.bytes = bytes;
  return b;
}

ScratchPool::Buffer ScratchPool::take_spare(size_t bytes) {
  const auto it = std::find_if(spare_.begin(), spare_.end(), [&](const Buffer& s) { return s.bytes >= bytes; });
  if (it == spare_.end()) return {};
  const Buffer b = *it;
  spare_.erase(it);
  return b;
}

ScratchPool::Buffer ScratchPool::allocate_for_capture(size_t bytes, CUgraph graph) {
  const DriverApi& d = driver();
  const RelaxedCaptureMode relaxed;
  Buffer b = take_spare(bytes);
  if (!b.ptr) {
    const size_t rounded = (bytes + kCaptureGranule - 1) / kCaptureGranule * kCaptureGranule;
    check_cu(d.cuMemAlloc(&b.ptr, rounded), "cuMemAlloc (kernel scratch of a capture)");
    allocations_.push_back(b.ptr);
    b.bytes = rounded;
    // Zeroed now, on a stream of its own: a memset on the capturing stream would be recorded and replayed.
    if (!zeroing_) check_cu(d.cuStreamCreate(&zeroing_, CU_STREAM_NON_BLOCKING), "cuStreamCreate (scratch zeroing)");
    const bool zeroed = d.cuMemsetD8Async(b.ptr, 0, b.bytes, zeroing_) == CUDA_SUCCESS &&
                        d.cuStreamSynchronize(zeroing_) == CUDA_SUCCESS;
    if (!zeroed) throw Error(ErrorCode::cuda_error, "zeroing the kernel scratch of a capture failed");
  }
  // The graph owns the buffer from here: its user object hands it back when the graph is gone.
  auto owner = std::make_unique<GraphBuffer>(GraphBuffer{released_, b});
  CUuserObject object = nullptr;
  if (d.cuUserObjectCreate(&object, owner.get(), release_graph_buffer, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) != CUDA_SUCCESS) {
    spare_.push_back(b);
    throw Error(ErrorCode::cuda_error, "cuUserObjectCreate (kernel scratch of a capture) failed");
  }
  owner.release();
  const CUresult retained = d.cuGraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE);
  if (retained != CUDA_SUCCESS) d.cuUserObjectRelease(object, 1);  // the destructor queues the buffer
  check_cu(retained, "cuGraphRetainUserObject (kernel scratch of a capture)");
  return b;
}

void ScratchPool::reclaim_released() {
  std::vector<Buffer> back;
  {
    std::lock_guard guard(released_->mutex);
    back.swap(released_->buffers);
  }
  if (back.empty()) return;
  std::unordered_set<CUdeviceptr> ptrs;
  for (const Buffer& b : back) ptrs.insert(b.ptr);
  for (auto it = current_.begin(); it != current_.end();)  // the finished captures' entries
    it = it->first.capture && ptrs.count(it->second.ptr) ? current_.erase(it) : std::next(it);
  spare_.insert(spare_.end(), back.begin(), back.end());
}

}  // namespace fa4::detail
