// The scale of a quantized dot product for its tests' tolerances: sum |w_i * a_i| over the
// dequantized weights and the activations quantized to the weight format's vec_dot type.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dot.h"
#include "quant/format.h"
#include "quant/types.h"

namespace brisk::kernels {

inline double dot_magnitude(QuantType wt, const void* w, const void* a, int64_t n) {
  std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
  format_traits(wt).dequantize_row(w, wf.data(), n);
  format_traits(activation_type(wt)).dequantize_row(a, af.data(), n);
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m += std::fabs(double(wf[size_t(i)]) * af[size_t(i)]);
  return m;
}

}  // namespace brisk::kernels
