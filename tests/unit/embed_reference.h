// What the embedding tests share to compare against their reference files: the numbers of a
// ref.json entry (a vector, or rows of one) flattened, and the largest absolute difference.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

namespace brisk::test {

// A JSON array of numbers, or an array of arrays of numbers, as one vector (rows in order).
inline std::vector<float> reference_floats(const nlohmann::json& j) {
  std::vector<float> out;
  for (const auto& v : j) {
    if (v.is_array())
      for (const auto& x : v) out.push_back(x.get<float>());
    else
      out.push_back(v.get<float>());
  }
  return out;
}

// max |a[i] - b[i]| (a failure and infinity when the sizes differ).
inline float embed_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace brisk::test
