// Attention over the KV cache, split over KV positions (flash-decoding), for decode and prefill.
// Token t with position p (sequence s) attends to positions [lo, p] (lo = p - window + 1 with
// a sliding window, else 0). The grid is (split, KV head x head group, token): a block takes
// up to kMaxG query heads that share one KV head (GQA: K and V rows are loaded once for all of
// them) and one of n_split equal chunks of [lo, p], computed from the positions in device
// memory, so the launch does not depend on the KV length (a CUDA graph replays it).
// Per tile of kTile positions: one thread per (position, head) scores it (q . k * scale,
// optional tanh softcap), a warp per head folds the tile into its running
// max / sum (online softmax), then each thread adds p * v for its head dims. Over F16 / BF16 /
// Q8_0 caches the tiles' rows are copied into shared memory first (cp.async): a chunk of at
// most one tile at once, longer chunks through two buffers (the next tile's copies in flight
// while the current one is computed); else rows are read from global memory per use. With one split
// the block writes the output; otherwise it writes (max, sum, unnormalized output) and a
// combine kernel merges the splits. Cache rows are F32, F16, BF16 or Q8_0 (kv_elem.cuh), paged (kv_paged.cuh): a K row's
// block is looked up per row, V rows per run of rows inside one block. Exponentials use the accurate
// expf, as the CPU does: the fast __expf is off by ~1e-5 relative for the wide score ranges
// of QK-normed models (Qwen3), enough to flip a later Q8_0 activation rounding.
// One-token decode over short F16 / BF16 caches runs attention_cluster_kernel instead
// (attention_cluster.cu): one thread-block cluster per KV head whose blocks merge their splits
// through distributed shared memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/act_quant.cuh"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_splits.h"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/kv_paged.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rope.cuh"

namespace brisk::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 128;  // positions per tile: one per thread when scoring (streamed chunks: kStageRows)
constexpr int kDims = kMaxHeadDim / kThreads;  // head dims per thread
constexpr int kMaxSplit = 64;
constexpr int kMinChunk = 16;      // positions of the cache capacity per split, at least (see geometry)
constexpr int kMinChunkWide = 32;  // the same for few blocks per split, or BRISK_NO_CUDA_FINE_SPLITS
static_assert(kTile % 32 == 0 && kTile <= kThreads, "softmax lanes and output threads cover a tile");

// K rows in 16-byte pieces (i and the row's column offset multiples of 8): a 2-byte piece is 8
// elements; an F32 row takes two pieces per 8 elements, the second one read in unpack8.
template <KvT T>
__device__ __forceinline__ uint4 load16(const uint8_t* row, int64_t i, int) {
  return *reinterpret_cast<const uint4*>(row + kv_col_bytes<T>(i));
}
template <KvT T>
__device__ __forceinline__ void unpack8(const uint4 (&raw)[16], int e, const uint8_t* row, int64_t i, float* o) {
  const uint4 u = raw[e];
  if constexpr (T != KvT::f32) {
    kv_unpack8<T>(u, o);
  } else {
    const float4 b = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(row) + i + 4);
    o[0] = __uint_as_float(u.x); o[1] = __uint_as_float(u.y); o[2] = __uint_as_float(u.z); o[3] = __uint_as_float(u.w);
    o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
  }
}



