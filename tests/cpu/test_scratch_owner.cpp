// Which launches share a device scratch (the sm90 causal and ragged tile counters, the sm100 emulation's
// TMEM): one stream's, ordered; never two streams' that may run at once, nor a graph's and a stream's.
#include <gtest/gtest.h>

#include <thread>
#include <unordered_set>

#include "runtime/scratch.hpp"

namespace fa4::detail {
namespace {

struct Owners {
  ScratchOwner per_thread, explicit_stream, null_stream, legacy;
};

Owners owners_here() {
  return {scratch_owner(CU_STREAM_PER_THREAD), scratch_owner(reinterpret_cast<CUstream>(uintptr_t{0x1230})),
          scratch_owner(nullptr), scratch_owner(CU_STREAM_LEGACY)};
}

TEST(ScratchOwner, ThePerThreadStreamIsEachThreadsOwnAndEveryOtherHandleOneStream) {
  const Owners here = owners_here();
  Owners there;
  std::thread([&] { there = owners_here(); }).join();
  // CU_STREAM_PER_THREAD names a different stream in each thread: two threads' launches may run at once.
  EXPECT_FALSE(here.per_thread == there.per_thread);
  EXPECT_TRUE(scratch_owner(CU_STREAM_PER_THREAD) == here.per_thread);  // the same thread again: its stream
  // A created stream, and the legacy default stream (as 0 or CU_STREAM_LEGACY), are the same stream in
  // every thread, which orders their launches.
  EXPECT_TRUE(here.explicit_stream == there.explicit_stream);
  EXPECT_TRUE(here.null_stream == there.null_stream);
  EXPECT_TRUE(here.legacy == there.legacy);
  // Distinct owners stay distinct as map keys.
  std::unordered_set<ScratchOwner, ScratchOwnerHash> keys{here.per_thread, there.per_thread, here.explicit_stream,
                                                          there.explicit_stream, here.null_stream, here.legacy};
  EXPECT_EQ(keys.size(), 5u);
}

TEST(ScratchOwner, ALaunchRecordedIntoAGraphOwnsItsCapturesScratchNotTheStreams) {
  // A graph replays on any stream at any time: its launches share neither the capture stream's scratch
  // nor another capture's (two graphs captured on one stream may replay at once on two streams).
  const CUstream stream = reinterpret_cast<CUstream>(uintptr_t{0x1230});
  const ScratchOwner eager = scratch_owner(stream), first = scratch_owner(stream, 7), second = scratch_owner(stream, 8);
  EXPECT_FALSE(eager == first);
  EXPECT_FALSE(first == second);
  EXPECT_TRUE(scratch_owner(stream, 7) == first);  // one capture's launches on one stream are ordered
  // Streams forked into one capture run their branches at once: each branch has its own.
  EXPECT_FALSE(scratch_owner(reinterpret_cast<CUstream>(uintptr_t{0x4560}), 7) == first);
  std::unordered_set<ScratchOwner, ScratchOwnerHash> keys{eager, first, second, scratch_owner(CU_STREAM_PER_THREAD, 7)};
  EXPECT_EQ(keys.size(), 4u);
}

}  // namespace
}  // namespace fa4::detail
