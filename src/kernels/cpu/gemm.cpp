// GEMM dispatch: kill switches and shape checks around the ISA kernels.
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

  fn(p);
}

size_t gemm_packed_bytes(QuantType weight_type, int64_t k, int64_t n_tokens) {
  BRISK_CHECK(selected_kernel(weight_type), "gemm: no GEMM kernel for weight format ",
              quant_type_info(weight_type).name);
  return avx512::packed_bytes(weight_type, k, n_tokens);
}

void gemm_pack_tokens(const GemmParams& p, void* packed, int64_t group_begin, int64_t group_end) {
  BRISK_CHECK(selected_kernel(p.weight_type), "gemm: no GEMM kernel for weight format ",
              quant_type_info(p.weight_type).name);
  const int64_t n_groups = (p.n_tokens + kGemmGroup - 1) / kGemmGroup;
  BRISK_CHECK(group_begin >= 0 && group_begin <= group_end && group_end <= n_groups, "gemm: token groups [",
              group_begin, ", ", group_end, ") outside the ", n_groups, " groups");
  avx512::pack_tokens(p, packed, group_begin, group_end);
}

}  // namespace brisk::kernels