// Merges the n_split partial results of heads h0 .. h0 + G - 1 of token t into the output:
// out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s. Warp w takes the weights of heads w,
// w + warps, ...; every head's arithmetic is the same whichever block runs it (the combine
// kernel, or the last split block of the attention kernel). Partials are read through L2
// (other blocks wrote them). With heads_at_once, a thread sums its dim of up to 4 heads in one
// loop (their loads interleaved) instead of one head after the other; each output still sums
// its splits in order, so the results are the same.
__device__ void combine_heads(const AttentionArgs& a, int n_split, const float* part, int64_t t, int h0, int G,
                              bool heads_at_once) {
  const int hd = a.head_dim;
  __shared__ float w[kMaxG][kMaxSplit];
  __shared__ float inv_l[kMaxG];
  const int warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int g = warp; g < G; g += n_warps) {
    const float* pr = part + (t * a.n_head + h0 + g) * n_split * (hd + 2);
    float mx = -INFINITY;
    for (int i = threadIdx.x & 31; i < n_split; i += 32) mx = fmaxf(mx, __ldcg(pr + i * (hd + 2)));
    mx = warp_max(mx);
    float l = 0.0f;
    for (int i = threadIdx.x & 31; i < n_split; i += 32) {
      const float m = __ldcg(pr + i * (hd + 2));
      const float e = m == -INFINITY ? 0.0f : expf(m - mx);
      w[g][i] = e;
      l += e * __ldcg(pr + i * (hd + 2) + 1);
    }
    l = warp_sum(l);
    if ((threadIdx.x & 31) == 0) inv_l[g] = 1.0f / l;
  }
  __syncthreads();
  const int64_t out_stride = a.out.stride ? a.out.stride : a.out.cols;
  if (heads_at_once) {
    constexpr int kH = 4;
    for (int g0 = 0; g0 < G; g0 += kH) {
      const int ng = min(kH, G - g0);
      const float* pr[kH];
#pragma unroll
      for (int g = 0; g < kH; ++g) pr[g] = part + (t * a.n_head + h0 + g0 + min(g, ng - 1)) * n_split * (hd + 2) + 2;
      for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v[kH] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
        for (int i = 0; i < n_split; ++i) {
#pragma unroll
          for (int g = 0; g < kH; ++g)
            if (g < ng) v[g] = fmaf(w[g0 + g][i], __ldcg(pr[g] + i * (hd + 2) + d), v[g]);
        }
#pragma unroll
        for (int g = 0; g < kH; ++g)
          if (g < ng) a.out.data[t * out_stride + int64_t(h0 + g0 + g) * hd + d] = v[g] * inv_l[g0 + g];
      }
    }
    return;
  }
  for (int g = 0; g < G; ++g) {
    const float* pr = part + (t * a.n_head + h0 + g) * n_split * (hd + 2);
    float* orow = a.out.data + t * out_stride + int64_t(h0 + g) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
      float v = 0.0f;
#pragma unroll 16
      for (int i = 0; i < n_split; ++i) v = fmaf(w[g][i], __ldcg(pr + i * (hd + 2) + 2 + d), v);
      orow[d] = v * inv_l[g];
    }
  }
}

__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// A staged row's piece e (kStagePiece<T> bytes) from global row bytes `g` to shared `smem`.
template <KvT T>
constexpr int kStagePiece = T == KvT::q8_0 ? 8 : 16;
template <KvT T>
__device__ __forceinline__ void cp_async_piece(void* smem, const void* g) {
  if constexpr (kStagePiece<T> == 8) cp_async8(smem, g);
  else cp_async16(smem, g);
}

// Staged chunks (F16 / BF16 caches of head_dim <= kStageDim, 16-byte aligned rows; Q8_0 caches of
// head_dim 128 in 8-byte pieces, 8-byte aligned rows): a block whose chunk
// holds 1..kStageRows positions copies all its K and V rows into shared memory at once
// (cp.async, one memory round trip) before scoring, instead of a load per use. The arithmetic
// is the same as from global memory.
constexpr int kStageRows = 64;
constexpr int kStageDim = 128;
constexpr int kStageRowBytes = kStageDim * 2 + 16;  // padded: rows in other banks
constexpr size_t kStageBufBytes = size_t(2) * kStageRows * kStageRowBytes;  // K and V rows of one buffer
constexpr size_t kStageBytes = kStageBufBytes;                            // staged chunks
constexpr size_t kStreamBytes = 2 * kStageBufBytes;                       // streamed chunks
static_assert(kStageRows <= kTile, "a streamed tile is one buffer");

// The reads a block may start before the dependent-launch wait (see attention_kernel); returns
// whether the chunk's earlier rows are being copied into ks / vs.
template <KvT T>
__device__ bool start_early(const AttentionArgs& a, const Geometry& geo, const AttentionFlags& fl, int64_t col, uint8_t* ks,
                            uint8_t* vs) {
  bool early = false;  // staged rows before the token's own position are on their way
  if (fl.prefetch) {
    const int64_t t = blockIdx.z;
    const int64_t cap = a.k_cache.capacity;
    const int64_t s = a.seq[t], p = a.pos[t];
    if (s >= 0 && p >= 0 && p < cap) {
      const int64_t lo = attn_first_pos(a, t, p);
      const int64_t chunk = (p - lo + 1 + geo.n_split - 1) / geo.n_split;
      const int64_t j0 = lo + blockIdx.x * chunk;
      int64_t j1 = min(j0 + chunk, p + 1);
      const uint8_t* kb = static_cast<const uint8_t*>(a.k_cache.data);
      const uint8_t* vb = static_cast<const uint8_t*>(a.v_cache.data);
      const int sh = kv_block_shift(a.k_cache);
      if (fl.stage && fl.one_token && j1 - j0 >= 1 && (j1 - j0 <= kStageRows || fl.stream)) {
        // The whole chunk, or (streamed) its first tile, which never holds p (p is the chunk's
        // last row, past the first kStageRows).
        early = true;
        if (j1 - j0 > kStageRows) j1 = j0 + kStageRows;
        constexpr int P = kStagePiece<T>;
        const int pieces = int(kv_col_bytes<T>(a.head_dim)) / P;
        for (int it = threadIdx.x; it < (j1 - j0) * pieces; it += kThreads) {
          const int jj = it / pieces, e = it % pieces;
          if (j0 + jj == p) continue;
          const size_t off = size_t(kv_col_bytes<T>(col)) + size_t(P) * e;
          const size_t slot = size_t(kv_slot(a.k_cache, sh, s, j0 + jj));
          cp_async_piece<T>(ks + jj * kStageRowBytes + P * e, kb + slot * a.k_cache.row_bytes + off);
          cp_async_piece<T>(vs + jj * kStageRowBytes + P * e, vb + slot * a.v_cache.row_bytes + off);
        }
      } else {
        const size_t cb = size_t(kv_col_bytes<T>(col)), bytes = size_t(kv_col_bytes<T>(a.head_dim));
        const int lines = int((bytes + 127) / 128);
        for (int64_t it = threadIdx.x; it < (j1 - j0) * lines; it += kThreads) {
          const int64_t j = j0 + it / lines;
          const size_t off = cb + size_t(it % lines) * 128;
          const size_t slot = size_t(kv_slot(a.k_cache, sh, s, j));
          prefetch_l2(kb + slot * a.k_cache.row_bytes + off);
          prefetch_l2(vb + slot * a.v_cache.row_bytes + off);
        }
      }
    }
  }
  return early;
}

