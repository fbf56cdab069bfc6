// Grouped expert matmuls of a mixture-of-experts prefill on the tensor cores. The pairs' rows
// of x are gathered in expert order (cuda_moe.cpp); an item (expert e, first row r0, rows m <=
// kMoeMmaRows) computes out[r0 .. r0 + m) = x[r0 .. r0 + m) . W_e^T for one tile of kTileN
// outputs. Per step of kTileK columns, the block decodes the tile's weight rows from their
// device layout (dequant.cuh, Dev<F>::load8) to BF16 in shared memory and rounds its x rows
// to BF16 beside them; 4 warps then run WMMA 16x16x16 (BF16 operands, FP32 accumulators),
// warp w taking outputs [16w, 16w + 16) of the tile for both 16-row halves (the second only
// when the item has more than 16 rows). The results go out through shared memory as whole
// rows. Each weight tile is decoded once per item, where the grouped GEMV (moe_gemv.cu) reads
// it once per 8 rows and runs its products on the CUDA cores; the precision is the prefill
// GEMM's (BF16 operands: docs/cuda.md).
// Grid (ceil(n_out / kTileN) [x 2 with a second matrix], n_items), 128 threads.
#include <cuda_bf16.h>
#include <mma.h>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

constexpr int kTileN = 64;          // outputs a block
constexpr int kTileK = 64;          // columns a step
constexpr int kLdBf16 = kTileK + 8; // shared row pitch (BF16 elements; 144 bytes)
constexpr int kLdOut = kTileN + 4;  // epilogue row pitch (floats)
constexpr int kMmaThreads = 128;

struct MoeMma {
  const uint8_t* const* w;
  const uint8_t* const* w2;  // second matrix (nullptr: none)
  DevLayout L;
  int64_t n_in, n_out;
  int n_expert;
  const float* x;  // [rows, n_in] (x_stride), rows in expert order
  int64_t x_stride;
  float* out;   // [rows, n_out] dense
  float* out2;
  unsigned bx1;  // blocks of the first matrix
};

