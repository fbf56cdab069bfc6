// Element types of the KV cache in the CUDA kernels: F32, F16, BF16 and Q8_0 rows. Stores round
// to nearest even (Q8_0: the CPU's quantize_row_q8_0_ref rules), as the CPU's row_from_f32 does,
// so both backends hold the same cache bits. A Q8_0 row is blocks of 32 elements, 34 bytes each
// (an F16 scale d, then 32 int8 quants q; element = d * q); its columns offsets are multiples of
// 32 and its blocks are written whole, one warp per block (kv_put_q8_0_block).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/act_quant.cuh"

namespace brisk::cuda {

enum class KvT { f32, f16, bf16, q8_0 };

// Bytes of a row before element `col`.
template <KvT T>
__host__ __device__ constexpr int64_t kv_col_bytes(int64_t col) {
  return T == KvT::f32 ? 4 * col : T == KvT::q8_0 ? col / 32 * 34 : 2 * col;
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
  else if constexpr (T == KvT::bf16) return __uint_as_float(uint32_t(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
  else {
    const uint8_t* b = row + (i >> 5) * 34;
    return __half2float(*reinterpret_cast<const __half*>(b)) * float(int8_t(b[2 + (i & 31)]));
  }
}

// Element i of a cache row set to v (rounded for 2-byte types).
template <KvT T>
__device__ __forceinline__ void kv_put(uint8_t* row, int64_t i, float v) {
  static_assert(T != KvT::q8_0, "Q8_0 blocks are written whole (kv_put_q8_0_block)");
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

// The Q8_0 block at `blk` set from one warp's 32 values (lane l holds element l), quantized by
// act_quant.cuh's quant_block_warp<32> (the CPU's quantize_row_q8_0_ref rules); its scale, already
// an F16 value there, stored as F16. Every lane of the warp must call it.
__device__ __forceinline__ void kv_put_q8_0_block(uint8_t* blk, float v) {
  const float vals[1] = {v};
  float d = 0.0f;  // set in lane 0
  quant_block_warp<32>(vals, reinterpret_cast<int8_t*>(blk + 2), &d, nullptr);
  if ((threadIdx.x & 31) == 0) *reinterpret_cast<uint16_t*>(blk) = __half_as_ushort(__float2half_rn(d));
}

}  // namespace brisk::cuda