// After a block wrote its split's partial results: the last block of its (token, head group)
// to get here merges the splits (combine_heads) and sets the counter back to 0.
__device__ bool merge_if_last(const AttentionArgs& a, const Geometry& geo, const float* part, int* counters, int64_t t,
                              int h0, int G, bool heads_at_once) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  int* cnt = counters + t * gridDim.y + blockIdx.y;
  if (threadIdx.x == 0) last = atomicAdd(cnt, 1) == geo.n_split - 1;
  __syncthreads();
  if (!last) return false;
  __threadfence();
  combine_heads(a, geo.n_split, part, t, h0, G, heads_at_once);
  if (threadIdx.x == 0) *cnt = 0;
  return true;
}

// With `counters` (one zeroed int per (token, KV head x head group)), the last split block of
// a (token, head group) to finish merges the splits itself (combine_heads) and sets the counter
// back to 0, so no combine kernel runs. With `prefetch`, each block starts reading its chunk's
// K and V rows before the dependent-launch wait: rows of positions before the token's own were
// written by earlier steps (only its own row is written by the kernel before this one), so a
// staged one-token block copies them into shared memory at once and the others ask L2 for them
// (a prefetch never changes what a load returns). Their reads then overlap the previous kernel.
//
// With fl.rope (one token, one head group per KV head; launch_attention_rope), the kernel also
// does the work of launch_rope_qk_store before it: each block rotates its query heads while it
// copies them into shared memory, and the block whose chunk holds the token's own position
// rotates that KV head's k, stores k and v into the cache (and into its staged rows), and writes
// the rotated k back; the rotated q is written back by the block that merges the splits (every
// block of the head group has read q by then), or by the only block. The values are those of
// the separate launch (rope.cuh), one launch less per layer.
//
// kG > 0: every block has exactly kG query heads; kD: head dims per thread (head_dim <= kD *
// kThreads). Both only let the compiler drop the loop iterations and predicates of absent heads
// and dims; the arithmetic is the same as in the generic <T, 0, kDims> instance.
template <KvT T, int kG = 0, int kD = kDims>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a, Geometry geo, float* part, int* counters,
                                                             AttentionFlags fl, AttentionRope rp) {
  extern __shared__ __align__(16) uint8_t stage_s[];
  const int kvh = blockIdx.y / geo.n_hg, hg = blockIdx.y % geo.n_hg;
  const int64_t col = int64_t(kvh) * a.head_dim;
  uint8_t* ks = stage_s;                              // buffer b: ks + b * kStageBufBytes
  uint8_t* vs = stage_s + kStageRows * kStageRowBytes;  // the same for V rows
  const bool early = start_early<T>(a, geo, fl, col, ks, vs);
  // With rope: each pair's angle once for all heads (q's and k's), with prefetch before the wait
  // (positions and frequencies are not written by the kernels of the step).
  __shared__ float rope_c[kMaxHeadDim / 2], rope_s[kMaxHeadDim / 2];
  auto rope_angles = [&]() {
    for (int i = threadIdx.x; i < rp.n_rot / 2; i += kThreads)
      rope_cos_sin(a.pos[blockIdx.z], rp.inv_freq[i], rp.attn_factor, rope_c[i], rope_s[i]);
  };
  if (fl.rope && fl.prefetch) rope_angles();
  BRISK_PDL_ENTER();
  if (fl.rope && !fl.prefetch) rope_angles();
  const int split = blockIdx.x;
  const int64_t t = blockIdx.z;
  const int group = a.n_head / a.n_head_kv;
  const int h0 = kvh * group + hg * kMaxG;
  const int G = kG > 0 ? kG : min(kMaxG, group - hg * kMaxG);
  const int hd = a.head_dim;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t s = a.seq[t], p = a.pos[t];
  const int64_t lo = attn_first_pos(a, t, p);
  const int64_t chunk = (p - lo + 1 + geo.n_split - 1) / geo.n_split;
  const int64_t j_begin = lo + split * chunk;
  const int64_t j_end = j_begin + chunk < p + 1 ? j_begin + chunk : p + 1;  // may be empty

  __shared__ __align__(16) float q[kMaxG][kMaxHeadDim + 4];  // padded: heads in other banks
  __shared__ float sc[kMaxG][kTile];
  __shared__ float alpha[kMaxG];
  __shared__ float m_fin[kMaxG], l_fin[kMaxG];

  const int sh = kv_block_shift(a.k_cache);
  const uint8_t* kbase = static_cast<const uint8_t*>(a.k_cache.data) + kv_col_bytes<T>(col);  // + slot * row_bytes
  const uint8_t* vbase = static_cast<const uint8_t*>(a.v_cache.data) + kv_col_bytes<T>(col);
  const bool staged = fl.stage && j_end - j_begin >= 1 && j_end - j_begin <= kStageRows;
  // Streamed: tile i of the chunk (kTile = kStageRows rows) goes into buffer i % 2 while the
  // tile before it is computed from the other one.
  const bool streamed = fl.stream && j_end - j_begin > kStageRows;
  // Rows [j0, j0 + n) into buffer b, but for `skip` rows (written below, or already on their way).
  auto stage_rows = [&](int64_t j0, int n, int b, bool skip_own, bool skip_other) {
    constexpr int P = kStagePiece<T>;
    const int pieces = int(kv_col_bytes<T>(hd)) / P;
    uint8_t* kb = ks + b * kStageBufBytes;
    uint8_t* vb = vs + b * kStageBufBytes;
    for (int it = threadIdx.x; it < n * pieces; it += kThreads) {
      const int jj = it / pieces, e = it % pieces;
      const bool own = j0 + jj == p;
      if (own ? skip_own : skip_other) continue;
      const size_t slot = size_t(kv_slot(a.k_cache, sh, s, j0 + jj));
      cp_async_piece<T>(kb + jj * kStageRowBytes + P * e, kbase + slot * a.k_cache.row_bytes + P * e);
      cp_async_piece<T>(vb + jj * kStageRowBytes + P * e, vbase + slot * a.v_cache.row_bytes + P * e);
    }
  };
  // The token's own row: written below with rope, else copied; rows before it: already on their
  // way when early. A streamed chunk's first tile never holds the own row.
  if (staged) stage_rows(j_begin, int(j_end - j_begin), 0, fl.rope, early);
  else if (streamed && !early) stage_rows(j_begin, kStageRows, 0, true, false);
  const int64_t q_stride = a.q.stride ? a.q.stride : a.q.cols;
  if (!fl.rope) {
    for (int i = threadIdx.x; i < G * hd; i += kThreads) q[i / hd][i % hd] = a.q.data[t * q_stride + int64_t(h0) * hd + i];
  } else {
    const int half = rp.n_rot / 2;
    __syncthreads();  // rope_c / rope_s
    for (int i = threadIdx.x; i < G * hd; i += kThreads) {
      const int g = i / hd, d = i % hd;
      const float* qr = a.q.data + t * q_stride + int64_t(h0 + g) * hd;
      if (d >= rp.n_rot) {
        q[g][d] = qr[d];
      } else if (d < half) {  // pair d
        int d0, d1;
        rope_dims(d, rp.n_rot, rp.neox, d0, d1);
        rope_apply(qr[d0], qr[d1], rope_c[d], rope_s[d], q[g][d0], q[g][d1]);
      }
    }
    // (Never with a Q8_0 cache, whose blocks are written whole: launch_attention_rope refuses it.)
    if constexpr (T != KvT::q8_0) if (p >= j_begin && p < j_end) {
      // The token's own K / V row of this KV head: rotated k and v into the cache (as
      // rope_qk_store_kernel's cache_put), the staged copy, and the rotated k back.
      const size_t slot = size_t(kv_slot(a.k_cache, sh, s, p));
      uint8_t* kc = static_cast<uint8_t*>(a.k_cache.data) + slot * a.k_cache.row_bytes + kv_col_bytes<T>(col);
      uint8_t* vc = static_cast<uint8_t*>(a.v_cache.data) + slot * a.v_cache.row_bytes + kv_col_bytes<T>(col);
      uint8_t* kst = staged ? ks + (p - j_begin) * kStageRowBytes : nullptr;
      uint8_t* vst = staged ? vs + (p - j_begin) * kStageRowBytes : nullptr;
      float* kx = rp.k + t * rp.k_stride + col;
      const float* vx = rp.v + t * rp.v_stride + col;
      auto put = [&](uint8_t* row, uint8_t* st, int d, float v) {
        kv_put<T>(row, d, v);
        if (T != KvT::f32 && st) kv_put<T>(st, d, v);
      };
      for (int d = threadIdx.x; d < hd; d += kThreads) {
        put(vc, vst, d, vx[d]);
        if (d >= rp.n_rot) {
          put(kc, kst, d, kx[d]);
        } else if (d < half) {
          int d0, d1;
          rope_dims(d, rp.n_rot, rp.neox, d0, d1);
          float a2, b2;
          rope_apply(kx[d0], kx[d1], rope_c[d], rope_s[d], a2, b2);
          kx[d0] = a2;
          kx[d1] = b2;
          put(kc, kst, d0, a2);
          put(kc, kst, d1, b2);
        }
      }
    }
  }
  if (staged || streamed || early) cp_async_wait_all();
  __syncthreads();

  // 16-byte K loads need 16-byte aligned rows and columns.
  const bool vec = hd % 8 == 0 && a.k_cache.row_bytes % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.k_cache.data) % 16 == 0;

  float acc[kMaxG][kD];
