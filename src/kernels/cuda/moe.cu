// Mixture-of-experts routing and the weighted sum of the experts' outputs, on the device so
// that a decode step never asks the host which experts a token chose.
//   route:   one warp per token (the same launch may quantize the experts' input, one warp per
//            activation block); lanes hold experts lane, lane + 32, ...; the max, the sum of
//            exponentials (double, as the CPU), then n_used rounds of a warp argmax over the
//            experts not yet taken (ties: the lower id), each weight p = exp(l - max) / sum,
//            renormalized by the sum of the chosen p when norm_topk, then times the chosen
//            expert's scale when given (Gemma 4), with the CPU's roundings (kernels/cpu/moe.cpp);
//            with a shared expert (MoeSharedSlot), one more slot a token: expert id n_expert,
//            weight sigmoid(its gate logit) or 1.
//   combine: one block per token; the token's slots sorted by expert id, then each output
//            element summed over them in that order, as the CPU backend adds expert by expert.
//   scatter-add: for prefill, where the backend gathers each expert's tokens into one matmul:
//            one expert's output rows added, weighted, to their tokens' rows (one launch per
//            expert, in id order).
#include "kernels/cuda/act_quant.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

// The routing of token t by one warp; kPer experts a lane (n_expert <= 32 kPer).
// ids / w hold n_slot entries a token: the n_used routed ones, then (n_slot = n_used + 1) the
// shared expert's, id n_expert with weight sigmoid(shared_logit[t]) (1 without a logit).
template <int kPer>
__device__ __forceinline__ void moe_route_token(const float* logits, int64_t stride, int64_t t, int n_expert,
                                                int n_used, bool norm_topk, const float* scale, int32_t* ids,
                                                float* w, int n_slot, const float* shared_logit,
                                                int64_t shared_stride) {
  static_assert(kPer >= 1 && kPer <= 32, "taken is one 32-bit mask");
  const int lane = threadIdx.x & 31;
  const float* l = logits + t * stride;
  float v[kPer];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + 32 * i;
    v[i] = e < n_expert ? l[e] : -INFINITY;
    if (e < n_expert) mx = fmaxf(mx, v[i]);
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  double sum = 0.0;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + 32 * i < n_expert) sum += exp(double(v[i]) - double(mx));
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  uint32_t taken = 0;  // bit i: expert lane + 32 i
  double chosen = 0.0;
  int32_t* ti = ids + t * n_slot;
  float* tw = w + t * n_slot;
  for (int j = 0; j < n_used; ++j) {
    int best = -1;
    float bv = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = lane + 32 * i;
      if (e < n_expert && !(taken >> i & 1u) && (best < 0 || v[i] > bv)) {
        best = e;
        bv = v[i];
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const int ob = __shfl_xor_sync(0xffffffffu, best, o);
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      if (ob >= 0 && (best < 0 || ov > bv || (ov == bv && ob < best))) {
        best = ob;
        bv = ov;
      }
    }
    if (best >= 0 && (best & 31) == lane) taken |= 1u << (best >> 5);
    const double p = best >= 0 ? exp(double(bv) - double(mx)) / sum : 0.0;
    chosen += p;
    if (lane == 0) {
      ti[j] = best;
      tw[j] = float(p);
    }
  }
  if (norm_topk && lane == 0)
    for (int j = 0; j < n_used; ++j) tw[j] = float(double(tw[j]) / chosen);
  if (scale && lane == 0)
    for (int j = 0; j < n_used; ++j)
      if (ti[j] >= 0) tw[j] = __fmul_rn(tw[j], scale[ti[j]]);
  if (n_slot > n_used && lane == 0) {
    ti[n_used] = n_expert;
    tw[n_used] = shared_logit ? 1.0f / (1.0f + expf(-shared_logit[t * shared_stride])) : 1.0f;
  }
}

struct RouteArgs {
  const float* logits;
  int64_t stride, n_tok;
  int n_expert, n_used;
  bool norm_topk;
  const float* scale;  // [n_expert] or nullptr
  int32_t* ids;        // [n_tok, n_slot]
  float* w;            // [n_tok, n_slot]
  int n_slot;          // n_used, or n_used + 1 with a shared expert
  const float* shared_logit;  // [n_tok] (stride shared_stride) or nullptr
  int64_t shared_stride;
  // The experts' input quantized in the same launch (kQBlock > 0): x [n_tok, n_in] (row
  // stride x_stride) into q / d, one warp per block as launch_quantize_activations does.
  const float* x;
  int64_t x_stride, n_in;
  int8_t* q;
  float* d;
};

