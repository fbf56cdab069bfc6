// Matmul launchers for decode-sized batches (kernels.h): checks and the dispatch of a weight
// format to its family's GEMV (matmul_legacy.cu, matmul_float.cu, matmul_kquant.cu; the kernel
// and its design in gemv_kernel.cuh), and which matmuls of one input can share a launch.
#include "core/flags.h"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/gemv_units.cuh"

namespace brisk::cuda {

namespace {

// The GEMV of a[0 .. n_parts) by its weight format's family.
cudaError_t matmul_rows(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s,
                        const Mat* res = nullptr, const Mat* sum = nullptr) {
  switch (a[0].w.type) {
    case QuantType::Q8_0: case QuantType::Q4_0: case QuantType::Q5_0: return matmul_legacy_rows(a, n_parts, xq, early, s, res, sum);
    case QuantType::F32: case QuantType::F16: case QuantType::BF16:
      return matmul_float_rows(a, n_parts, xq, early, s, res, sum);
    case QuantType::Q4_K: case QuantType::Q5_K: case QuantType::Q6_K:
      return matmul_kquant_rows(a, n_parts, xq, early, s, res, sum);
    default: return cudaErrorInvalidValue;
  }
}

// Q4_K and Q6_K matmuls of one token over rows of at most 4096 (one pass each) can share one
// q4k_early_kernel launch: Q4_K_M stores attn_v (and ffn_down) of some layers as Q6_K, whose
// v then joins the q / k launch instead of following it (both take Q8_K activations). Steps of
// 2..8 tokens share the tensor-core few-token launch likewise (rows of any length).
bool kquant_mixes(const MatmulArgs& a) {
  const bool few = a.x.rows >= 2 && a.x.rows <= kMaxTok && !flags().no_cuda_gemv_few &&
                   !flags().no_cuda_gemv_few_mma;
  return (a.w.type == QuantType::Q4_K || a.w.type == QuantType::Q6_K) && (few || (a.x.rows == 1 && a.w.n_in <= 4096)) &&
         a.w.n_in % 256 == 0 && !flags().no_cuda_gemv_mixed && !flags().no_cuda_q4k_early_decode &&
         !flags().no_cuda_q4k_spread && !flags().no_cuda_q6k_spread;
}

}  // namespace


DevFormat dev_format(QuantType t) {
  switch (t) {
    case QuantType::F16: return DevFormat::f16;
    case QuantType::BF16: return DevFormat::bf16;
    case QuantType::Q8_0: return DevFormat::q8_0;
    case QuantType::Q4_0: return DevFormat::q4_0;
    case QuantType::Q5_0: return DevFormat::q5_0;
    case QuantType::Q4_K: return DevFormat::q4_k;
    case QuantType::Q6_K: return DevFormat::q6_k;
    case QuantType::Q5_K: return DevFormat::q5_k;
    default: return DevFormat::f32;
  }
}

cudaError_t launch_matmul(const MatmulArgs& a, const QuantAct* xq, cudaStream_t s, bool weights_constant) {
  return matmul_rows(&a, 1, xq, weights_constant, s);
}

cudaError_t launch_matmul_add(const MatmulArgs& a, const QuantAct* xq, const Mat& residual, const Mat& sum,
                              cudaStream_t s, bool weights_constant) {
  if (residual.rows != a.out.rows || residual.cols != a.w.n_out || sum.rows != a.out.rows || sum.cols != a.w.n_out)
    return cudaErrorInvalidValue;
  return matmul_rows(&a, 1, xq, weights_constant, s, &residual, &sum);
}

bool matmuls_share_launch(const MatmulArgs& a, const MatmulArgs& b) {
  return (a.w.type == b.w.type || (kquant_mixes(a) && kquant_mixes(b))) && a.w.n_in == b.w.n_in && a.x.data == b.x.data && a.x.rows == b.x.rows &&
         a.x.row_stride() == b.x.row_stride() && a.out.rows == b.out.rows;
}

cudaError_t launch_matmuls(const MatmulArgs* a, int n, const QuantAct* xq, cudaStream_t s, bool weights_constant) {
  if (n < 1 || n > kMaxMatmulParts) return cudaErrorInvalidValue;
  bool mixed = false;
  for (int i = 1; i < n; ++i) {
    if (!matmuls_share_launch(a[0], a[i])) return cudaErrorInvalidValue;
    mixed = mixed || a[i].w.type != a[0].w.type;
  }
  if (mixed) return xq ? launch_kquant_mixed(a, n, *xq, weights_constant, s) : cudaErrorInvalidValue;
  return matmul_rows(a, n, xq, weights_constant, s);
}

}  // namespace brisk::cuda