#pragma unroll
  for (int g = 0; g < kMaxG; ++g)
#pragma unroll
    for (int k = 0; k < kD; ++k) acc[g][k] = 0.0f;
  float m_reg[2] = {-INFINITY, -INFINITY}, l_reg[2] = {0.0f, 0.0f};  // heads warp, warp + kWarps

  // Streamed chunks take tiles of one buffer's rows (tiles of kTile measured faster for rows
  // read per use: 122.5 against 102.3 tok/s at 32,768 positions, Llama-3.1-8B Q4_K_M).
  const int n_tile = streamed ? kStageRows : kTile;
  for (int64_t j0 = j_begin, tile = 0; j0 < j_end; j0 += n_tile, ++tile) {
    const int n_j = int(j_end - j0 < n_tile ? j_end - j0 : n_tile);
    // This tile's rows in shared memory (staged or streamed), and the next tile on its way.
    const bool in_smem = staged || streamed;
    uint8_t* kt = ks + (tile & 1) * kStageBufBytes;
    uint8_t* vt = vs + (tile & 1) * kStageBufBytes;
    if (streamed && j0 + n_tile < j_end)
      stage_rows(j0 + n_tile, int(min(int64_t(n_tile), j_end - j0 - n_tile)), int((tile + 1) & 1), false, false);
    // Scores: one thread per (position, head) item, G consecutive threads sharing a K row
    // (16-byte loads when head_dim allows) against their query head in shared memory.
    for (int it = threadIdx.x; it < n_tile * G; it += kThreads) {
      const int jj = it / G, g = it % G;
      float x = -INFINITY;
      if (jj < n_j) {
        // Element col of the row (its head's first dim), in shared memory when staged.
        const uint8_t* krow =
            in_smem ? kt + jj * kStageRowBytes : kbase + size_t(kv_slot(a.k_cache, sh, s, j0 + jj)) * a.k_cache.row_bytes;
        const float* qg = q[g];
        float dot = 0.0f;
        if constexpr (T == KvT::q8_0) {
          // Blocks of 32: the F16 scale, then the quants in 2-byte loads (blocks of 34 bytes are
          // 2-byte aligned); each element dequantized exactly (d * q) before its product, as the
          // CPU's row_to_f32 + dot.
          for (int b = 0; b < hd / 32; ++b) {
            const uint8_t* blk = krow + b * 34;
            const float dq = __half2float(*reinterpret_cast<const __half*>(blk));
            const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2);
            uint16_t w[16];
#pragma unroll
            for (int e = 0; e < 16; ++e) w[e] = qs[e];
#pragma unroll
            for (int e = 0; e < 16; ++e) {
              dot = fmaf(qg[32 * b + 2 * e], dq * float(int8_t(w[e] & 0xff)), dot);
              dot = fmaf(qg[32 * b + 2 * e + 1], dq * float(int8_t(w[e] >> 8)), dot);
            }
          }
        } else if (vec) {
          // Chunks of 128 dims: all 16-byte loads of a chunk issued before its math.
          for (int d0 = 0; d0 < hd; d0 += 128) {
            uint4 raw[16];
#pragma unroll
            for (int e = 0; e < 16; ++e)
              if (d0 + 8 * e < hd) raw[e] = load16<T>(krow, d0 + 8 * e, 2 * e);
#pragma unroll
            for (int e = 0; e < 16; ++e) {
              if (d0 + 8 * e >= hd) break;
              float kv[8];
              unpack8<T>(raw, e, krow, d0 + 8 * e, kv);
              const float4 qa = *reinterpret_cast<const float4*>(qg + d0 + 8 * e);
              const float4 qb = *reinterpret_cast<const float4*>(qg + d0 + 8 * e + 4);
              dot = fmaf(qa.x, kv[0], dot);
              dot = fmaf(qa.y, kv[1], dot);
              dot = fmaf(qa.z, kv[2], dot);
              dot = fmaf(qa.w, kv[3], dot);
              dot = fmaf(qb.x, kv[4], dot);
              dot = fmaf(qb.y, kv[5], dot);
              dot = fmaf(qb.z, kv[6], dot);
              dot = fmaf(qb.w, kv[7], dot);
            }
          }
        } else {
          for (int d = 0; d < hd; ++d) dot = fmaf(qg[d], kv_get<T>(krow, d), dot);
        }
        x = dot * a.scale;
        if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
      }
      sc[g][jj] = x;
    }
    __syncthreads();
    // Online softmax: a warp per head, n_tile / 32 scores per lane.
