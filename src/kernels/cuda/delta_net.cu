// The small ops of linear-attention (Gated DeltaNet) layers: the causal depthwise conv with its
// rolling per-sequence window, L2 norm, the SiLU-gated RMS norm and x * sigmoid(gate). The gated
// delta rule itself is in delta_rule.cu.
//
// Conv (ConvStateArgs). x [n_tok, C], weight [C, K] (tap K - 1 on the current token), state slot
// [K - 1, C] per sequence (oldest position first). Nothing is planned on the host: the tokens of
// a sequence are found through the step's sequence ids in device memory, so the same launch
// serves any mix of sequences and a decode step stays one graph whatever slots its tokens name.
//   - conv_kernel: one thread per (token, channel). Its window is the current input, the inputs
//     of the same sequence's earlier tokens in the batch (found by walking back over the
//     sequence ids: K - 1 steps for one sequence's prompt, at most the batch for a decode step of
//     distinct sequences), and for the part before the batch the slot's rows (zeros when the
//     sequence's first token in the batch is at position 0, as the CPU kernels do). Taps are
//     summed in tap order, as the CPU does.
//   - conv_state_kernel (a second launch: the first reads the old windows): one thread per
//     (token, channel) whose token is its sequence's last in the batch writes the new window,
//     the last K - 1 inputs of the sequence (older rows shifted from the old window). A step of
//     one token (decode of one sequence) writes it in the first launch instead: each channel's
//     window is read by its own thread only (BRISK_NO_CUDA_CONV_INLINE_STATE: two launches).
//   - conv_l2_kernel: conv_kernel's values with up to two column ranges of the output (a
//     delta-net layer's q and k) L2-normalised in place per group, as launch_l2_norm would after
//     it: one block per (token, group of channels), a thread per channel as conv_kernel, then
//     the group's sum of squares as group_norm_kernel's warp takes it (same bits).
// Norms: one warp per (row, group), sums of squares in float over the lanes, then a fixed-order
// shuffle tree; x may alias out (a lane reads its elements before writing them).
#include "core/flags.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

constexpr int kConvMaxTaps = 16;  // as the CPU backend checks

struct ConvParams {
  float* out;
  int64_t out_stride;
  const float* x;
  int64_t x_stride;
  const float* weight;  // [C, K]
  float* state;         // [n_slots, (K - 1) * C]
  int64_t slot_floats;
  const int32_t* seq;
  const int32_t* pos;
  int64_t n_tok;
  int64_t channels;
  int kernel;
  bool silu;
  bool state_inline;  // one token: its thread also writes the new window (no second launch)
};

__device__ __forceinline__ float silu_f(float v) { return v / (1.0f + expf(-v)); }

// Window of token t, channel c: win[0, K) with win[K - 1] = x[t][c]. Returns the number of
// batch inputs placed (the rest came from the state or zeros).
__device__ void conv_window(const ConvParams& p, int64_t t, int64_t c, float* win) {
  const int K = p.kernel;
  const int32_t s = p.seq[t];
  win[K - 1] = p.x[t * p.x_stride + c];
  int j = K - 2;
  int64_t first = t;  // the earliest token of the sequence found so far
  for (int64_t i = t - 1; i >= 0 && j >= 0; --i) {
    if (p.seq[i] != s) continue;
    win[j--] = p.x[i * p.x_stride + c];
    first = i;
  }
  if (j < 0) return;
  // Ran out of batch tokens: `first` is the sequence's first token in the batch; taps 0..j come
  // from the rows before it (row K - 2 is the position just before `first`).
  const bool fresh = p.pos[first] == 0;
  const float* st = p.state + int64_t(s) * p.slot_floats;
  for (int jj = j; jj >= 0; --jj) {
    const int row = K - 2 - (j - jj);
    win[jj] = fresh ? 0.0f : st[int64_t(row) * p.channels + c];
  }
}

// Output (token t, channel c) of the conv. With state_inline (a step of one token, so no other
// thread reads this channel's window), the thread writes the next window after reading it, as
// conv_state_kernel would.
__device__ __forceinline__ float conv_value(const ConvParams& p, int64_t t, int64_t c) {
  float win[kConvMaxTaps];
  conv_window(p, t, c, win);
  float acc = 0.0f;
  for (int j = 0; j < p.kernel; ++j) acc += p.weight[c * p.kernel + j] * win[j];
  if (p.state_inline) {
    float* st = p.state + int64_t(p.seq[t]) * p.slot_floats;
    for (int r = 0; r < p.kernel - 1; ++r) st[int64_t(r) * p.channels + c] = win[r + 1];
  }
  return p.silu ? silu_f(acc) : acc;
}

__global__ void conv_kernel(ConvParams p) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n_tok * p.channels) return;
  const int64_t t = i / p.channels, c = i % p.channels;
  p.out[t * p.out_stride + c] = conv_value(p, t, c);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One block per (token, group of channels), a thread per channel: the conv outputs, then, for a
