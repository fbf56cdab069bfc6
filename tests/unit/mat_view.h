// A Mat view of a float vector for the op tests: [rows, cols], dense.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace brisk {

inline Mat mat(std::vector<float>& v, int64_t rows, int64_t cols) {
  return Mat{.data = v.data(), .rows = rows, .cols = cols};
}

}  // namespace brisk