#pragma unroll
    for (int gi = 0; gi < 2; ++gi) {
      const int g = warp + kWarps * gi;
      if (g < G) {
        constexpr int kPer = kTile / 32;
        float v[kPer];
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          v[i] = lane + 32 * i < n_tile ? sc[g][lane + 32 * i] : -INFINITY;  // (past a streamed tile: unset)
          mx = fmaxf(mx, v[i]);
        }
        const float m_new = fmaxf(m_reg[gi], warp_max(mx));
        const float al = expf(m_reg[gi] - m_new);  // 0 on the first tile (m = -inf)
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          v[i] = expf(v[i] - m_new);
          sum += v[i];
          sc[g][lane + 32 * i] = v[i];
        }
        l_reg[gi] = l_reg[gi] * al + warp_sum(sum);
        m_reg[gi] = m_new;
        if (lane == 0) alpha[g] = al;
      }
    }
    __syncthreads();
    // Output: each thread owns head dims tid, tid + kThreads, ... of every head.
#pragma unroll
    for (int k = 0; k < kD; ++k) {
      const int d = threadIdx.x + k * kThreads;
      if (d < hd) {
#pragma unroll
        for (int g = 0; g < kMaxG; ++g)
          if (g < G) acc[g][k] *= alpha[g];
        if (in_smem) {
#pragma unroll 16
          for (int jj = 0; jj < n_j; ++jj) {
            const float v = kv_get<T>(vt + jj * kStageRowBytes, d);
#pragma unroll
            for (int g = 0; g < kMaxG; ++g)
              if (g < G) acc[g][k] = fmaf(sc[g][jj], v, acc[g][k]);
          }
        } else {
          // Runs of rows inside one block: one table lookup per run.
          for (int r0 = 0; r0 < n_j;) {
            const int n_r = int(min(int64_t(n_j - r0), kv_run(sh, j0 + r0)));
            const uint8_t* vr = vbase + size_t(kv_slot(a.v_cache, sh, s, j0 + r0)) * a.v_cache.row_bytes;
#pragma unroll 16
            for (int jj = 0; jj < n_r; ++jj) {
              const float v = kv_get<T>(vr + size_t(jj) * a.v_cache.row_bytes, d);
#pragma unroll
              for (int g = 0; g < kMaxG; ++g)
                if (g < G) acc[g][k] = fmaf(sc[g][r0 + jj], v, acc[g][k]);
            }
            r0 += n_r;
          }
        }
      }
    }
    if (streamed) cp_async_wait_all();  // the next tile
    __syncthreads();
  }
