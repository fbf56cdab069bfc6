// Reproducible random test inputs shared by the unit tests.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace brisk::test {

// n values drawn from N(0, sigma^2) by a Mersenne twister seeded with `seed`.
inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// n values drawn uniformly from [-1, 1) by a Mersenne twister seeded with `seed`.
inline std::vector<float> uniform(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace brisk::test