template <DevFormat F>
__global__ void __launch_bounds__(kMmaThreads) moe_items_mma_kernel(MoeMma g, const int32_t* items) {
  using namespace nvcuda;
  // The weight tile [kTileN][kLdBf16] BF16, later the output tile [kMoeMmaRows][kLdOut] float.
  __shared__ __align__(32) uint8_t w_smem[kTileN * kLdBf16 * 2];
  __shared__ __align__(32) __nv_bfloat16 x_smem[kMoeMmaRows * kLdBf16];
  auto* ws = reinterpret_cast<__nv_bfloat16*>(w_smem);
  BRISK_PDL_ENTER();
  const bool second = blockIdx.x >= g.bx1;
  const int64_t n0 = int64_t(second ? blockIdx.x - g.bx1 : blockIdx.x) * kTileN;
  const int32_t* item = items + 3 * size_t(blockIdx.y);
  const int e = item[0], rows = item[2];
  const int64_t r0 = item[1];
  if (e < 0 || e >= g.n_expert || rows <= 0) return;
  const uint8_t* w = (second ? g.w2 : g.w)[e];
  float* out = second ? g.out2 : g.out;
  const int tid = int(threadIdx.x), warp = tid / 32;
  const int halves = rows > 16 ? 2 : 1;
  const int64_t chunks = g.n_in / 8;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);
  for (int64_t k0 = 0; k0 < g.n_in; k0 += kTileK) {
    // Weight rows n0 .. n0 + kTileN, columns k0 .. k0 + kTileK: 8 chunks of 8 a row.
    for (int i = tid; i < kTileN * (kTileK / 8); i += kMmaThreads) {
      const int n = i / (kTileK / 8), c = i % (kTileK / 8);
      const int64_t row = n0 + n, chunk = k0 / 8 + c;
      float v[8];
      if (row < g.n_out && chunk < chunks) {
        Dev<F>::load8(w + size_t(row) * g.L.qs_row, w + g.L.sc_offset + size_t(row) * g.L.sc_row, chunk, v);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = 0.0f;
      }
      alignas(16) __nv_bfloat162 b[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) b[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
      *reinterpret_cast<uint4*>(ws + n * kLdBf16 + 8 * c) = *reinterpret_cast<const uint4*>(b);
    }
    // x rows r0 .. r0 + rows (zero beyond), the same columns, 4 floats a load.
    for (int i = tid; i < kMoeMmaRows * (kTileK / 4); i += kMmaThreads) {
      const int r = i / (kTileK / 4), c4 = i % (kTileK / 4);
      const int64_t col = k0 + 4 * c4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (r < rows && col < g.n_in) v = *reinterpret_cast<const float4*>(g.x + size_t(r0 + r) * size_t(g.x_stride) + col);
      alignas(8) __nv_bfloat162 b[2] = {__floats2bfloat162_rn(v.x, v.y), __floats2bfloat162_rn(v.z, v.w)};
      *reinterpret_cast<uint2*>(x_smem + r * kLdBf16 + 4 * c4) = *reinterpret_cast<const uint2*>(b);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      // B (k x n) = W^T: element (k, n) at ws[n * ld + k], column-major.
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bf;
      wmma::load_matrix_sync(bf, ws + warp * 16 * kLdBf16 + kk, kLdBf16);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (h >= halves) break;
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> af;
        wmma::load_matrix_sync(af, x_smem + h * 16 * kLdBf16 + kk, kLdBf16);
        wmma::mma_sync(acc[h], af, bf, acc[h]);
      }
    }
    __syncthreads();
  }
  auto* os = reinterpret_cast<float*>(w_smem);
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (h < halves) wmma::store_matrix_sync(os + h * 16 * kLdOut + warp * 16, acc[h], kLdOut, wmma::mem_row_major);
  __syncthreads();
  for (int i = tid; i < rows * kTileN; i += kMmaThreads) {
    const int r = i / kTileN, c = i % kTileN;
    if (n0 + c < g.n_out) out[size_t(r0 + r) * size_t(g.n_out) + size_t(n0 + c)] = os[r * kLdOut + c];
  }
}

static_assert(kMoeMmaRows * kLdOut * 4 <= kTileN * kLdBf16 * 2, "the output tile fits the weight tile's memory");

template <DevFormat F>
cudaError_t moe_items_mma_fmt(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, cudaStream_t s) {
  MoeMma g{};
  g.w = reinterpret_cast<const uint8_t* const*>(a.w);
  g.w2 = reinterpret_cast<const uint8_t* const*>(a.w2);
  g.L = dev_layout(F, a.n_in, a.n_out);
  g.n_in = a.n_in;
  g.n_out = a.n_out;
  g.n_expert = a.n_expert;
  g.x = a.x;
  g.x_stride = a.x_stride;
  g.out = a.out;
  g.out2 = a.out2;
  g.bx1 = unsigned((a.n_out + kTileN - 1) / kTileN);
  launch_kernel(moe_items_mma_kernel<F>, dim3(g.bx1 * (a.w2 ? 2u : 1u), unsigned(n_items)), kMmaThreads, 0, s, g,
                items);
  return cudaGetLastError();
}

}  // namespace

bool moe_items_mma_fits(QuantType type, int64_t n_in, int64_t x_stride) {
  return type != QuantType::F32 && n_in > 0 && n_in % 8 == 0 && x_stride % 4 == 0;
}

cudaError_t launch_moe_items_mma(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, cudaStream_t s) {
  if (a.n_expert < 1 || a.n_out <= 0 || !a.w || !a.out || !a.x || !items || n_items < 0 || n_items > 65535 ||
      (a.w2 && !a.out2) || !moe_items_mma_fits(a.type, a.n_in, a.x_stride) ||
      reinterpret_cast<uintptr_t>(a.x) % 16 != 0)
    return cudaErrorInvalidValue;
  if (n_items == 0) return cudaSuccess;
  BRISK_FMT_DISPATCH(moe_items_mma_fmt, a.type, a, items, n_items, s)
}

}  // namespace brisk::cuda