#pragma unroll
  for (int gi = 0; gi < 2; ++gi) {
    const int g = warp + kWarps * gi;
    if (g < G && lane == 0) {
      m_fin[g] = m_reg[gi];
      l_fin[g] = l_reg[gi];
    }
  }
  __syncthreads();
  const int64_t out_stride = a.out.stride ? a.out.stride : a.out.cols;
#pragma unroll
  for (int g = 0; g < kMaxG; ++g) {
    if (g >= G) break;
    const int h = h0 + g;
    if (geo.n_split == 1) {
      float* orow = a.out.data + t * out_stride + int64_t(h) * hd;
#pragma unroll
      for (int k = 0; k < kD; ++k) {
        const int d = threadIdx.x + k * kThreads;
        if (d < hd) orow[d] = acc[g][k] / l_fin[g];
      }
    } else {
      float* pr = part + ((t * a.n_head + h) * geo.n_split + split) * (hd + 2);
      if (threadIdx.x == 0) {
        pr[0] = m_fin[g];
        pr[1] = l_fin[g];
      }
#pragma unroll
      for (int k = 0; k < kD; ++k) {
        const int d = threadIdx.x + k * kThreads;
        if (d < hd) pr[2 + d] = acc[g][k];
      }
    }
  }
  const bool merged = geo.n_split > 1 && counters && merge_if_last(a, geo, part, counters, t, h0, G, fl.merge_heads);
  if (fl.rope && (geo.n_split == 1 || merged)) {
    // Every block of this head group has read q: the rotated heads go back (as the rope launch
    // would have left them).
    float* qr = a.q.data + t * q_stride + int64_t(h0) * hd;
    for (int i = threadIdx.x; i < G * hd; i += kThreads) qr[i] = q[i / hd][i % hd];
  }
}

