// The decode GEMV of F32, F16 and BF16 weights (gemv_kernel.cuh), on float activations rounded
// through the weight format.
#include "kernels/cuda/gemv_kernel.cuh"

namespace brisk::cuda {

cudaError_t matmul_float_rows(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s, const Mat* res,
               const Mat* sum) {
  switch (a[0].w.type) {
    case QuantType::F32: return matmul_fmt<DevFormat::f32>(a, n_parts, xq, early, s, res, sum);
    case QuantType::F16: return matmul_fmt<DevFormat::f16>(a, n_parts, xq, early, s, res, sum);
    case QuantType::BF16: return matmul_fmt<DevFormat::bf16>(a, n_parts, xq, early, s, res, sum);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace brisk::cuda
