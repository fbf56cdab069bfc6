// Where the shared model fixtures live (../shared/data/models/ARCH: hf/, ref.json, GGUFs) and
// the skip used by tests that need one.
#pragma once
#include <gtest/gtest.h>

#include "required_assets.h"

#include <filesystem>
#include <string>

namespace brisk {

inline std::string model_dir(const std::string& arch) { return std::string(BRISK_SHARED_DATA) + "/models/" + arch; }

}  // namespace brisk

#define REQUIRE_MODEL(arch)                                                                   \
  if (!std::filesystem::exists(brisk::model_dir(arch) + "/ref.json"))                         \
  BRISK_SKIP_MISSING_ASSET() << "shared model fixture " << brisk::model_dir(arch) << " is missing"