// One block per (head, token): the merge of combine_heads.
__global__ void combine_kernel(AttentionArgs a, int n_split, const float* part) {
  BRISK_PDL_ENTER();
  combine_heads(a, n_split, part, blockIdx.y, blockIdx.x, 1, false);
}


}  // namespace

// Splits: enough blocks for 2-8 per multiprocessor (below), chunks of at least kMinChunk positions of the
// cache capacity (the actual length is only known on the device), at most kMaxSplit. Counted
// for one token up to kAttnSplitAsOneToken tokens (kernels.h): a verify group's rows then sum
// their chunks as one-token decoding does (with the rows' own count, 5 tokens of 2 KV heads took
// 16 splits where one token takes 8, and every row's sums differed in the last bits).
int attention_split_count(const AttnSplitShape& s) {
  const int64_t tokens = s.n_tok <= kAttnSplitAsOneToken ? 1 : s.n_tok;
  const int64_t base = tokens * s.n_head_kv * s.n_hg;
  // Blocks per multiprocessor to aim for: batched decode (many (KV head, token) blocks per
  // split) is latency-bound per block, so more, shorter chunks pay there (H200, Llama-3.1-8B
  // BF16, 512 past: batch 64 6,131 tok/s with 8 against 5,440 with 2; batch 32 3,970 with 4
  // against 3,624; batch 8 1,283 with 4 against 1,268; docs/cuda.md).
  const int64_t per_sm = base >= 512 ? 8 : base >= 64 ? 4 : 2;
  const int64_t want = base > 0 ? (per_sm * s.sm_count + base - 1) / base : 1;
  // Chunks of 16 when there are at least 8 (KV head, head group, token) blocks per split
  // (Llama-3 8B: 33 splits instead of 17 at 512 positions, faster); fewer (Qwen2.5-0.5B, two KV
  // heads) keep chunks of 32, where 37 splits measured slower than 19.
  const int64_t mc = !s.fine || base < 8 ? kMinChunkWide : kMinChunk;
  int64_t by_len = (s.capacity + mc - 1) / mc;
  if (s.window > 0 && (s.window + mc - 1) / mc < by_len) by_len = (s.window + mc - 1) / mc;
  const int64_t n = want < by_len ? want : by_len;
  return int(n < 1 ? 1 : n > kMaxSplit ? kMaxSplit : n);
}

Geometry attention_geometry(const AttentionArgs& a) {
  const int group = a.n_head / a.n_head_kv;
  Geometry g{.n_split = 1, .n_hg = (group + kMaxG - 1) / kMaxG};
  g.n_split = attention_split_count({.n_tok = a.q.rows, .n_head_kv = a.n_head_kv, .n_hg = g.n_hg,
                                     .capacity = a.k_cache.capacity, .window = a.window, .sm_count = sm_count(),
                                     .fine = !flags().no_cuda_fine_splits});
  return g;
}

