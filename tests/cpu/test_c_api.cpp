// The C ABI's handle rules (include/fa4/fa4.h): a NULL, destroyed or unknown handle is an error, never a
// use of freed memory; ids are not reused; destroying a handle another thread is using is safe.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fa4/fa4.h"

namespace {

class CApi : public ::testing::Test {
 protected:
  void SetUp() override { setenv("FA4_DISK_CACHE", "0", 1); }
  void TearDown() override { unsetenv("FA4_DISK_CACHE"); }
};

bool names_handle(const char* message) { return std::string(message).rfind("handle: ", 0) == 0; }

TEST_F(CApi, CreateDestroyAndNullDestroy) {
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK) << fa4_last_error();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(fa4_prewarm(h, nullptr, 0, nullptr), FA4_OK) << fa4_last_error();
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
  EXPECT_EQ(fa4_destroy(nullptr), FA4_OK) << "destroying NULL is a no-op";
  EXPECT_STREQ(fa4_last_error(), "");
}

TEST_F(CApi, DestroyedHandlesAreRejectedAndNeverReused) {
  fa4_attention* first = nullptr;
  ASSERT_EQ(fa4_create(&first), FA4_OK);
  ASSERT_EQ(fa4_destroy(first), FA4_OK);
  fa4_attention* second = nullptr;
  ASSERT_EQ(fa4_create(&second), FA4_OK);
  EXPECT_NE(first, second) << "a stale handle must not reach a later handle's object";

  EXPECT_EQ(fa4_destroy(first), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(names_handle(fa4_last_error())) << fa4_last_error();
  EXPECT_EQ(fa4_prewarm(first, nullptr, 0, nullptr), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(names_handle(fa4_last_error())) << fa4_last_error();
  fa4_params params{};
  EXPECT_EQ(fa4_run(first, &params, nullptr), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(names_handle(fa4_last_error())) << fa4_last_error();
  EXPECT_EQ(fa4_prewarm(second, nullptr, 0, nullptr), FA4_OK) << "the live handle is unaffected";
  EXPECT_EQ(fa4_destroy(second), FA4_OK);
}

TEST_F(CApi, PrewarmReportsEveryBadConfiguration) {
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK);
  fa4_config configs[2] = {};
  configs[0].head_dim = 128;
  configs[0].q_heads_per_kv = 0;  // was silently taken as 1
  configs[0].arch = 90;
  configs[1].head_dim = 80;
  configs[1].q_heads_per_kv = 1;
  configs[1].arch = 90;
  int32_t failures = -1;
  const int rc = fa4_prewarm(h, configs, 2, &failures);
  EXPECT_TRUE(rc == FA4_ERR_INVALID_ARGUMENT || rc == FA4_ERR_UNSUPPORTED) << rc;
  EXPECT_EQ(failures, 2);
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
}

// One thread keeps calling into a handle while another destroys it: every call either succeeds or reports
// the dead handle; nothing touches freed memory (run this under ASan/TSan to see it).
TEST_F(CApi, DestroyWhileAnotherThreadUsesTheHandle) {
  for (int round = 0; round < 20; ++round) {
    fa4_attention* h = nullptr;
    ASSERT_EQ(fa4_create(&h), FA4_OK);
    std::atomic<bool> started{false};
    std::atomic<int> bad{0};
    std::thread user([&] {
      for (int i = 0; i < 2000; ++i) {
        started = true;
        const int rc = fa4_prewarm(h, nullptr, 0, nullptr);
        if (rc != FA4_OK && !(rc == FA4_ERR_INVALID_ARGUMENT && names_handle(fa4_last_error()))) ++bad;
      }
    });
    while (!started) std::this_thread::yield();
    EXPECT_EQ(fa4_destroy(h), FA4_OK);
    user.join();
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace
