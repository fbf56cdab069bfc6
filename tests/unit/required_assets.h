// The skip of a test whose input is absent (npm test assets, SDKs, ../shared data). Outside CI
// it is a skip with the message; in the required-assets mode (CI=true or
// BRISK_REQUIRE_ASSETS=1, set by .ci/run) the same line is a failure, so a missing asset can
// never turn a check into a silent pass. Hardware skips (no GPU, an ISA level the CPU lacks)
// use GTEST_SKIP directly. See docs/testing.md.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace brisk::test {

inline bool assets_required() {
  const char* req = std::getenv("BRISK_REQUIRE_ASSETS");
  if (req && *req) return std::strcmp(req, "0") != 0;
  const char* ci = std::getenv("CI");
  return ci && (std::strcmp(ci, "true") == 0 || std::strcmp(ci, "1") == 0);
}

}  // namespace brisk::test

// Usage, like GTEST_SKIP(): `if (!exists(p)) BRISK_SKIP_MISSING_ASSET() << "missing " << p;`
#define BRISK_SKIP_MISSING_ASSET()                                                                  \
  return GTEST_MESSAGE_AT_(__FILE__, __LINE__,                                                      \
                           ::brisk::test::assets_required()                                         \
                               ? "required test asset missing (CI / BRISK_REQUIRE_ASSETS=1): "     \
                               : "",                                                                \
                           ::brisk::test::assets_required()                                         \
                               ? ::testing::TestPartResult::kFatalFailure                           \
                               : ::testing::TestPartResult::kSkip)
