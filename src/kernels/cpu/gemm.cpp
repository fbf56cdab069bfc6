// GEMM dispatch (kill switches, shape checks) and the remainder handling around the tile kernels.
#include "kernels/cpu/gemm.h"

#include <algorithm>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/gemm_isa.h"

namespace brisk::kernels {

namespace {
GemmTileFn selected_kernel(QuantType wt) {
  if (flags().no_gemm) return nullptr;
  const CpuFeatures cf = cpu_features();
  if (!cf.avx512 || !cf.avx512_vnni) return nullptr;
  GemmTileFn fn = avx512::gemm_kernel(wt);
  if (!fn) return nullptr;
  // Follow the dot-product selection: when a kill switch (BRISK_NO_SIMD, the format's
  // BRISK_NO_SIMD_DOT_*) sends the dot product elsewhere, the GEMM is off too.
  if (select_vec_dot(wt) != vec_dot_variant(wt, Isa::avx512)) return nullptr;
  return fn;
}
}  // namespace

bool gemm_available(QuantType wt) { return selected_kernel(wt) != nullptr; }

void gemm_rows(const GemmParams& p) {
  const GemmTileFn fn = selected_kernel(p.weight_type);
  BRISK_CHECK(fn, "gemm: no GEMM kernel for weight format ", quant_type_info(p.weight_type).name);
  BRISK_CHECK(p.n_rows >= 0 && p.k >= 0 && p.n_tokens >= 0, "gemm: negative shape (", p.n_rows, " x ", p.k,
              ", ", p.n_tokens, " tokens)");
  auto need = quant_row_bytes(p.weight_type, uint64_t(p.k));
  BRISK_CHECK(need, "gemm: row length ", p.k, " is not a multiple of the ", quant_type_info(p.weight_type).name,
              " block size");
  BRISK_CHECK(p.row_bytes >= *need, "gemm: row stride ", p.row_bytes, " bytes is less than a row of ", p.k,
              " elements (", *need, " bytes)");
  BRISK_CHECK(p.n_tokens <= 1 || p.x_stride >= activation_row_bytes(p.weight_type, p.k),
              "gemm: activation stride ", p.x_stride, " is less than one quantized row");
  BRISK_CHECK(p.n_tokens <= 1 || p.y_stride >= p.n_rows, "gemm: output stride ", p.y_stride,
              " is less than the ", p.n_rows, " rows");
  if (p.n_rows == 0 || p.n_tokens == 0) return;

  const int64_t rows_tiled = p.n_rows - p.n_rows % kGemmTileRows;
  const int64_t toks_tiled = p.n_tokens - p.n_tokens % kGemmTileTokens;
  if (rows_tiled > 0 && toks_tiled > 0) {
    GemmParams q = p;
    q.n_rows = rows_tiled;
    q.n_tokens = toks_tiled;
    fn(q);
  }
  const auto* wb = static_cast<const uint8_t*>(p.w);
  const auto* xb = static_cast<const uint8_t*>(p.x_quant);
  // Leftover tokens for the tiled rows, then leftover rows for all tokens.
  auto gemv = [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t += 8) {
      const int nt = int(std::min<int64_t>(8, t1 - t));
      gemv_rows_multi({.weight_type = p.weight_type, .w = wb + size_t(r0) * p.row_bytes,
                       .row_bytes = p.row_bytes, .n_rows = r1 - r0, .k = p.k,
                       .x_quant = xb + size_t(t) * p.x_stride, .x_stride = p.x_stride, .n_tokens = nt,
                       .y = p.y + t * p.y_stride + r0, .y_stride = p.y_stride});
    }
  };
  if (rows_tiled > 0 && toks_tiled < p.n_tokens) gemv(0, rows_tiled, toks_tiled, p.n_tokens);
  if (rows_tiled < p.n_rows) gemv(rows_tiled, p.n_rows, 0, p.n_tokens);
}

}  // namespace brisk::kernels
