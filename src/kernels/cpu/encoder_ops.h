// CPU kernels of the encoder ops (core/op_args.h: LayerNormArgs, UnaryArgs, Im2colArgs,
// AttentionWeightsArgs), each processing part ith of nth of its rows, and their scalar
// references (namespace ref, double precision, single-threaded) that tests compare them with.
//   layer_norm_rows        two passes per row (mean, then centred variance), double sums
//   unary_rows             std::erf / std::tanh per element (the reference path's math, in float)
//   unary_rows_avx512      GELU (erf) with a rational erf approximation, 16 lanes: |error| of
//                          erf below 1.5e-7, GELU within 2e-7 * |x| of unary_rows
//                          (BRISK_NO_FAST_GELU turns it off)
//   im2col_rows            one output row per (sequence, frame): plain copies and zeros
//   attention_weights_rows one (token) row per item: scores, max, exp, normalise
//   attention_dense_rows   one (row, head) per item: scores over the sequence (or the row's
//                          local window, AttentionDenseArgs::key_range), softmax, sum
//   attention_dense_rows_avx512
//                          8 queries of one head per item against that head's keys transposed
//                          once per thread into [head_dim, positions] (16 positions per vector,
//                          each key column read once for 8 queries), softmax, then 4 queries at
//                          a time summing value rows; head_dim % 16 == 0. Reading each key and
//                          value once per 8 queries instead of once per query is what makes an
//                          encoder's 1500 x 1500 attention compute-bound (BRISK_NO_BLOCKED_ATTENTION
//                          turns it off); with a local window only the blocks of 16 keys that
//                          meet the 8 queries' windows are scored and summed
#pragma once
#include "core/op_args.h"

namespace brisk::cpu {

void layer_norm_rows(const LayerNormArgs& a, int ith, int nth);
void unary_rows(const UnaryArgs& a, int ith, int nth);
void unary_rows_avx512(const UnaryArgs& a, int ith, int nth);  // gelu_erf only
void im2col_rows(const Im2colArgs& a, int ith, int nth);
// scratch: head_dim floats for this part.
void attention_weights_rows(const AttentionWeightsArgs& a, float* scratch, int ith, int nth);
// Frames after an im2col of frames_in frames (0 when the kernel does not fit).
int64_t im2col_frames_out(int64_t frames_in, int32_t kernel, int32_t stride, int32_t pad);

// Scratch floats for one part: attention_dense_scratch_floats(a, fast).
int64_t attention_dense_scratch_floats(const AttentionDenseArgs& a, bool avx512);
void attention_dense_rows(const AttentionDenseArgs& a, float* scratch, int ith, int nth);
void attention_dense_rows_avx512(const AttentionDenseArgs& a, float* scratch, int ith, int nth);

float gelu_erf(float x);

}  // namespace brisk::cpu

namespace brisk::ref {

void layer_norm(const LayerNormArgs& a);
void unary(const UnaryArgs& a);
void im2col(const Im2colArgs& a);
void attention_weights(const AttentionWeightsArgs& a);
void attention_dense(const AttentionDenseArgs& a);

}  // namespace brisk::ref
