// The decode GEMV of Q4_K, Q5_K and Q6_K weights (gemv_kernel.cuh, the early-decode kernels of
// gemv_q4k_early.cuh), on activations quantized to Q8_K; and the mixed Q4_K / Q6_K launch (one
// token: q4k_early_kernel / q4k_pair_kernel; 2..8 tokens: few_mma_kernel, gemv_few_mma.cuh).
#include "kernels/cuda/gemv_kernel.cuh"

namespace brisk::cuda {

cudaError_t matmul_kquant_rows(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s, const Mat* res,
               const Mat* sum) {
  switch (a[0].w.type) {
    case QuantType::Q4_K: return matmul_fmt<DevFormat::q4_k>(a, n_parts, xq, early, s, res, sum);
    case QuantType::Q5_K: return matmul_fmt<DevFormat::q5_k>(a, n_parts, xq, early, s, res, sum);
    case QuantType::Q6_K: return matmul_fmt<DevFormat::q6_k>(a, n_parts, xq, early, s, res, sum);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_kquant_mixed(const MatmulArgs* a, int n, const QuantAct& xq, bool early, cudaStream_t s) {
  early = early && !flags().no_cuda_prefetch;
  constexpr int kWarps = 4;  // one row per warp
  GemvParts parts{};
  parts.n = n;
  unsigned blocks = 0, q6k_parts = 0;
  for (int i = 0; i < n; ++i) {
    const DevFormat f = dev_format(a[i].w.type);
    blocks += unsigned((a[i].w.n_out + kWarps - 1) / kWarps);
    if (f == DevFormat::q6_k) q6k_parts |= 1u << i;
    parts.p[i] = GemvPart{.out = a[i].out.row(0), .out_stride = a[i].out.row_stride(),
                          .w = static_cast<const uint8_t*>(a[i].w.data), .L = dev_layout(f, a[i].w.n_in, a[i].w.n_out),
                          .n_out = a[i].w.n_out, .bias = a[i].bias, .block_end = blocks, .res = nullptr,
                          .res_stride = 0, .sum = nullptr, .sum_stride = 0};
  }
  const XRef x{.q = xq.q, .d = xq.d, .f = nullptr, .n_in = a[0].w.n_in, .x_stride = a[0].x.row_stride()};
  if (a[0].x.rows > 1) {  // 2..8 tokens (kquant_mixes): the tensor-core few-token kernel
    launch_few_mma(parts, x, int(a[0].x.rows), q6k_parts, early, s);
    return cudaGetLastError();
  }
  GemvParts pairs = parts;
  if (pairs_pay<q4k_early_kernel<true>, q4k_pair_kernel<true>>(blocks, pair_blocks(a, n, pairs))) {
    launch_kernel(q4k_pair_kernel<true>, dim3{pairs.p[n - 1].block_end}, dim3{32 * kWarps}, 0, s, pairs, x, q6k_parts, early);
    return cudaGetLastError();
  }
  launch_kernel(q4k_early_kernel<true>, dim3{blocks}, dim3{32 * kWarps}, 0, s, parts, x, q6k_parts, early);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
