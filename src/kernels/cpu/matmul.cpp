// Matmul driver: out[t, o] = dot(W[o, :], x[t, :]) (+ bias[o]) for a weight in any stored
// format. As in GGUF consumers, the activations are converted once per call to the weight
// format's vec_dot_type (e.g. Q8_0 for Q8_0/Q4_0 weights, Q8_K for K-quants, F16 for F16);
// the dot product of each (row, token) pair is the format's vec_dot. Output features are split
// over threads in contiguous blocks; within a block, a tile of rows is reused across all
// tokens so that prefill reads each weight row from cache, not memory, per token.
#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "quant/format.h"

namespace brisk::cpu {

namespace {
constexpr int64_t kRowTile = 16;
}

size_t matmul_act_row_bytes(QuantType weight_type, int64_t n_in) {
  const QuantType vt = format_traits(weight_type).vec_dot_type;
  const auto bytes = quant_row_bytes(vt, uint64_t(n_in));
  BRISK_CHECK(bytes.has_value(), "matmul: row of ", n_in, " elements does not fit format ",
              quant_type_info(vt).name);
  return size_t(*bytes);
}

void matmul_quantize_rows(const MatmulArgs& a, void* act, int ith, int nth) {
  const QuantType vt = format_traits(a.w.type).vec_dot_type;
  if (vt == QuantType::F32) return;  // rows are used in place
  const size_t rb = matmul_act_row_bytes(a.w.type, a.w.n_in);
  int64_t begin, end;
  split_range(a.x.rows, ith, nth, &begin, &end);
  for (int64_t t = begin; t < end; ++t)
    row_from_f32(vt, a.x.row(t), static_cast<uint8_t*>(act) + size_t(t) * rb, a.w.n_in);
}

void matmul_rows(const MatmulArgs& a, const void* act, int ith, int nth) {
  const FormatTraits& tr = format_traits(a.w.type);
  const bool in_place = tr.vec_dot_type == QuantType::F32;
  const size_t rb = in_place ? 0 : matmul_act_row_bytes(a.w.type, a.w.n_in);
  const int64_t n_tok = a.x.rows;
  // Split output rows in tiles so that parts stay balanced for small n_out.
  const int64_t n_tiles = (a.w.n_out + kRowTile - 1) / kRowTile;
  int64_t tile_begin, tile_end;
  split_range(n_tiles, ith, nth, &tile_begin, &tile_end);
  for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const int64_t r0 = tile * kRowTile;
    const int64_t r1 = std::min(a.w.n_out, r0 + kRowTile);
    for (int64_t t = 0; t < n_tok; ++t) {
      const void* xt = in_place ? static_cast<const void*>(a.x.row(t))
                                : static_cast<const uint8_t*>(act) + size_t(t) * rb;
      float* out = a.out.row(t);
      for (int64_t r = r0; r < r1; ++r) {
        float v = 0.0f;
        tr.vec_dot(a.w.n_in, &v, a.w.row(r), xt);
        out[r] = a.bias ? v + a.bias[r] : v;
      }
    }
  }
}

}  // namespace brisk::cpu
