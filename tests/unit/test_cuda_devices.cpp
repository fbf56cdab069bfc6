#include <gtest/gtest.h>

#include "backend/devices.h"

TEST(CudaDevices, QueryOrSkip) {
  auto devices = brisk::list_devices();
  if (devices.empty()) GTEST_SKIP() << "no GPU: " << brisk::devices_unavailable_reason();
  for (const auto& d : devices) {
    EXPECT_EQ(d.backend, "cuda");
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory, 0u);
    EXPECT_GE(d.compute_major, 5);
  }
}