cudaError_t launch_attention_split(const AttentionArgs& a, const AttentionRope* rope, float* scratch, int* counters,
                                   cudaStream_t s, const AttentionQuant* quant) {
  if (quant && quant->kind != ActRound::none) return cudaErrorInvalidValue;
  const Geometry g = attention_geometry(a);
  if (g.n_split > 1 && scratch == nullptr) return cudaErrorInvalidValue;
  if (rope && (!attention_rope_supported(a, rope->n_rot) || (g.n_split > 1 && counters == nullptr)))
    return cudaErrorInvalidValue;
  const AttentionRope rp = rope ? *rope : AttentionRope{};
  const dim3 grid(unsigned(g.n_split), unsigned(a.n_head_kv * g.n_hg), unsigned(a.q.rows));
  AttentionFlags fl{.prefetch = !flags().no_cuda_prefetch, .stage = false, .stream = false, .one_token = a.q.rows == 1,
           .rope = rope != nullptr, .merge_heads = !flags().no_cuda_attn_merge_heads};
  // Chunks of more than kStageRows positions can occur (the cache's capacity, or the window,
  // over the splits): those stream through two buffers.
  int64_t span = a.k_cache.capacity;
  if (a.window > 0 && a.window < span) span = a.window;
  const bool long_chunks = (span + g.n_split - 1) / g.n_split > kStageRows;
  auto set_stage = [&](bool ok) {
    fl.stage = ok && !flags().no_cuda_attn_stage;
    fl.stream = fl.stage && long_chunks && !flags().no_cuda_attn_stream;
  };
  auto smem = [&]() -> size_t { return fl.stream ? kStreamBytes : fl.stage ? kStageBytes : 0; };
  if (a.k_cache.type == QuantType::F16 || a.k_cache.type == QuantType::BF16) {
    set_stage(a.head_dim % 8 == 0 && a.head_dim <= kStageDim && a.k_cache.row_bytes % 16 == 0 &&
              a.v_cache.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.k_cache.data) % 16 == 0 &&
              reinterpret_cast<uintptr_t>(a.v_cache.data) % 16 == 0);
    // Instances for all-equal head groups of 4 or 8 heads and head_dim <= 128 (Llama, Qwen,
    // Mistral layouts), else the generic one.
    constexpr KvT H = KvT::f16, B = KvT::bf16;
    const int group = a.n_head / a.n_head_kv;
    const int G = g.n_hg == 1 ? group : (group % kMaxG == 0 ? kMaxG : 0);
    const bool bf16 = a.k_cache.type == QuantType::BF16;
    auto kernel = bf16 ? attention_kernel<B> : attention_kernel<H>;
    if (a.head_dim <= kThreads && G == 4) kernel = bf16 ? attention_kernel<B, 4, 1> : attention_kernel<H, 4, 1>;
    else if (a.head_dim <= kThreads && G == 8) kernel = bf16 ? attention_kernel<B, 8, 1> : attention_kernel<H, 8, 1>;
    static const bool attr = [] {
      bool ok = true;
      for (auto k : {attention_kernel<H>, attention_kernel<H, 4, 1>, attention_kernel<H, 8, 1>, attention_kernel<B>,
                     attention_kernel<B, 4, 1>, attention_kernel<B, 8, 1>})
        ok = ok && cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kStreamBytes)) == cudaSuccess;
      return ok;
    }();
    if (!attr) set_stage(false);
    launch_kernel(kernel, grid, kThreads, smem(), s, a, g, scratch, counters, fl, rp);
  } else if (a.k_cache.type == QuantType::Q8_0) {
    // The fused rope + store does not apply (blocks are written whole). Staged in 8-byte pieces
    // at head_dim 128 (a head's 4 blocks are 136 bytes at multiples of 136).
    if (a.head_dim % 32 != 0 || rope) return cudaErrorInvalidValue;
    constexpr KvT Q = KvT::q8_0;
    set_stage(a.head_dim == kStageDim && a.k_cache.row_bytes % 8 == 0 && a.v_cache.row_bytes % 8 == 0 &&
              reinterpret_cast<uintptr_t>(a.k_cache.data) % 8 == 0 && reinterpret_cast<uintptr_t>(a.v_cache.data) % 8 == 0);
    const int group = a.n_head / a.n_head_kv;
    const bool g4 = a.head_dim <= kThreads && g.n_hg == 1 && group == 4;
    static const bool attr = [] {
      bool ok = true;
      for (auto k : {attention_kernel<Q>, attention_kernel<Q, 4, 1>})
        ok = ok && cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kStreamBytes)) == cudaSuccess;
      return ok;
    }();
    if (!attr) set_stage(false);
    launch_kernel(g4 ? attention_kernel<Q, 4, 1> : attention_kernel<Q>, grid, kThreads, smem(), s, a, g, scratch,
                  counters, fl, rp);
  } else {
    launch_kernel(attention_kernel<KvT::f32>, grid, kThreads, 0, s, a, g, scratch, counters, fl, rp);
  }
  if (g.n_split > 1 && !counters)
    launch_kernel(combine_kernel, dim3(unsigned(a.n_head), unsigned(a.q.rows)), 128, 0, s, a, g.n_split, scratch);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
