// GEMM dispatch: kill switches and shape checks around the ISA kernels.
#include "kernels/cpu/gemm.h"

#include <algorithm>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/gemm_isa.h"
#include "kernels/cpu/gemm_pack.h"

namespace brisk::kernels {

namespace {
GemmIsaKernels isa_kernels(QuantType wt, Isa isa) {
  switch (isa) {
    case Isa::avx512: return avx512::gemm_kernels(wt);
    case Isa::avx2_vnni: return avx2_vnni::gemm_kernels(wt);
    case Isa::avx2: return avx2::gemm_kernels(wt);
    case Isa::scalar: return {};
  }
  return {};
}

// The GEMM of the ISA whose dot product select_vec_dot picks: a kill switch that sends the dot
// product elsewhere (BRISK_NO_SIMD, BRISK_NO_AVX512, BRISK_NO_AVX_VNNI, BRISK_NO_AVX2, the
// format's BRISK_NO_SIMD_DOT_*) moves the GEMM along or turns it off, and the tails that go
// through gemv_rows_multi run the same ISA.
GemmIsaKernels selected(QuantType wt) {
  if (flags().no_gemm) return {};
  return isa_kernels(wt, dot_isa(wt));
}

GemmIsaKernels selected_or_throw(QuantType wt) {
  const GemmIsaKernels k = selected(wt);
  BRISK_CHECK(k, "gemm: no GEMM kernel for weight format ", quant_type_info(wt).name);
  return k;
}
}  // namespace

bool gemm_available(QuantType wt) { return bool(selected(wt)); }

Isa gemm_isa(QuantType wt) { return selected(wt) ? dot_isa(wt) : Isa::scalar; }

GemmIsaKernels gemm_kernels_variant(QuantType wt, Isa isa) {
  if (!cpu_has_level(cpu_features_detected(), isa_level(isa))) return {};
  return isa_kernels(wt, isa);
}

void gemm_rows(const GemmParams& p) {
  const GemmTileFn fn = selected_or_throw(p.weight_type).kernel;
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
  return selected_or_throw(weight_type).packed_bytes(weight_type, k, n_tokens);
}

bool gemm_packing_shared(QuantType a, QuantType b) {
  if (a == b) return gemm_available(a);
  const GemmIsaKernels ka = selected(a), kb = selected(b);
  if (!ka || !kb || ka.pack_tokens != kb.pack_tokens || activation_type(a) != activation_type(b)) return false;
  const GemmCodeSpec sa = gemm_code_spec(a), sb = gemm_code_spec(b);
  return sa.block == sb.block && sa.offset == sb.offset && sa.has_min == sb.has_min;
}

void gemm_pack_tokens(const GemmParams& p, void* packed, int64_t group_begin, int64_t group_end) {
  const GemmIsaKernels kernels = selected_or_throw(p.weight_type);
  const int64_t n_groups = (p.n_tokens + kGemmGroup - 1) / kGemmGroup;
  BRISK_CHECK(group_begin >= 0 && group_begin <= group_end && group_end <= n_groups, "gemm: token groups [",
              group_begin, ", ", group_end, ") outside the ", n_groups, " groups");
  kernels.pack_tokens(p, packed, group_begin, group_end);
}

}  // namespace brisk::kernels
