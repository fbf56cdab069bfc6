// RMS norm (per row or per head group; over whole rows optionally fused with the quantization
// of its output for the next matmul) and rotary embedding (normal / NeoX pairing, partial
// rotation of the first n_rot dims of each head).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/act_quant.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/kv_paged.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rope.cuh"

namespace brisk::cuda {

namespace {

constexpr int kNormMaxThreads = 1024;
constexpr int kNormPer = 8;          // values per thread kept in registers (one load round trip)
constexpr int kNormRowCache = 8192;  // floats of the output row kept in shared memory for the quantization

// One block per (row, group): out = x / sqrt(mean(x^2) + eps) * weight. Each thread loads its
// (up to kNormPer) values at once, so the row costs one memory round trip. With kQuantBlock > 0
// (whole-row groups only) the block then quantizes its output row for the next matmul, one
// warp per activation block (act_quant.cuh).
// With add.b (whole rows): the row is first x + b (the residual add), written to add.sum.
struct NormAdd {
  const float* b = nullptr;
  int64_t b_stride = 0;
  float* sum = nullptr;
  int64_t sum_stride = 0;
};

//
// A row (group) can be cut into slices of `slice` elements (a multiple of kQuantBlock), one
// block each: every block sums the squares of the whole row in the same order (so all get the
// same scale, equal to the one-block result), then writes and quantizes its slice only. A
// 4096-wide decode row then runs on 16 multiprocessors instead of one.
// kQuantBlock 1 / 2: the output rounded through F16 / BF16 goes to qd ([rows, group] dense)
// instead, as launch_round_activations writes it.
template <bool kBf16>
__device__ __forceinline__ float round_half(float v) {
  return kBf16 ? __bfloat162float(__float2bfloat16_rn(v)) : __half2float(__float2half_rn(v));
}

// blk: the block's index among the n_blk blocks of this norm.
template <int kQuantBlock>
__device__ __forceinline__ void rms_norm_block(int64_t blk, unsigned n_blk, float* out, int64_t out_stride,
                                               const float* x, int64_t x_stride, const float* weight, int64_t group,
                                               int64_t n_groups, float eps, int8_t* q, float* qd, NormAdd add,
                                               int64_t slice, unsigned* bar, bool weight_early) {
  const int64_t n_sl = (group + slice - 1) / slice;
  const int64_t rg = blk / n_sl, s0 = (blk % n_sl) * slice;
  const int64_t s1 = s0 + slice < group ? s0 + slice : group;
  const int64_t r = rg / n_groups, g = rg % n_groups;
  const int nt = blockDim.x, n_warps = nt / 32;
  // The weights of this thread's register-held outputs; with weight_early (constant weights)
  // read before the dependent-launch wait.
  float wv[kNormPer];
  auto load_weights = [&]() {
#pragma unroll
    for (int k = 0; k < kNormPer; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * nt;
      wv[k] = weight && i >= s0 && i < s1 ? weight[i] : 1.0f;
    }
  };
  if (weight_early) load_weights();
  BRISK_PDL_ENTER();
  if (!weight_early) load_weights();
  const float* xr = x + r * x_stride + g * group;
  float* orow = out + r * out_stride + g * group;
  const float* br = add.b ? add.b + r * add.b_stride : nullptr;
  float* sr = add.b ? add.sum + r * add.sum_stride : nullptr;
  // Reads element i of the input row (the residual sum when adding; elements past the
  // register-held ones are stored on the way, those are stored with the output).
  const int64_t n_reg = int64_t(kNormPer) * nt;
  auto input = [&](int64_t i) {
    if (!br) return xr[i];
    const float v = xr[i] + br[i];
    if (i >= n_reg) sr[i] = v;
    return v;
  };
  float v[kNormPer];
#pragma unroll
  for (int k = 0; k < kNormPer; ++k) {
    const int64_t i = threadIdx.x + int64_t(k) * nt;
    v[k] = i < group ? input(i) : 0.0f;
  }
  // Double accumulation and uncontracted float products, as the CPU backend computes them.
  double ss = 0.0;
#pragma unroll
  for (int k = 0; k < kNormPer; ++k) ss += double(v[k]) * double(v[k]);
  for (int64_t i = threadIdx.x + int64_t(kNormPer) * nt; i < group; i += nt) {
    const float xi = input(i);
    ss += double(xi) * double(xi);
  }
  __shared__ double part[kNormMaxThreads / 32];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < n_warps; ++w) total += part[w];
  const float inv = float(1.0 / sqrt(total / double(group) + double(eps)));
  if (bar) {
    // The row is written in place (the sum over its input, or the output over x): no block
    // writes before every block of the launch has read its row (all of them are resident).
    __syncthreads();
    if (threadIdx.x == 0) {
      volatile unsigned* gen = bar + 1;
      const unsigned g0 = *gen;
      __threadfence();
      if (atomicAdd(bar, 1u) == n_blk - 1) {
        bar[0] = 0;
        __threadfence();
        atomicAdd(bar + 1, 1u);
      } else {
        while (*gen == g0) {
        }
      }
      __threadfence();
    }
    __syncthreads();
  }
  constexpr int kCache = kQuantBlock > 2 ? kNormRowCache : 1;
  __shared__ float row_s[kCache];
  const bool cached = kQuantBlock > 2 && group <= kNormRowCache;
#pragma unroll
  for (int k = 0; k < kNormPer; ++k) {
    const int64_t i = threadIdx.x + int64_t(k) * nt;
    if (i >= s0 && i < s1) {
      if (br) sr[i] = v[k];
      const float y = __fmul_rn(v[k], inv);
      const float o = weight ? __fmul_rn(y, wv[k]) : y;
      orow[i] = o;
      if (cached) row_s[i] = o;
      if constexpr (kQuantBlock == 1 || kQuantBlock == 2) qd[r * group + i] = round_half<kQuantBlock == 2>(o);
    }
  }
  for (int64_t i = threadIdx.x + int64_t(kNormPer) * nt; i < group; i += nt) {
    if (i < s0 || i >= s1) continue;
    const float y = __fmul_rn(br ? sr[i] : xr[i], inv);
    const float o = weight ? __fmul_rn(y, weight[i]) : y;
    orow[i] = o;
    if (cached) row_s[i] = o;
    if constexpr (kQuantBlock == 1 || kQuantBlock == 2) qd[r * group + i] = round_half<kQuantBlock == 2>(o);
  }
  if constexpr (kQuantBlock > 2) {
    __syncthreads();  // the row is written (shared, and global writes of the block are visible after it)
    constexpr int kPer = kQuantBlock / 32;
    const int lane = threadIdx.x & 31;
    for (int64_t b = s0 / kQuantBlock + (threadIdx.x >> 5); b * kQuantBlock < s1; b += n_warps) {
      float w[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int64_t i = b * kQuantBlock + k * 32 + lane;
        w[k] = cached ? row_s[i] : orow[i];
      }
      quant_block_warp<kQuantBlock>(w, q + r * group + b * kQuantBlock, qd + r * (group / kQuantBlock) + b, nullptr);
    }
  }
}

template <int kQuantBlock>
__global__ void __launch_bounds__(kNormMaxThreads) rms_norm_kernel(float* out, int64_t out_stride, const float* x,
                                                                   int64_t x_stride, const float* weight, int64_t group,
                                                                   int64_t n_groups, float eps, int8_t* q, float* qd,
                                                                   NormAdd add, int64_t slice, unsigned* bar,
                                                                   bool weight_early) {
  rms_norm_block<kQuantBlock>(blockIdx.x, gridDim.x, out, out_stride, x, x_stride, weight, group, n_groups, eps, q, qd,
                              add, slice, bar, weight_early);
}

// Independent group norms of one group size in one launch (launch_rms_norm_parts): part i takes
// blocks [end[i - 1], end[i]), each computing what launch_rms_norm of that part computes.
struct NormPart {
  float* out;
  int64_t out_stride;
  const float* x;
  int64_t x_stride;
  const float* weight;
  int64_t n_groups;
  float eps;
  bool weight_early;
};
struct NormParts {
  NormPart p[kMaxNormParts];
  int64_t end[kMaxNormParts];
  int n;
  int64_t group;
};

__global__ void __launch_bounds__(kNormMaxThreads) rms_norm_parts_kernel(NormParts ps) {
  int i = 0;
  while (i + 1 < ps.n && int64_t(blockIdx.x) >= ps.end[i]) ++i;  // block-uniform
  const int64_t b0 = i > 0 ? ps.end[i - 1] : 0;
  const NormPart p = ps.p[i];
  rms_norm_block<0>(int64_t(blockIdx.x) - b0, unsigned(ps.end[i] - b0), p.out, p.out_stride, p.x, p.x_stride, p.weight,
                    ps.group, p.n_groups, p.eps, nullptr, nullptr, NormAdd{}, ps.group, nullptr, p.weight_early);
}

// Elements per block of a whole-row norm of `rows` rows: slices of 256 (a multiple of every
// activation block) while that leaves about two blocks per multiprocessor or fewer; the whole
// row for short or odd rows and for many rows.
// A row written in place (`in_place`) is cut only with a barrier, for at most one block per
// multiprocessor in all (so that every block of the launch is resident together).
// One token's norm into Q8_K activations (`kind`) stays one block (same results): split, it
// measured slower (H200, Q4_K_M decode: Llama-3.1-8B shape -0.7 %, Qwen3-30B-A3B shape
// -2.4 %), while Q8_0 decode gains 3 % from the split; several rows keep the split.
int64_t norm_slice(int64_t rows, int64_t cols, bool in_place, const unsigned* bar, ActRound kind) {
  if (flags().no_cuda_norm_split || cols % 256 != 0 || cols < 1024 || cols > int64_t(kNormPer) * kNormMaxThreads)
    return cols;
  if (kind == ActRound::q8_k && rows == 1 && !flags().no_cuda_norm_whole_q8k) return cols;
  if (in_place && !bar) return cols;
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    sms = 132;
  cudaGetLastError();
  const int64_t want = rows > 0 ? (in_place ? 1 : 2) * int64_t(sms) / rows : 1;
  if (want < 2) return cols;
  const int64_t n = cols / 256 < want ? cols / 256 : want;
  return (cols / n + 255) / 256 * 256;
}

// Whether [a, a + an) and [b, b + bn) (floats) overlap.
bool overlap(const float* a, int64_t an, const float* b, int64_t bn) {
  if (!a || !b) return false;
  return a < b + bn && b < a + an;
}
int64_t span(int64_t rows, int64_t stride, int64_t cols) { return rows > 0 ? (rows - 1) * stride + cols : 0; }

// Threads for a group: enough for kNormPer values each, a multiple of 32, at most 1024.
unsigned norm_threads(int64_t group) {
  int64_t t = (group + kNormPer - 1) / kNormPer;
  t = (t + 31) / 32 * 32;
  return unsigned(t < 32 ? 32 : t > kNormMaxThreads ? kNormMaxThreads : t);
}

// Rotates pair i of head h of row t in place (rope_kernel and rope_store_kernel); returns the
// rotated values through a2 / b2 and their dims through d0 / d1.
__device__ __forceinline__ void rope_pair(float* x, int64_t stride, int64_t t, int64_t h, int i, int head_dim,
                                          int n_rot, const int32_t* pos, const float* inv_freq, float attn_factor,
                                          bool neox, float& a2, float& b2, int& d0, int& d1) {
  float* v = x + t * stride + h * head_dim;
  rope_dims(i, n_rot, neox, d0, d1);
  rope_rotate(v[d0], v[d1], pos[t], inv_freq[i], attn_factor, a2, b2);
  v[d0] = a2;
  v[d1] = b2;
}

// One thread per (token, head, rotated pair).
__global__ void rope_kernel(float* x, int64_t stride, int64_t n_tok, int n_head, int head_dim, int n_rot,
                            const int32_t* pos, const float* inv_freq, float attn_factor, bool neox) {
  BRISK_PDL_ENTER();
  const int half = n_rot / 2;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_tok * n_head * half) return;
  const int i = int(idx % half);
  const int64_t h = (idx / half) % n_head, t = idx / (int64_t(half) * n_head);
  float a2, b2;
  int d0, d1;
  rope_pair(x, stride, t, h, i, head_dim, n_rot, pos, inv_freq, attn_factor, neox, a2, b2, d0, d1);
}


// rope_qk_store_kernel: the rotary embedding of q and of k and the KV cache store of k and v
// (kv_store_kernel's conversion) in one launch. Items: q pairs, then k pairs (whose thread
// also stores the rotated pair), then (token, column) of the cache width (stores v, and k
// where the column is past the rotated dims of its head). n_q = 0 leaves q out; st.kc null
// leaves the store out.
struct RopeStore {
  uint8_t* kc = nullptr;
  uint8_t* vc = nullptr;
  size_t k_row_bytes = 0, v_row_bytes = 0;
  KvView table;  // the block table of both caches (kv_paged.cuh)
  const float* v = nullptr;
  int64_t v_stride = 0;
  const int32_t* seq = nullptr;
};

template <KvT T>
__global__ void rope_qk_store_kernel(float* q, int64_t q_stride, int n_q_head, float* k, int64_t k_stride,
                                     int n_k_head, int64_t n_tok, int head_dim, int n_rot, const int32_t* pos,
                                     const float* inv_freq, float attn_factor, bool neox, RopeStore st) {
  BRISK_PDL_ENTER();
  const int half = n_rot / 2;
  int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_qp = q ? n_tok * n_q_head * half : 0, n_kp = n_tok * n_k_head * half;
  const int64_t width = int64_t(n_k_head) * head_dim;
  float a2, b2;
  int d0, d1;
  if (idx < n_qp) {
    const int i = int(idx % half);
    const int64_t h = (idx / half) % n_q_head, t = idx / (int64_t(half) * n_q_head);
    rope_pair(q, q_stride, t, h, i, head_dim, n_rot, pos, inv_freq, attn_factor, neox, a2, b2, d0, d1);
    return;
  }
  idx -= n_qp;
  if (idx < n_kp) {
    const int i = int(idx % half);
    const int64_t h = (idx / half) % n_k_head, t = idx / (int64_t(half) * n_k_head);
    rope_pair(k, k_stride, t, h, i, head_dim, n_rot, pos, inv_freq, attn_factor, neox, a2, b2, d0, d1);
    if (st.kc) {
      uint8_t* row = st.kc + size_t(kv_slot(st.table, kv_block_shift(st.table), st.seq[t], pos[t])) * st.k_row_bytes;
      kv_put<T>(row, h * head_dim + d0, a2);
      kv_put<T>(row, h * head_dim + d1, b2);
    }
    return;
  }
  idx -= n_kp;
  if (!st.kc || idx >= n_tok * width) return;
  const int64_t t = idx / width, c = idx % width;
  const size_t slot = size_t(kv_slot(st.table, kv_block_shift(st.table), st.seq[t], pos[t]));
  kv_put<T>(st.vc + slot * st.v_row_bytes, c, st.v[t * st.v_stride + c]);
  if (c % head_dim >= n_rot) kv_put<T>(st.kc + slot * st.k_row_bytes, c, k[t * k_stride + c]);
}

}  // namespace

cudaError_t launch_rms_norm(const RmsNormArgs& a, cudaStream_t s, unsigned* barrier, bool weight_constant) {
  weight_constant = weight_constant && !flags().no_cuda_prefetch;
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  const int64_t n_groups = a.x.cols / group;
  const int64_t blocks = a.x.rows * n_groups;
  if (blocks == 0) return cudaSuccess;
  const bool in_place = overlap(a.out.data, span(a.x.rows, a.out.row_stride(), a.x.cols), a.x.data,
                                span(a.x.rows, a.x.row_stride(), a.x.cols));
  const int64_t slice = n_groups == 1 ? norm_slice(a.x.rows, group, in_place, barrier, ActRound::none) : group;
  const int64_t n_sl = (group + slice - 1) / slice;
  unsigned* bar = n_sl > 1 && in_place ? barrier : nullptr;
  launch_kernel(rms_norm_kernel<0>, unsigned(blocks * n_sl), norm_threads(group), 0, s, a.out.data, a.out.row_stride(),
                a.x.data, a.x.row_stride(), a.weight, group, n_groups, a.eps, nullptr, nullptr, NormAdd{}, slice, bar, weight_constant);
  return cudaGetLastError();
}

bool rms_norm_parts_supported(const RmsNormArgs& a) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  // One head (group == cols) only below launch_rms_norm's split size: its own launch then also
  // runs one block per row.
  return (group < a.x.cols || group < 1024) && a.x.cols % group == 0 && a.x.rows > 0;
}

cudaError_t launch_rms_norm_parts(const RmsNormArgs* parts, const bool* weight_constant, int n, cudaStream_t s) {
  if (n < 1 || n > kMaxNormParts) return cudaErrorInvalidValue;
  NormParts ps{};
  ps.n = n;
  ps.group = parts[0].group;
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    const RmsNormArgs& a = parts[i];
    if (!rms_norm_parts_supported(a) || a.group != ps.group) return cudaErrorInvalidValue;
    ps.p[i] = NormPart{.out = a.out.data, .out_stride = a.out.row_stride(), .x = a.x.data, .x_stride = a.x.row_stride(),
                       .weight = a.weight, .n_groups = a.x.cols / a.group, .eps = a.eps,
                       .weight_early = weight_constant[i] && !flags().no_cuda_prefetch};
    blocks += a.x.rows * (a.x.cols / a.group);
    ps.end[i] = blocks;
  }
  launch_kernel(rms_norm_parts_kernel, unsigned(blocks), norm_threads(ps.group), 0, s, ps);
  return cudaGetLastError();
}

cudaError_t launch_add_rms_norm(const AddArgs* add, const RmsNormArgs& a, ActRound kind, const QuantAct* q,
                                cudaStream_t s, unsigned* barrier, bool weight_constant) {
  weight_constant = weight_constant && !flags().no_cuda_prefetch;
  const int64_t cols = a.x.cols;
  if (a.x.rows == 0) return cudaSuccess;
  if (a.group > 0 && a.group != cols) return cudaErrorInvalidValue;
  NormAdd na;
  const float* x = a.x.data;
  int64_t xs = a.x.row_stride();
  if (add) {
    na = NormAdd{.b = add->b.data, .b_stride = add->b.row_stride(), .sum = add->out.data,
                 .sum_stride = add->out.row_stride()};
    x = add->a.data;
    xs = add->a.row_stride();
  }
  auto* qq = q ? const_cast<int8_t*>(q->q) : nullptr;
  auto* dd = q ? const_cast<float*>(q->d) : nullptr;
  const int64_t rows = a.x.rows;
  bool in_place = overlap(a.out.data, span(rows, a.out.row_stride(), cols), x, span(rows, xs, cols));
  if (add) {
    const int64_t n = span(rows, add->out.row_stride(), cols);
    in_place = in_place || overlap(add->out.data, n, add->a.data, span(rows, add->a.row_stride(), cols)) ||
               overlap(add->out.data, n, add->b.data, span(rows, add->b.row_stride(), cols)) ||
               overlap(a.out.data, span(rows, a.out.row_stride(), cols), add->b.data,
                       span(rows, add->b.row_stride(), cols));
  }
  const int64_t slice = norm_slice(rows, cols, in_place, barrier, q ? kind : ActRound::none);
  unsigned* bar = slice < cols && in_place ? barrier : nullptr;
  const unsigned blocks = unsigned(a.x.rows * ((cols + slice - 1) / slice)), threads = norm_threads(cols);
  if (!q)
    launch_kernel(rms_norm_kernel<0>, blocks, threads, 0, s, a.out.data, a.out.row_stride(), x, xs, a.weight, cols,
                  int64_t(1), a.eps, nullptr, nullptr, na, slice, bar, weight_constant);
  else if (kind == ActRound::q8_0 && cols % 32 == 0)
    launch_kernel(rms_norm_kernel<32>, blocks, threads, 0, s, a.out.data, a.out.row_stride(), x, xs, a.weight, cols,
                  int64_t(1), a.eps, qq, dd, na, slice, bar, weight_constant);
  else if (kind == ActRound::f16 || kind == ActRound::bf16)
    launch_kernel(kind == ActRound::bf16 ? rms_norm_kernel<2> : rms_norm_kernel<1>, blocks, threads, 0, s, a.out.data,
                  a.out.row_stride(), x, xs, a.weight, cols, int64_t(1), a.eps, qq, dd, na, slice, bar, weight_constant);
  else if (kind == ActRound::q8_k && cols % 256 == 0)
    launch_kernel(rms_norm_kernel<256>, blocks, threads, 0, s, a.out.data, a.out.row_stride(), x, xs, a.weight, cols,
                  int64_t(1), a.eps, qq, dd, na, slice, bar, weight_constant);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_rms_norm_quant(const RmsNormArgs& a, ActRound kind, const QuantAct& q, cudaStream_t s,
                                  unsigned* barrier, bool weight_constant) {
  return launch_add_rms_norm(nullptr, a, kind, &q, s, barrier, weight_constant);
}

cudaError_t launch_rope(const RopeArgs& a, const float* inv_freq, cudaStream_t s) {
  const int half = a.table->n_rot / 2;
  const int64_t n = a.x.rows * a.n_head * half;
  if (n == 0) return cudaSuccess;
  launch_kernel(rope_kernel, unsigned((n + 255) / 256), 256, 0, s, a.x.data, a.x.row_stride(), a.x.rows, a.n_head, a.head_dim,
                                                        a.table->n_rot, a.pos, inv_freq, a.table->attn_factor,
                                                        a.table->neox);
  return cudaGetLastError();
}

cudaError_t launch_rope_qk_store(const RopeArgs* q, const RopeArgs& k, const KvStoreArgs* store, const float* inv_freq,
                                 cudaStream_t s) {
  const int half = k.table->n_rot / 2;
  const int64_t n_tok = k.x.rows;
  if (n_tok == 0) return cudaSuccess;
  if (q && (q->x.rows != n_tok || q->head_dim != k.head_dim || q->pos != k.pos)) return cudaErrorInvalidValue;
  RopeStore st;
  QuantType kv = QuantType::F16;
  if (store) {
    if (store->pos != k.pos || store->k.data != k.x.data || store->k.row_stride() != k.x.row_stride() ||
        store->k_cache.width != int64_t(k.n_head) * k.head_dim)
      return cudaErrorInvalidValue;
    st = RopeStore{.kc = static_cast<uint8_t*>(store->k_cache.data), .vc = static_cast<uint8_t*>(store->v_cache.data),
                   .k_row_bytes = store->k_cache.row_bytes, .v_row_bytes = store->v_cache.row_bytes,
                   .table = store->k_cache, .v = store->v.data, .v_stride = store->v.row_stride(),
                   .seq = store->seq};
    kv = store->k_cache.type;
    if (kv == QuantType::Q8_0) return cudaErrorInvalidValue;  // whole blocks: launch_kv_store
  }
  const int64_t n = (q ? n_tok * q->n_head * half : 0) + n_tok * k.n_head * half +
                    (store ? n_tok * int64_t(k.n_head) * k.head_dim : 0);
  if (n == 0) return cudaSuccess;
  float* qx = q ? q->x.data : nullptr;
  const int64_t qs = q ? q->x.row_stride() : 0;
  const int qh = q ? q->n_head : 0;
  auto kernel = kv == QuantType::F16    ? rope_qk_store_kernel<KvT::f16>
                : kv == QuantType::BF16 ? rope_qk_store_kernel<KvT::bf16>
                                        : rope_qk_store_kernel<KvT::f32>;
  launch_kernel(kernel, unsigned((n + 255) / 256), 256, 0, s, qx, qs, qh, k.x.data, k.x.row_stride(), k.n_head, n_tok,
                k.head_dim, k.table->n_rot, k.pos, inv_freq, k.table->attn_factor, k.table->neox, st);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
