// The decode GEMV of Q8_0, Q4_0 and Q5_0 weights (gemv_kernel.cuh), on activations quantized to Q8_0.
#include "kernels/cuda/gemv_kernel.cuh"

namespace brisk::cuda {

cudaError_t matmul_legacy_rows(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s, const Mat* res,
               const Mat* sum) {
  switch (a[0].w.type) {
    case QuantType::Q8_0: return matmul_fmt<DevFormat::q8_0>(a, n_parts, xq, early, s, res, sum);
    case QuantType::Q4_0: return matmul_fmt<DevFormat::q4_0>(a, n_parts, xq, early, s, res, sum);
    case QuantType::Q5_0: return matmul_fmt<DevFormat::q5_0>(a, n_parts, xq, early, s, res, sum);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace brisk::cuda
