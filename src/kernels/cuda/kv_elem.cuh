// Element types of the KV cache in the CUDA kernels: F32, F16 and BF16 rows. Stores round to
// nearest even, as the CPU's row_from_f32 does, so both backends hold the same cache bits.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace brisk::cuda {

enum class KvT { f32, f16, bf16 };

// Bytes of a row before element `col`.
template <KvT T>
__host__ __device__ constexpr int64_t kv_col_bytes(int64_t col) {
  return T == KvT::f32 ? 4 * col : 2 * col;
}

// The bits of v rounded to a 2-byte cache element.
template <KvT T>
__device__ __forceinline__ uint16_t kv_round_bits(float v) {
  static_assert(T != KvT::f32, "2-byte types only");
  if constexpr (T == KvT::f16) return __half_as_ushort(__float2half_rn(v));
  else return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// Two 2-byte elements (low half first) as floats.
template <KvT T>
__device__ __forceinline__ float2 kv_pair(uint32_t w) {
  static_assert(T != KvT::f32, "2-byte types only");
  if constexpr (T == KvT::f16) return __half22float2(*reinterpret_cast<const __half2*>(&w));
  else return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// Element i of a cache row.
template <KvT T>
__device__ __forceinline__ float kv_get(const uint8_t* row, int64_t i) {
  if constexpr (T == KvT::f32) return reinterpret_cast<const float*>(row)[i];
  else if constexpr (T == KvT::f16) return __half2float(reinterpret_cast<const __half*>(row)[i]);
  else return __uint_as_float(uint32_t(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
}

// Element i of a cache row set to v (rounded for 2-byte types).
template <KvT T>
__device__ __forceinline__ void kv_put(uint8_t* row, int64_t i, float v) {
  if constexpr (T == KvT::f32) reinterpret_cast<float*>(row)[i] = v;
  else reinterpret_cast<uint16_t*>(row)[i] = kv_round_bits<T>(v);
}

// Eight 2-byte elements of a 16-byte piece as floats.
template <KvT T>
__device__ __forceinline__ void kv_unpack8(const uint4 u, float* o) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = kv_pair<T>(w[k]);
    o[2 * k] = f.x;
    o[2 * k + 1] = f.y;
  }
}

}  // namespace brisk::cuda
