// The embedding lookup on weights in the device layout (dequant.cuh).
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

// Embedding: out[t, :] = table[ids[t], :] * scale; one thread per group of 8 elements.
template <DevFormat F>
__global__ void embedding_kernel(float* out, int64_t out_stride, const uint8_t* table, DevLayout L, int64_t n_in,
                                 const int32_t* ids, float scale) {
  BRISK_PDL_ENTER();
  const int64_t t = blockIdx.y;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_in / 8) return;
  float v[8];
  const size_t r = size_t(ids[t]);
  Dev<F>::load8(table + r * L.qs_row, table + L.sc_offset + r * L.sc_row, c, v);
  float* o = out + t * out_stride + 8 * c;
#pragma unroll
  for (int k = 0; k < 8; ++k) o[k] = v[k] * scale;
}

template <DevFormat F>
cudaError_t embedding_fmt(const EmbeddingArgs& a, cudaStream_t s) {
  if (a.out.rows == 0) return cudaSuccess;
  const int64_t chunks = a.table.n_in / 8;
  const dim3 grid(unsigned((chunks + 127) / 128), unsigned(a.out.rows));
  launch_kernel(embedding_kernel<F>, grid, 128, 0, s, a.out.data, a.out.row_stride(), static_cast<const uint8_t*>(a.table.data),
                                           dev_layout(F, a.table.n_in, a.table.n_out), a.table.n_in, a.ids, a.scale);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_embedding(const EmbeddingArgs& a, cudaStream_t s) {
  BRISK_FMT_DISPATCH(embedding_fmt, a.table.type, a, s)
}

}  // namespace brisk::cuda