// Warps 0 .. n_tok - 1 route a token each; with kQBlock, the next n_tok * n_in / kQBlock warps
// quantize one activation block each (round_q8_kernel's arithmetic: the same bits).
template <int kPer, int kQBlock>
__global__ void moe_route_kernel(RouteArgs a) {
  BRISK_PDL_ENTER();
  const int64_t wi = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (wi < a.n_tok) {
    moe_route_token<kPer>(a.logits, a.stride, wi, a.n_expert, a.n_used, a.norm_topk, a.scale, a.ids, a.w, a.n_slot,
                          a.shared_logit, a.shared_stride);
    return;
  }
  if constexpr (kQBlock > 0) {
    const int64_t per_row = a.n_in / kQBlock, qi = wi - a.n_tok;
    if (qi >= a.n_tok * per_row) return;  // whole warps
    const int64_t r = qi / per_row, b = qi % per_row;
    const int lane = threadIdx.x & 31;
    const float* xb = a.x + r * a.x_stride + b * kQBlock;
    float v[kQBlock / 32];
#pragma unroll
    for (int k = 0; k < kQBlock / 32; ++k) v[k] = xb[k * 32 + lane];
    quant_block_warp<kQBlock>(v, a.q + r * a.n_in + b * kQBlock, a.d + r * per_row + b, nullptr);
  }
}

template <int kQBlock>
cudaError_t launch_route(const RouteArgs& a, cudaStream_t s) {
  constexpr int kWarps = 4;
  const int64_t warps = a.n_tok + (kQBlock > 0 ? a.n_tok * (a.n_in / kQBlock) : 0);
  const unsigned blocks = unsigned((warps + kWarps - 1) / kWarps);
  const int per = (a.n_expert + 31) / 32;
  if (per <= 1) launch_kernel(moe_route_kernel<1, kQBlock>, blocks, 32 * kWarps, 0, s, a);
  else if (per <= 2) launch_kernel(moe_route_kernel<2, kQBlock>, blocks, 32 * kWarps, 0, s, a);
  else if (per <= 4) launch_kernel(moe_route_kernel<4, kQBlock>, blocks, 32 * kWarps, 0, s, a);
  else if (per <= 8) launch_kernel(moe_route_kernel<8, kQBlock>, blocks, 32 * kWarps, 0, s, a);
  else if (per <= 16) launch_kernel(moe_route_kernel<16, kQBlock>, blocks, 32 * kWarps, 0, s, a);
  else launch_kernel(moe_route_kernel<32, kQBlock>, blocks, 32 * kWarps, 0, s, a);
  return cudaGetLastError();
}

__global__ void moe_combine_kernel(float* out, int64_t out_stride, int64_t n_embd, const float* d,
                                   const int32_t* ids, const float* w, int n_used, const int32_t* rows) {
  BRISK_PDL_ENTER();
  __shared__ int order[kMoeMaxUsed];
  const int64_t t = blockIdx.y;
  if (threadIdx.x == 0) {
    // Insertion sort of the token's slots by expert id (n_used is small).
    for (int j = 0; j < n_used; ++j) {
      int k = j;
      while (k > 0 && ids[t * n_used + order[k - 1]] > ids[t * n_used + j]) {
        order[k] = order[k - 1];
        --k;
      }
      order[k] = j;
    }
  }
  __syncthreads();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_embd) return;
  float o = 0.0f;
  for (int j = 0; j < n_used; ++j) {
    const int64_t pair = t * n_used + order[j];
    const int64_t row = rows ? rows[pair] : pair;
    if (row >= 0) o = fmaf(w[pair], d[row * n_embd + i], o);
  }
  out[t * out_stride + i] = o;
}

// The pairs grouped by expert on the device, for steps that must not ask the host (one block):
// each valid pair gets a row in its expert's run of rows (runs in expert id order; within a run
// the order the block's atomics hand out, which no row's result depends on). Writes row_tok
// [nk] (each row's token; 0 past the valid rows, so that a gather of nk rows stays in bounds),
// pair_row [nk] (-1: the pair has no expert), items [..][3] (expert, first row, rows <= 8: the
// runs cut in pieces of 8) and n_items [1].
__global__ void moe_group_kernel(const int32_t* ids, int64_t nk, int n_used, int n_expert, int32_t* row_tok,
                                 int32_t* pair_row, int32_t* items, int32_t* n_items) {
  BRISK_PDL_ENTER();
  __shared__ int cnt[kMoeMaxExperts], start[kMoeMaxExperts], istart[kMoeMaxExperts], fill[kMoeMaxExperts];
  __shared__ int total;
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int e = tid; e < n_expert; e += nt) cnt[e] = fill[e] = 0;
  __syncthreads();
  for (int64_t i = tid; i < nk; i += nt) {
    const int e = ids[i];
    if (e >= 0 && e < n_expert) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (tid == 0) {
    int s = 0, si = 0;
    for (int e = 0; e < n_expert; ++e) {
      start[e] = s;
      istart[e] = si;
      s += cnt[e];
      si += (cnt[e] + kMoeItemRows - 1) / kMoeItemRows;
    }
    total = s;
    n_items[0] = si;
  }
  __syncthreads();
  for (int64_t i = tid; i < nk; i += nt) {
    const int e = ids[i];
    if (e >= 0 && e < n_expert) {
      const int r = start[e] + atomicAdd(&fill[e], 1);
      row_tok[r] = int32_t(i / n_used);
      pair_row[i] = r;
    } else {
      pair_row[i] = -1;
    }
  }
  for (int64_t r = total + tid; r < nk; r += nt) row_tok[r] = 0;
  for (int e = tid; e < n_expert; e += nt)
    for (int k = 0; k * kMoeItemRows < cnt[e]; ++k) {
      int32_t* it = items + 3 * int64_t(istart[e] + k);
      it[0] = e;
      it[1] = start[e] + k * kMoeItemRows;
      it[2] = min(kMoeItemRows, cnt[e] - k * kMoeItemRows);
    }
}

