// Quantization of one activation block by one warp, shared by the standalone activation
// kernels (act_round.cu) and the producers that fuse it (RMS norm, gated activation), with the
// CPU reference quantizers' exact rules:
//   Q8_0 (32 elements): d = amax / 127, q = roundf(x / d) clamped to [-128, 127], scale fp16(d)
//   Q8_K (256 elements): mx = the element of largest |x| (first), s = -127 / mx,
//                        q = min(127, rint(s x)), scale 1 / s
// Lane l holds elements k * 32 + l in v[k]. With q == nullptr the rounded floats (scale * q)
// go to `ob` instead.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace brisk::cuda {

template <int kBlock>
__device__ __forceinline__ void quant_block_warp(const float (&v)[kBlock / 32], int8_t* q, float* d, float* ob) {
  constexpr int kPer = kBlock / 32;
  const int lane = threadIdx.x & 31;
  float amax = 0.0f;
  int idx = 1 << 30;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const float ax = fabsf(v[k]);
    if (ax > amax) { amax = ax; idx = k * 32 + lane; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (oa > amax || (oa == amax && oi < idx)) { amax = oa; idx = oi; }
  }
  if (kBlock == 32) {
    const float dd = amax / 127.f;
    const float id = dd != 0.f ? 1.f / dd : 0.f;
    const float dh = __half2float(__float2half_rn(dd));
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      float x = roundf(v[k] * id);
      if (x != x) x = 0.0f;
      x = fminf(fmaxf(x, -128.0f), 127.0f);
      if (q) q[k * 32 + lane] = int8_t(x);
      else ob[k * 32 + lane] = dh * x;
    }
    if (q && lane == 0) *d = dh;
    return;
  }
  if (amax == 0.0f) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (q) q[k * 32 + lane] = 0;
      else ob[k * 32 + lane] = 0.0f;
    }
    if (q && lane == 0) *d = 0.0f;
    return;
  }
  // The element at idx, from the lane that holds it.
  float mine = 0.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (idx / 32 == k) mine = v[k];
  const float mx = __shfl_sync(0xffffffffu, mine, idx & 31);
  const float iscale = -127.f / mx;
  const float dd = 1.f / iscale;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const float x = fminf(127.0f, rintf(iscale * v[k]));
    if (q) q[k * 32 + lane] = int8_t(x);
    else ob[k * 32 + lane] = dd * x;
  }
  if (q && lane == 0) *d = dd;
}

// Q8_K by a block of 256 threads, thread t holding element t of the activation block in v: the
// same largest |x| (lowest index among equals) and quants as quant_block_warp<256>. Every thread
// of the block must call it (it has a block barrier).
__device__ __forceinline__ void quant_q8k_block256(float v, int8_t* qb, float* db) {
  __shared__ float vals[256];
  __shared__ float w_amax[8];
  __shared__ int w_idx[8];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  vals[tid] = v;
  float amax = 0.0f;
  int idx = 1 << 30;
  if (fabsf(v) > amax) {
    amax = fabsf(v);
    idx = tid;
  }
  auto better = [](float oa, int oi, float a, int i) { return oa > a || (oa == a && oi < i); };
  for (int o = 16; o > 0; o >>= 1) {
    const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (better(oa, oi, amax, idx)) { amax = oa; idx = oi; }
  }
  if (lane == 0) {
    w_amax[warp] = amax;
    w_idx[warp] = idx;
  }
  __syncthreads();
  amax = w_amax[0];
  idx = w_idx[0];
#pragma unroll
  for (int w = 1; w < 8; ++w)
    if (better(w_amax[w], w_idx[w], amax, idx)) { amax = w_amax[w]; idx = w_idx[w]; }
  if (amax == 0.0f) {
    qb[tid] = 0;
    if (tid == 0) *db = 0.0f;
    return;
  }
  const float iscale = -127.f / vals[idx];
  qb[tid] = int8_t(fminf(127.0f, rintf(iscale * v)));
  if (tid == 0) *db = 1.f / iscale;
}

}  // namespace brisk::cuda