// group inside a normalised range, out = out / sqrt(sum(out^2) + eps) with warp 0 summing the
// squares as group_norm_kernel<false>'s warp does (lane i: elements i, i + 32, ... in order).
__global__ void conv_l2_kernel(ConvParams p, ConvL2Ranges r) {
  BRISK_PDL_ENTER();
  __shared__ float inv_s;
  const int64_t per_tok = p.channels / r.group;
  const int64_t t = int64_t(blockIdx.x) / per_tok, c0 = (int64_t(blockIdx.x) % per_tok) * r.group;
  float* y = p.out + t * p.out_stride + c0;
  const int i = threadIdx.x;  // blockDim.x == group
  y[i] = conv_value(p, t, c0 + i);
  int k = -1;
  for (int j = 0; j < r.n; ++j)
    if (c0 >= r.col0[j] && c0 < r.col0[j] + r.cols[j]) k = j;
  if (k < 0) return;  // block-uniform
  __syncthreads();
  if (i < 32) {
    float ss = 0.0f;
    for (int64_t e = i; e < r.group; e += 32) ss += y[e] * y[e];
    ss = warp_sum(ss);
    if (i == 0) inv_s = float(1.0 / sqrt(double(ss) + double(r.eps[k])));
  }
  __syncthreads();
  y[i] = y[i] * inv_s;
}

__global__ void conv_state_kernel(ConvParams p) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n_tok * p.channels) return;
  const int64_t t = i / p.channels, c = i % p.channels;
  const int32_t s = p.seq[t];
  for (int64_t u = t + 1; u < p.n_tok; ++u)
    if (p.seq[u] == s) return;  // not the sequence's last token
  // The window of the next position is this token's window shifted by one.
  float win[kConvMaxTaps + 1];
  conv_window(p, t, c, win);
  float* st = p.state + int64_t(s) * p.slot_floats;
  for (int r = 0; r < p.kernel - 1; ++r) st[int64_t(r) * p.channels + c] = win[r + 1];
}

struct NormParams {
  float* out;
  int64_t out_stride;
  const float* x;
  int64_t x_stride;
  const float* z;  // gated norm: [rows, cols]
  int64_t z_stride;
  const float* weight;  // gated norm: [group]
  int64_t rows, cols, group;
  float eps;
};

// Warp `item` = (row, group) of a norm. kGated: out = x / rms(x) * weight * silu(z); else
// out = x / sqrt(sum(x^2) + eps).
template <bool kGated>
__device__ __forceinline__ void group_norm_warp(const NormParams& p, int64_t item, int lane) {
  const int64_t per_row = p.cols / p.group;
  if (item >= p.rows * per_row) return;
  const int64_t r = item / per_row, c0 = (item % per_row) * p.group;
  const float* x = p.x + r * p.x_stride + c0;
  float* y = p.out + r * p.out_stride + c0;
  float ss = 0.0f;
  for (int64_t i = lane; i < p.group; i += 32) ss += x[i] * x[i];
  ss = warp_sum(ss);
  if (kGated) {
    const float inv = float(1.0 / sqrt(double(ss) / double(p.group) + double(p.eps)));
    const float* z = p.z + r * p.z_stride + c0;
    for (int64_t i = lane; i < p.group; i += 32) y[i] = x[i] * inv * p.weight[i] * silu_f(z[i]);
  } else {
    const float inv = float(1.0 / sqrt(double(ss) + double(p.eps)));
    for (int64_t i = lane; i < p.group; i += 32) y[i] = x[i] * inv;
  }
}

template <bool kGated>
__global__ void group_norm_kernel(NormParams p) {
  BRISK_PDL_ENTER();
  group_norm_warp<kGated>(p, (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5, int(threadIdx.x & 31));
}

// Two independent L2 norms in one launch (a delta-net layer's q and k): warps [0, warps_a) take
// part a, the rest part b, each warp computing what group_norm_kernel<false> computes.
__global__ void l2_norm_pair_kernel(NormParams a, NormParams b, int64_t warps_a) {
  BRISK_PDL_ENTER();
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const bool second = item >= warps_a;  // warp-uniform
  group_norm_warp<false>(second ? b : a, second ? item - warps_a : item, int(threadIdx.x & 31));
}

__global__ void sigmoid_mul_kernel(float* out, int64_t out_stride, const float* x, int64_t x_stride, const float* g,
                                   int64_t g_stride, int64_t rows, int64_t cols, bool per_row) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const float gv = g[r * g_stride + (per_row ? 0 : c)];
  out[r * out_stride + c] = x[r * x_stride + c] / (1.0f + expf(-gv));
}

unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

constexpr int kConvThreads = 256;

ConvParams conv_params(const ConvStateArgs& a) {
  return ConvParams{.out = a.out.data, .out_stride = a.out.row_stride(), .x = a.x.data, .x_stride = a.x.row_stride(),
                    .weight = a.weight, .state = a.state.data, .slot_floats = a.state.slot_floats, .seq = a.seq,
                    .pos = a.pos, .n_tok = a.x.rows, .channels = a.x.cols, .kernel = a.kernel, .silu = a.silu,
                    .state_inline = a.x.rows == 1 && !flags().no_cuda_conv_inline_state};
}

