// Weights in the device layout of dequant.cuh: which formats have device kernels, the bytes of
// the layout, and the repack of stored rows (already in device memory) into it.
#include "core/flags.h"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

// One thread per stored block: stored rows -> device layout.
template <DevFormat F>
__global__ void repack_kernel(const uint8_t* stored, size_t stored_row_bytes, uint8_t* dst, DevLayout L,
                              int64_t n_out, int64_t blocks_per_row) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_out * blocks_per_row) return;
  repack_block_at<F>(stored, stored_row_bytes, dst, L, i / blocks_per_row, i % blocks_per_row);
}

}  // namespace

bool weight_format_on_device(QuantType t) {
  switch (t) {
    case QuantType::F32: case QuantType::F16: case QuantType::BF16: case QuantType::Q8_0:
    case QuantType::Q4_0: case QuantType::Q4_K: case QuantType::Q5_K: case QuantType::Q6_K:
      return true;
    case QuantType::Q5_0:
      return !flags().no_cuda_q5_0;
    default:
      return false;
  }
}

bool weight_takes_quantized_act(QuantType t) {
  return t == QuantType::Q8_0 || t == QuantType::Q4_0 || t == QuantType::Q5_0 || t == QuantType::Q4_K ||
         t == QuantType::Q5_K || t == QuantType::Q6_K;
}

size_t device_weight_bytes(QuantType t, int64_t n_in, int64_t n_out) {
  return dev_layout(dev_format(t), n_in, n_out).bytes;
}

bool weight_repacked(QuantType t) { return dev_layout(dev_format(t), 256, 1).repacked; }

cudaError_t launch_repack_weight(QuantType t, const void* stored, size_t stored_row_bytes, void* dst, int64_t n_in,
                                 int64_t n_out, cudaStream_t s) {
  const DevFormat f = dev_format(t);
  const DevLayout L = dev_layout(f, n_in, n_out);
  if (!L.repacked || n_in % L.block != 0) return cudaErrorInvalidValue;
  const int64_t bpr = n_in / L.block, n = bpr * n_out;
  const unsigned grid = unsigned((n + 255) / 256);
  const auto* src = static_cast<const uint8_t*>(stored);
  auto* d = static_cast<uint8_t*>(dst);
  switch (f) {
    case DevFormat::q8_0: launch_kernel(repack_kernel<DevFormat::q8_0>, grid, 256, 0, s, src, stored_row_bytes, d, L, n_out, bpr); break;
    case DevFormat::q4_0: launch_kernel(repack_kernel<DevFormat::q4_0>, grid, 256, 0, s, src, stored_row_bytes, d, L, n_out, bpr); break;
    case DevFormat::q5_0: launch_kernel(repack_kernel<DevFormat::q5_0>, grid, 256, 0, s, src, stored_row_bytes, d, L, n_out, bpr); break;
    case DevFormat::q6_k: launch_kernel(repack_kernel<DevFormat::q6_k>, grid, 256, 0, s, src, stored_row_bytes, d, L, n_out, bpr); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace brisk::cuda
