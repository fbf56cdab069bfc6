// Stacked expert weights for the mixture-of-experts op tests (like GGUF's 3-D expert tensors).
#pragma once
#include <cstdint>
#include <vector>

#include "random_values.h"
#include "backend/backend.h"
#include "kernels/cpu/ops.h"
#include "quant/types.h"

namespace brisk::test {

// n_expert [n_out, n_in] matrices in `type`, one allocation, Gaussian values of std 0.2.
struct Experts {
  std::vector<uint8_t> bytes;
  std::vector<Weight> views;
};

inline Experts make_experts(QuantType type, int64_t n_in, int64_t n_out, int32_t n_expert, uint32_t seed) {
  const size_t rb = size_t(quant_row_bytes(type, uint64_t(n_in)).value());
  Experts e;
  e.bytes.resize(rb * size_t(n_out) * size_t(n_expert));
  const std::vector<float> f = gaussian(size_t(n_in * n_out * n_expert), seed, 0.2f);
  for (int64_t r = 0; r < n_out * n_expert; ++r)
    cpu::row_from_f32(type, f.data() + r * n_in, e.bytes.data() + size_t(r) * rb, n_in);
  for (int32_t i = 0; i < n_expert; ++i)
    e.views.push_back(Weight{.type = type, .n_in = n_in, .n_out = n_out, .row_bytes = rb,
                             .data = e.bytes.data() + rb * size_t(n_out) * size_t(i)});
  return e;
}

}  // namespace brisk::test