__global__ void moe_scatter_add_kernel(float* out, int64_t out_stride, int64_t cols, const float* d, const int32_t* tok,
                                       const int32_t* pair, const float* w) {
  BRISK_PDL_ENTER();
  const int64_t j = blockIdx.y, i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= cols) return;
  float& o = out[int64_t(tok[j]) * out_stride + i];
  o = fmaf(w[pair[j]], d[j * cols + i], o);
}

}  // namespace

cudaError_t launch_moe_scatter_add(const Mat& out, const float* d, int64_t m, const int32_t* tok, const int32_t* pair,
                                   const float* w, cudaStream_t s) {
  if (m > 65535) return cudaErrorInvalidValue;
  if (m == 0 || out.cols == 0) return cudaSuccess;
  const dim3 grid(unsigned((out.cols + 255) / 256), unsigned(m));
  launch_kernel(moe_scatter_add_kernel, grid, 256, 0, s, out.data, out.row_stride(), out.cols, d, tok, pair, w);
  return cudaGetLastError();
}

int64_t moe_group_max_items(int64_t nk, int n_expert) { return nk / kMoeItemRows + (nk < n_expert ? nk : n_expert); }

cudaError_t launch_moe_group(const int32_t* ids, int64_t nk, int n_used, int n_expert, int32_t* row_tok,
                             int32_t* pair_row, int32_t* items, int32_t* n_items, cudaStream_t s) {
  if (n_expert < 1 || n_expert > kMoeMaxExperts || n_used < 1 || nk < 0) return cudaErrorInvalidValue;
  if (nk == 0) return cudaSuccess;
  launch_kernel(moe_group_kernel, 1, 1024, 0, s, ids, nk, n_used, n_expert, row_tok, pair_row, items, n_items);
  return cudaGetLastError();
}

cudaError_t launch_moe_route(const Mat& logits, int n_expert, int n_used, bool norm_topk, int32_t* ids, float* w,
                             cudaStream_t s, ActRound quant, const QuantAct* q, const Mat* x,
                             const float* expert_scale, const MoeSharedSlot* shared) {
  static_assert(kMoeMaxExperts <= 32 * 32, "the routing keeps at most 32 experts a lane");
  if (n_expert < 1 || n_expert > kMoeMaxExperts || n_used < 1 || n_used > n_expert || n_used > kMoeMaxUsed ||
      logits.cols < n_expert || (shared && n_used + 1 > kMoeMaxUsed))
    return cudaErrorInvalidValue;
  if (quant != ActRound::none &&
      (!q || !x || x->rows != logits.rows || (quant != ActRound::q8_0 && quant != ActRound::q8_k) ||
       x->cols % (quant == ActRound::q8_0 ? 32 : 256) != 0))
    return cudaErrorInvalidValue;
  if (logits.rows == 0) return cudaSuccess;
  RouteArgs a{.logits = static_cast<const float*>(logits.data), .stride = logits.row_stride(), .n_tok = logits.rows,
              .n_expert = n_expert, .n_used = n_used, .norm_topk = norm_topk, .scale = expert_scale, .ids = ids, .w = w,
              .n_slot = n_used + (shared ? 1 : 0), .shared_logit = shared ? shared->logit : nullptr,
              .shared_stride = shared ? shared->stride : 0, .x = nullptr,
              .x_stride = 0, .n_in = 0, .q = nullptr, .d = nullptr};
  if (quant == ActRound::none) return launch_route<0>(a, s);
  a.x = x->data;
  a.x_stride = x->row_stride();
  a.n_in = x->cols;
  a.q = const_cast<int8_t*>(q->q);
  a.d = const_cast<float*>(q->d);
  return quant == ActRound::q8_0 ? launch_route<32>(a, s) : launch_route<256>(a, s);
}

cudaError_t launch_moe_combine(const Mat& out, const float* d, const int32_t* ids, const float* w, int n_used,
                               cudaStream_t s, const int32_t* rows) {
  if (n_used < 1 || n_used > kMoeMaxUsed || out.rows > 65535) return cudaErrorInvalidValue;
  if (out.rows == 0 || out.cols == 0) return cudaSuccess;
  const dim3 grid(unsigned((out.cols + 255) / 256), unsigned(out.rows));
  launch_kernel(moe_combine_kernel, grid, 256, 0, s, out.data, out.row_stride(), out.cols, d, ids, w, n_used, rows);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
