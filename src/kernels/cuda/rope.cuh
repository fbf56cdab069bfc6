// The rotation of one rotary pair, shared by the rope kernels (norm_rope.cu) and the attention
// kernel that ropes q / k itself (attention.cu), so that both give the same bits: the angle in
// double precision, cos / sin scaled by attn_factor in float, uncontracted float products.
#pragma once
#include <cstdint>

namespace brisk::cuda {

// cos / sin of the angle pos * inv_freq, as the rotation uses them.
__device__ __forceinline__ void rope_cos_sin(int64_t pos, float inv_freq, float attn_factor, float& c, float& s) {
  const double theta = double(pos) * double(inv_freq);
  double sd, cd;
  sincos(theta, &sd, &cd);
  c = __fmul_rn(float(cd), attn_factor);
  s = __fmul_rn(float(sd), attn_factor);
}

// (a, b) rotated by the angle of cos c, sin s.
__device__ __forceinline__ void rope_apply(float a, float b, float c, float s, float& a2, float& b2) {
  a2 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  b2 = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

__device__ __forceinline__ void rope_rotate(float a, float b, int64_t pos, float inv_freq, float attn_factor, float& a2,
                                            float& b2) {
  float c, s;
  rope_cos_sin(pos, inv_freq, attn_factor, c, s);
  rope_apply(a, b, c, s, a2, b2);
}

// Dims of rotary pair i: (i, i + n_rot / 2) with NeoX pairing, else (2i, 2i + 1).
__device__ __forceinline__ void rope_dims(int i, int n_rot, bool neox, int& d0, int& d1) {
  d0 = neox ? i : 2 * i;
  d1 = neox ? i + n_rot / 2 : 2 * i + 1;
}

}  // namespace brisk::cuda