// The next windows after the conv's launch: none for one tap or when the conv wrote them inline.
cudaError_t launch_conv_window(const ConvParams& p, cudaStream_t stream) {
  if (p.kernel == 1 || p.state_inline) return cudaSuccess;
  return launch_kernel(conv_state_kernel, dim3(blocks_for(p.n_tok * p.channels, kConvThreads)), dim3(kConvThreads), 0,
                       stream, p);
}

}  // namespace

cudaError_t launch_conv_state(const ConvStateArgs& a, cudaStream_t stream) {
  const int64_t n = a.x.rows * a.x.cols;
  if (n == 0) return cudaSuccess;
  if (a.kernel < 1 || a.kernel > kConvMaxTaps) return cudaErrorInvalidValue;
  const ConvParams p = conv_params(a);
  const cudaError_t e = launch_kernel(conv_kernel, dim3(blocks_for(n, kConvThreads)), dim3(kConvThreads), 0, stream, p);
  return e != cudaSuccess ? e : launch_conv_window(p, stream);
}

bool conv_l2_group_supported(int64_t group) { return group > 0 && group % 32 == 0 && group <= 1024; }

cudaError_t launch_conv_state_l2(const ConvStateArgs& a, const ConvL2Ranges& r, cudaStream_t stream) {
  const int64_t n = a.x.rows * a.x.cols;
  if (n == 0) return cudaSuccess;
  if (a.kernel < 1 || a.kernel > kConvMaxTaps || !conv_l2_group_supported(r.group) || a.x.cols % r.group != 0 ||
      r.n < 1 || r.n > 2)
    return cudaErrorInvalidValue;
  for (int j = 0; j < r.n; ++j)
    if (r.col0[j] < 0 || r.col0[j] % r.group != 0 || r.cols[j] % r.group != 0 || r.col0[j] + r.cols[j] > a.x.cols)
      return cudaErrorInvalidValue;
  const ConvParams p = conv_params(a);
  const cudaError_t e = launch_kernel(conv_l2_kernel, dim3(unsigned(a.x.rows * (a.x.cols / r.group))),
                                      dim3(unsigned(r.group)), 0, stream, p, r);
  return e != cudaSuccess ? e : launch_conv_window(p, stream);
}

cudaError_t launch_l2_norm(const L2NormArgs& a, cudaStream_t stream) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  const NormParams p{.out = a.out.data, .out_stride = a.out.row_stride(), .x = a.x.data, .x_stride = a.x.row_stride(),
                     .z = nullptr, .z_stride = 0, .weight = nullptr, .rows = a.x.rows, .cols = a.x.cols,
                     .group = group, .eps = a.eps};
  const int64_t warps = a.x.rows * (a.x.cols / group);
  if (warps == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  return launch_kernel(group_norm_kernel<false>, dim3(blocks_for(warps * 32, kThreads)), dim3(kThreads), 0, stream, p);
}

cudaError_t launch_l2_norm_pair(const L2NormArgs& a, const L2NormArgs& b, cudaStream_t stream) {
  auto params = [](const L2NormArgs& n) {
    return NormParams{.out = n.out.data, .out_stride = n.out.row_stride(), .x = n.x.data, .x_stride = n.x.row_stride(),
                      .z = nullptr, .z_stride = 0, .weight = nullptr, .rows = n.x.rows, .cols = n.x.cols,
                      .group = n.group > 0 ? n.group : n.x.cols, .eps = n.eps};
  };
  const NormParams pa = params(a), pb = params(b);
  const int64_t warps_a = pa.rows * (pa.cols / pa.group), warps = warps_a + pb.rows * (pb.cols / pb.group);
  if (warps == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  return launch_kernel(l2_norm_pair_kernel, dim3(blocks_for(warps * 32, kThreads)), dim3(kThreads), 0, stream, pa, pb,
                       warps_a);
}

cudaError_t launch_gated_rms_norm(const GatedRmsNormArgs& a, cudaStream_t stream) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  const NormParams p{.out = a.out.data, .out_stride = a.out.row_stride(), .x = a.x.data, .x_stride = a.x.row_stride(),
                     .z = a.z.data, .z_stride = a.z.row_stride(), .weight = a.weight, .rows = a.x.rows,
                     .cols = a.x.cols, .group = group, .eps = a.eps};
  const int64_t warps = a.x.rows * (a.x.cols / group);
  if (warps == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  return launch_kernel(group_norm_kernel<true>, dim3(blocks_for(warps * 32, kThreads)), dim3(kThreads), 0, stream, p);
}

cudaError_t launch_sigmoid_mul(const SigmoidMulArgs& a, cudaStream_t stream) {
  const int64_t n = a.x.rows * a.x.cols;
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const bool per_row = a.gate.cols == 1 && a.x.cols != 1;
  return launch_kernel(sigmoid_mul_kernel, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, stream, a.out.data,
                       a.out.row_stride(), static_cast<const float*>(a.x.data), a.x.row_stride(),
                       static_cast<const float*>(a.gate.data), a.gate.row_stride(), a.x.rows, a.x.cols, per_row);
}

}  // namespace brisk::cuda
