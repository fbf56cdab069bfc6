// Decode attention over short F16 / BF16 caches as one thread-block cluster per (KV head, token),
// whose blocks merge their splits through distributed shared memory (the design is at
// attention_cluster_kernel); launch_attention_rope (attention.cu) takes it where
// cluster_splits accepts the shape (steps of up to 8 tokens), else the split kernel
// (attention_split.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/act_quant.cuh"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/kv_paged.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rope.cuh"

namespace brisk::cuda {

namespace {

// Decode attention as one thread-block cluster per KV head and token (F16 / BF16 caches, head_dim
// 64 / 128 / 256 / 512 (512: clusters of 16 only), up to kMaxG query heads per KV head, chunks of
// at most kMaxChunkC positions, up to kClusterMaxTokens tokens: a token's cluster computes what
// the launch of that token alone computes, so a verify group's rows equal one-token decoding):
// the kS blocks of
// a cluster take kS equal chunks of [lo, p] (cut as the split kernel cuts them) and merge their
// partial results through distributed shared memory instead of through L2 (no scratch, no
// counters, no fence + atomic, no serial merge in one block).
// Per block (kThreadsC threads): the chunk's K / V rows go into shared memory in tiles of
// kTileC rows (cp.async; the first tile's earlier rows before the dependent-launch wait). After
// the wait, every load from global memory (q, and with rope the token's k / v) is issued at
// once. Scores: one thread per (row, head), a dot product over 16-byte pieces of the staged K
// row and of q in shared memory (four partial sums, added pairwise). A warp per head folds the
// tile into its running max / sum (online softmax, exact expf). Output: a thread owns two dims
// of one head and adds p * v over the tile's rows, so no sums across threads are left. Each
// block then stores its (max, sum, output dims) with st.async straight into the shared memory
// of the block that merges those dims (block r merges slice r of the group's outputs), whose
// mbarrier counts the bytes in: no cluster-wide barrier or memory fence after the work (one
// cluster barrier, passed long before, publishes the mbarriers' initialization). Block r then
// sums its slice over the kS splits in split order. The code is compact loops rather than
// unrolled blocks: each multiprocessor runs it once per launch, so instruction fetches count.
// With rope (AttentionRope, one token) the kernel rotates q / k and stores the token's K / V row
// as the split kernel does. With rope and several tokens (a verify group) the rows of the step's
// tokens of the same sequence up to this token's position ("group rows") are not read from the
// cache, which their own clusters are writing in the same launch: each block that needs one
// rotates and rounds it from the step's k / v rows into its staged tile (the bits the KV store
// writes), and each token's cluster stores its own row. Before the wait only rows outside the
// group are read (without rope the group rows come from the cache after the wait: the KV store
// launch just before wrote them). With aq (AttentionQuant) the
// merging blocks also quantize or round their slice of each token's row for the next matmul
// (activations [rows, n_head * head_dim] dense, scales [rows, n_head * head_dim / block]); the slices
// are then whole quantization blocks (Q8_0: multiples of 32 outputs, Q8_K: one block of 256 per
// merging block).
constexpr int kThreadsC = 256;
constexpr int kWarpsC = kThreadsC / 32;
constexpr int kTileC = 64;
constexpr int kMaxChunkC = 256;
static_assert(kWarpsC >= kMaxG, "a warp per head for the softmax");

__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
// The shared::cluster address of local shared address `a` in the block of cluster rank `rank`.
__device__ __forceinline__ uint32_t cluster_addr(uint32_t a, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_async_f32(uint32_t addr, float v, uint32_t mbar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(addr),
               "r"(__float_as_uint(v)), "r"(mbar)
               : "memory");
}
__device__ __forceinline__ void st_async_f32x2(uint32_t addr, float x, float y, uint32_t mbar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(addr),
               "r"(__float_as_uint(x)), "r"(__float_as_uint(y)), "r"(mbar)
               : "memory");
}
__device__ __forceinline__ void mbar_wait_parity0(uint32_t mbar) {
  asm volatile(
      "{\n .reg .pred P;\n WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 P, [%0], 0;\n"
      " @!P bra WAIT;\n}" ::"r"(mbar)
      : "memory");
}


template <int kHd>
constexpr size_t kStageBytesC = size_t(2) * kTileC * (kHd * 2 + 16);

// kS: blocks per cluster (= splits); kG > 0: exactly kG heads per group, else a.n_head /
// a.n_head_kv (<= kMaxG), predicated.
// (Blocks per SM: four up to head_dim 128 (64 registers), three at 256, as the compiler chose
// before the verify group's rope took a few more registers.)
template <int kHd, int kS, int kG, KvT T>
__global__ void __launch_bounds__(kThreadsC, kHd <= 128 ? 4 : kHd == 256 ? 3 : 1) attention_cluster_kernel(AttentionArgs a, AttentionFlags fl, AttentionRope rp,
                                                                      AttentionQuant aq) {
  constexpr int kR = kHd / 8;              // 16-byte pieces per row
  constexpr int kRowB = kHd * 2 + 16;      // staged row bytes, padded: rows in other banks
  constexpr int kPairs = kHd / 2;          // output: dim pairs per head
  constexpr int kItems = (kMaxG * kPairs + kThreadsC - 1) / kThreadsC;  // (head, pair) items per thread
  constexpr int kQ = (kMaxG * kHd + kThreadsC - 1) / kThreadsC;         // q elements per thread
  constexpr int kPer = 256;  // outputs merged per block, at most (a Q8_K block with aq)
  static_assert(((kMaxG * kHd + kS - 1) / kS + 31) / 32 * 32 <= kPer, "slices fit");
  constexpr int kOwn = (kHd + kThreadsC - 1) / kThreadsC;  // dims of the token's own K / V row per thread
  static_assert(kPairs % 32 == 0 && (kHd <= kThreadsC || kHd % kThreadsC == 0), "a warp's pairs in one head; whole "
                "rounds of own-row dims");
  extern __shared__ __align__(16) uint8_t stage_c[];
  uint8_t* ks = stage_c;
  uint8_t* vs = stage_c + kTileC * kRowB;
  __shared__ __align__(16) float q_s[kMaxG][kHd + 4];
  __shared__ float sc[kMaxG][kTileC];
  __shared__ float alpha_s[kMaxG];
  __shared__ __align__(16) float in_part[kS][kPer];  // from every block: its sums of this block's slice
  __shared__ float in_ml[kS][2][kMaxG];               // from every block: its max and sum per head
  __shared__ float w_s[kMaxG][kS];
  __shared__ float rope_c[kHd / 2], rope_s[kHd / 2];
  __shared__ float own_k[kHd];                        // the token's k (rotated in place) with rope
  __shared__ __align__(16) uint16_t own_kh[kHd], own_vh[kHd];  // its 2-byte row, for a later tile
  __shared__ __align__(8) uint64_t mbar;

  const int split = blockIdx.x;  // the block's rank in its cluster (cluster = (kS, 1, 1))
  const int kvh = blockIdx.y;
  // The token (blockIdx.z): its row of q and out; a token's cluster computes exactly what the
  // launch of that token alone computes.
  const int64_t t = blockIdx.z;
  float* const q_row = a.q.data + t * (a.q.stride ? a.q.stride : a.q.cols);
  float* const out_row = a.out.data + t * (a.out.stride ? a.out.stride : a.out.cols);
  const int G = kG > 0 ? kG : a.n_head / a.n_head_kv;
  const int h0 = kvh * G;
  const int64_t col = int64_t(kvh) * kHd;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int sh = kv_block_shift(a.k_cache);
  const uint8_t* kbase = static_cast<const uint8_t*>(a.k_cache.data) + col * 2;
  const uint8_t* vbase = static_cast<const uint8_t*>(a.v_cache.data) + col * 2;
  // Slices: whole quantization blocks with aq (Q8_0: 32, Q8_K: 256 outputs), else even.
  const int n_out = G * kHd;
  const int per = aq.kind == ActRound::q8_k   ? 256
                  : aq.kind == ActRound::q8_0 ? ((n_out + kS - 1) / kS + 31) / 32 * 32
                                              : ((n_out + kS - 1) / kS + 1) & ~1;
  const int n_owners = (n_out + per - 1) / per;

  // The mbarrier that counts this block's incoming bytes: from each of the kS blocks, its values
  // of this block's slice and 2 G floats of max / sum. Published to the cluster by the barrier
  // below (waited for before the first st.async).
  if (tid == 0) {
    const int n_mine = max(0, min(per, n_out - split * per));
    const uint32_t bytes = n_mine > 0 ? uint32_t(4 * kS * (n_mine + 2 * G)) : 0u;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&mbar)));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&mbar)), "r"(bytes)
                 : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_arrive_relaxed();

  int64_t s = 0, p = 0, j_begin = 0, j_end = 0;
  // Several tokens: gpos[u] = token u's position where it is a group row of this token (same
  // sequence, at most p), else -1 (in shared memory: registers are the occupancy's limit).
  const int nt = fl.one_token ? 1 : int(a.q.rows);
  __shared__ int gpos[kClusterMaxTokens];
  auto locate = [&]() {
    s = a.seq[t];
    p = a.pos[t];
    const int64_t lo = attn_first_pos(a, t, p);
    const int64_t chunk = (p - lo + 1 + kS - 1) / kS;
    j_begin = lo + split * chunk;
    j_end = j_begin + chunk < p + 1 ? j_begin + chunk : p + 1;  // may be empty
    if (!fl.one_token) {  // block-uniform
      if (tid < kClusterMaxTokens) gpos[tid] = tid < nt && a.seq[tid] == s && a.pos[tid] <= p ? int(a.pos[tid]) : -1;
      __syncthreads();
    }
  };
  // Row j is written by this step: the token's own row, or with several tokens a group row.
  auto step_row = [&](int64_t j) {
    if (fl.one_token) return j == p;
    bool g = false;
    for (int u = 0; u < nt; ++u) g |= gpos[u] == j;
    return g;
  };
  // mode 0: every row of the tile (but the step's rows with rope, written from own_kh / own_vh or
  // by fill_group_rows); 1: the rows outside the step's (before the wait); 2: the rest after 1.
  auto stage_tile = [&](int64_t j0, int n_j, int mode) {
    for (int it = tid; it < n_j * kR; it += kThreadsC) {
      const int jj = it / kR, e = it % kR;
      const int64_t j = j0 + jj;
      const bool own = step_row(j);
      if (mode == 1 ? own : mode == 2 ? (!own || fl.rope) : (own && fl.rope)) continue;
      const size_t slot = size_t(kv_slot(a.k_cache, sh, s, j));
      cp_async16(ks + jj * kRowB + 16 * e, kbase + slot * a.k_cache.row_bytes + 16 * e);
      cp_async16(vs + jj * kRowB + 16 * e, vbase + slot * a.v_cache.row_bytes + 16 * e);
    }
  };
  auto rope_angles = [&]() {
    for (int i = tid; i < rp.n_rot / 2; i += kThreadsC)
      rope_cos_sin(a.pos[t], rp.inv_freq[i], rp.attn_factor, rope_c[i], rope_s[i]);
  };
  // With rope and several tokens: the group rows in [j0, j0 + n_j) into the staged tile, k rotated
  // (rope_qk_store_kernel's arithmetic: the pair's angle for the row's position) and both rounded
  // to the cache type; the token's own row also into the cache. A thread per (row, dim pair): all
  // rows' angles at once (sincos in double is the long part).
  auto fill_group_rows = [&](int64_t j0, int n_j) {
    constexpr int kHalf = kHd / 2;
    const int half = rp.n_rot / 2;
    for (int it = tid; it < nt * kHalf; it += kThreadsC) {
      const int u = it / kHalf, i = it - u * kHalf;
      const int64_t j = gpos[u];
      if (j < j0 || j >= j0 + n_j) continue;
      const float* kr = rp.k + u * rp.k_stride + col;
      const float* vr = rp.v + u * rp.v_stride + col;
      uint16_t* kst = reinterpret_cast<uint16_t*>(ks + (j - j0) * kRowB);
      uint16_t* vst = reinterpret_cast<uint16_t*>(vs + (j - j0) * kRowB);
      // K: the rotary pair i, or two dims past n_rot; V: dims 2i, 2i + 1.
      int d0, d1;
      uint16_t hk0, hk1;
      if (i < half) {
        rope_dims(i, rp.n_rot, rp.neox, d0, d1);
        float c, sn, a2, b2;
        rope_cos_sin(j, rp.inv_freq[i], rp.attn_factor, c, sn);
        rope_apply(kr[d0], kr[d1], c, sn, a2, b2);
        hk0 = kv_round_bits<T>(a2);
        hk1 = kv_round_bits<T>(b2);
      } else {
        d0 = rp.n_rot + 2 * (i - half);
        d1 = d0 + 1;
        hk0 = kv_round_bits<T>(kr[d0]);
        hk1 = kv_round_bits<T>(kr[d1]);
      }
      const uint16_t hv0 = kv_round_bits<T>(vr[2 * i]), hv1 = kv_round_bits<T>(vr[2 * i + 1]);
      kst[d0] = hk0;
      kst[d1] = hk1;
      vst[2 * i] = hv0;
      vst[2 * i + 1] = hv1;
      if (u == t) {
        const size_t slot = size_t(kv_slot(a.k_cache, sh, s, j));
        uint16_t* kc = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(a.k_cache.data) + slot * a.k_cache.row_bytes) + col;
        uint16_t* vc = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(a.v_cache.data) + slot * a.v_cache.row_bytes) + col;
        kc[d0] = hk0;
        kc[d1] = hk1;
        vc[2 * i] = hv0;
        vc[2 * i + 1] = hv1;
      }
    }
  };
  bool early = false;
  if (fl.prefetch) {
    locate();
    if (fl.rope) rope_angles();
    if (s >= 0 && p >= 0 && p < a.k_cache.capacity && j_end > j_begin) {
      early = true;
      stage_tile(j_begin, int(min(int64_t(kTileC), j_end - j_begin)), 1);
    }
  }
  BRISK_PDL_ENTER();
  if (!fl.prefetch) {
    locate();
    if (fl.rope) rope_angles();
  }
  // Every global load the block needs now, issued together: q, and the token's k / v row.
  const bool own_blk = fl.rope && fl.one_token && p >= j_begin && p < j_end;
  float qv[kQ];
#pragma unroll
  for (int k = 0; k < kQ; ++k) {
    const int i = tid + kThreadsC * k;
    if (i < G * kHd) qv[k] = q_row[int64_t(h0) * kHd + i];
  }
  float kv[kOwn], vv[kOwn];  // dims tid + kThreadsC u
#pragma unroll
  for (int u = 0; u < kOwn; ++u) {
    const int d = tid + kThreadsC * u;
    kv[u] = vv[u] = 0.0f;
    if (own_blk && d < kHd) {
      kv[u] = rp.k[col + d];
      vv[u] = rp.v[col + d];
    }
  }
  const int n_first = int(j_end - j_begin < kTileC ? j_end - j_begin : kTileC);
  if (n_first > 0) stage_tile(j_begin, n_first, early ? 2 : 0);
#pragma unroll
  for (int k = 0; k < kQ; ++k) {
    const int i = tid + kThreadsC * k;
    if (i < G * kHd) q_s[i / kHd][i % kHd] = qv[k];
  }
#pragma unroll
  for (int u = 0; u < kOwn; ++u)
    if (own_blk && tid + kThreadsC * u < kHd) own_k[tid + kThreadsC * u] = kv[u];
  if (fl.rope) {
    __syncthreads();  // q_s, own_k, rope_c / rope_s
    const int half = rp.n_rot / 2;
    for (int i = tid; i < G * half; i += kThreadsC) {
      const int g = i / half, d = i % half;
      int d0, d1;
      rope_dims(d, rp.n_rot, rp.neox, d0, d1);
      rope_apply(q_s[g][d0], q_s[g][d1], rope_c[d], rope_s[d], q_s[g][d0], q_s[g][d1]);
    }
    if (own_blk && tid < kHd) {
      // The token's own K / V row of this KV head: rotated k and v into the cache (as
      // rope_qk_store_kernel's cache_put), into its staged row when it is in the first tile,
      // else into own_kh / own_vh for a later tile; the rotated k back.
      const size_t slot = size_t(kv_slot(a.k_cache, sh, s, p));
      uint16_t* kc = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(a.k_cache.data) + slot * a.k_cache.row_bytes) + col;
      uint16_t* vc = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(a.v_cache.data) + slot * a.v_cache.row_bytes) + col;
      const bool first = p - j_begin < kTileC;
      uint16_t* kst = first ? reinterpret_cast<uint16_t*>(ks + (p - j_begin) * kRowB) : own_kh;
      uint16_t* vst = first ? reinterpret_cast<uint16_t*>(vs + (p - j_begin) * kRowB) : own_vh;
#pragma unroll
      for (int u = 0; u < kOwn; ++u) {
        const int d = tid + kThreadsC * u;  // < kHd: kHd is a multiple of kThreadsC when above it
        const uint16_t hv = kv_round_bits<T>(vv[u]);
        vc[d] = hv;
        vst[d] = hv;
        if (d >= rp.n_rot) {
          const uint16_t hk = kv_round_bits<T>(kv[u]);
          kc[d] = hk;
          kst[d] = hk;
        } else if (d < half) {
          int d0, d1;
          rope_dims(d, rp.n_rot, rp.neox, d0, d1);
          float a2, b2;
          rope_apply(own_k[d0], own_k[d1], rope_c[d], rope_s[d], a2, b2);
          rp.k[col + d0] = a2;
          rp.k[col + d1] = b2;
          const uint16_t h0k = kv_round_bits<T>(a2), h1k = kv_round_bits<T>(b2);
          kc[d0] = h0k;
          kc[d1] = h1k;
          kst[d0] = h0k;
          kst[d1] = h1k;
        }
      }
    }
  }
  if (fl.rope && !fl.one_token && n_first > 0) fill_group_rows(j_begin, n_first);
  cp_async_wait_all();
  __syncthreads();  // q_s, the first tile

  // Output items: (head, dim pair) = tid + kThreadsC * k; a warp's pairs lie in one head.
  float acc[kItems][2];
#pragma unroll
  for (int k = 0; k < kItems; ++k) acc[k][0] = acc[k][1] = 0.0f;
  float m_run = -INFINITY, l_run = 0.0f;  // head `warp` (warps < G)

  for (int64_t j0 = j_begin; j0 < j_end; j0 += kTileC) {
    const int n_j = int(j_end - j0 < kTileC ? j_end - j0 : kTileC);
    if (j0 != j_begin) {
      __syncthreads();  // the previous tile's rows are read
      stage_tile(j0, n_j, 0);
      if (fl.rope && !fl.one_token) fill_group_rows(j0, n_j);
      if (fl.rope && fl.one_token && p >= j0 && p < j0 + n_j && tid < kR) {
        const int jj = int(p - j0);
        *reinterpret_cast<uint4*>(ks + jj * kRowB + 16 * tid) = reinterpret_cast<const uint4*>(own_kh)[tid];
        *reinterpret_cast<uint4*>(vs + jj * kRowB + 16 * tid) = reinterpret_cast<const uint4*>(own_vh)[tid];
      }
      cp_async_wait_all();
      __syncthreads();
    }
    // Scores: thread per (row, head); consecutive threads share a row.
    for (int it = tid; it < n_j * G; it += kThreadsC) {
      const int jj = it / G, g = it - jj * G;
      const uint8_t* kr = ks + jj * kRowB;
      const float* qg = q_s[g];
      float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
#pragma unroll 4
      for (int e = 0; e < kR; ++e) {
        float kf[8];
        kv_unpack8<T>(*reinterpret_cast<const uint4*>(kr + 16 * e), kf);
        const float4 qa = *reinterpret_cast<const float4*>(qg + 8 * e);
        const float4 qb = *reinterpret_cast<const float4*>(qg + 8 * e + 4);
        d0 = fmaf(qa.x, kf[0], d0);
        d1 = fmaf(qa.y, kf[1], d1);
        d2 = fmaf(qa.z, kf[2], d2);
        d3 = fmaf(qa.w, kf[3], d3);
        d0 = fmaf(qb.x, kf[4], d0);
        d1 = fmaf(qb.y, kf[5], d1);
        d2 = fmaf(qb.z, kf[6], d2);
        d3 = fmaf(qb.w, kf[7], d3);
      }
      float x = ((d0 + d1) + (d2 + d3)) * a.scale;
      if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
      sc[g][jj] = x;
    }
    __syncthreads();
    if (warp < G) {
      const float v0 = lane < n_j ? sc[warp][lane] : -INFINITY;
      const float v1 = lane + 32 < n_j ? sc[warp][lane + 32] : -INFINITY;
      const float m_new = fmaxf(m_run, warp_max(fmaxf(v0, v1)));
      const float al = expf(m_run - m_new);  // 0 on the first tile (m = -inf)
      const float e0 = expf(v0 - m_new), e1 = expf(v1 - m_new);
      l_run = l_run * al + warp_sum(e0 + e1);
      m_run = m_new;
      sc[warp][lane] = e0;
      sc[warp][lane + 32] = e1;
      if (lane == 0) alpha_s[warp] = al;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int it = tid + kThreadsC * k;
      const int g = it / kPairs, d = 2 * (it % kPairs);
      if (g < G) {  // warp-uniform
        const float al = alpha_s[g];
        float x0 = acc[k][0] * al, x1 = acc[k][1] * al;
        const uint8_t* vp = vs + 2 * d;
        const float* pg = sc[g];
#pragma unroll 4
        for (int jj = 0; jj < n_j; ++jj) {
          const float2 v = kv_pair<T>(*reinterpret_cast<const uint32_t*>(vp + jj * kRowB));
          const float pj = pg[jj];
          x0 = fmaf(pj, v.x, x0);
          x1 = fmaf(pj, v.y, x1);
        }
        acc[k][0] = x0;
        acc[k][1] = x1;
      }
    }
  }
  // Push: the output dims to the block that merges them, the max / sum of each head to all.
  cluster_wait();  // every block's mbarrier is initialized (arrived at before the wait)
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int it = tid + kThreadsC * k;
    const int g = it / kPairs, d = 2 * (it % kPairs);
    if (g < G) {
      const int o = g * kHd + d, owner = o / per;
      st_async_f32x2(cluster_addr(smem_addr(&in_part[split][o - owner * per]), owner), acc[k][0], acc[k][1],
                     cluster_addr(smem_addr(&mbar), owner));
    }
  }
  if (warp < G && lane < n_owners) {
    const uint32_t mb = cluster_addr(smem_addr(&mbar), lane);
    st_async_f32(cluster_addr(smem_addr(&in_ml[split][0][warp]), lane), m_run, mb);
    st_async_f32(cluster_addr(smem_addr(&in_ml[split][1][warp]), lane), l_run, mb);
  }
  if (split >= n_owners) return;  // nothing to merge (nothing comes in)
  mbar_wait_parity0(smem_addr(&mbar));
  // Merge slice `split`: out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s, in split order.
  // The weights once per (split, head): lanes i + kS * g of the first warps.
  if (warp < (kS * G + 31) / 32) {  // warp-uniform
    const int i = tid % kS, g = tid / kS;
    const float m = g < G ? in_ml[i][0][g] : -INFINITY;
    float mx = m;
#pragma unroll
    for (int o = kS / 2; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (g < G) w_s[g][i] = m == -INFINITY ? 0.0f : expf(m - mx);
  }
  __syncthreads();
  const int o = split * per + tid;
  const bool mine = tid < per && o < n_out;
  float v = 0.0f;
  if (mine) {
    const int g = o / kHd, d = o % kHd;
    float l = 0.0f;
#pragma unroll 4
    for (int i = 0; i < kS; ++i) {
      const float w = w_s[g][i];
      l = fmaf(w, in_ml[i][1][g], l);
      v = fmaf(w, in_part[i][tid], v);
    }
    v *= 1.0f / l;
    out_row[int64_t(h0 + g) * kHd + d] = v;
    // Every block of the cluster has read q before it pushed: the rotated heads go back, each
    // block its slice.
    if (fl.rope) q_row[int64_t(h0) * kHd + o] = q_s[g][d];
  }
  // The slice for the next matmul (act_quant.cuh, act_round.cu's rules): Q8_0 a warp per block,
  // Q8_K the whole block, F16 / BF16 per element.
  // The slice's first element: token t's row of [rows, n_head * kHd] dense activations.
  const int64_t c0 = t * int64_t(a.n_head) * kHd + int64_t(h0) * kHd + split * per;
  if (aq.kind == ActRound::q8_0) {
    if (warp * 32 < per && split * per + warp * 32 < n_out) {  // warp-uniform
      const float vv[1] = {v};
      const int64_t c = c0 + warp * 32;
      quant_block_warp<32>(vv, const_cast<int8_t*>(aq.q.q) + c, const_cast<float*>(aq.q.d) + c / 32, nullptr);
    }
  } else if (aq.kind == ActRound::q8_k) {
    quant_q8k_block256(v, const_cast<int8_t*>(aq.q.q) + c0, const_cast<float*>(aq.q.d) + c0 / 256);
  } else if (aq.kind == ActRound::bf16 && mine) {
    const_cast<float*>(aq.q.d)[c0 + tid] = __bfloat162float(__float2bfloat16_rn(v));
  } else if (aq.kind == ActRound::f16 && mine) {
    const_cast<float*>(aq.q.d)[c0 + tid] = __half2float(__float2half_rn(v));
  }
}

template <int kHd, int kS, int kG, KvT T>
int cluster_capacity() {
  static const int n = [] {
    auto k = attention_cluster_kernel<kHd, kS, kG, T>;
    if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kStageBytesC<kHd>)) !=
        cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    if (kS > 8 && cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = kS;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kS, 8, 1);
    cfg.blockDim = dim3(kThreadsC);
    cfg.dynamicSmemBytes = kStageBytesC<kHd>;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int c = 0;
    if (cudaOccupancyMaxActiveClusters(&c, k, &cfg) != cudaSuccess) {
      cudaGetLastError();
      c = 0;
    }
    return c;
  }();
  return n;
}

template <int kHd, int kS, int kG, KvT T>
cudaError_t launch_cluster(const AttentionArgs& a, const AttentionFlags& fl, const AttentionRope& rp, const AttentionQuant& aq,
                           cudaStream_t stream) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = flags().no_cuda_pdl ? 0 : 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = kS;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(kS), unsigned(a.n_head_kv), unsigned(a.q.rows));
  cfg.blockDim = dim3(kThreadsC);
  cfg.dynamicSmemBytes = kStageBytesC<kHd>;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  return cudaLaunchKernelEx(&cfg, attention_cluster_kernel<kHd, kS, kG, T>, a, fl, rp, aq);
}

}  // namespace

// Blocks per cluster for `a` on the cluster kernel, or 0 where it does not apply. Instances for
// groups of exactly 4 heads (Llama, Qwen layouts) and the generic one; BF16 caches of head_dim
// 64 and head_dim 256 (Gemma's sliding layers) only the generic one.
int cluster_splits(const AttentionArgs& a) {
  if (flags().no_cuda_attn_cluster || a.first || a.q.rows < 1 || a.q.rows > kClusterMaxTokens) return 0;
  const bool bf16 = a.k_cache.type == QuantType::BF16;
  if ((a.k_cache.type != QuantType::F16 && !bf16) || a.v_cache.type != a.k_cache.type) return 0;
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256 && a.head_dim != 512) return 0;
  const int group = a.n_head / a.n_head_kv;
  if (group < 1 || group > kMaxG) return 0;
  if (a.k_cache.row_bytes % 16 || a.v_cache.row_bytes % 16 || reinterpret_cast<uintptr_t>(a.k_cache.data) % 16 ||
      reinterpret_cast<uintptr_t>(a.v_cache.data) % 16)
    return 0;
  int64_t span = a.k_cache.capacity;
  if (a.window > 0 && a.window < span) span = a.window;
  const bool g4 = group == 4;
  constexpr KvT H = KvT::f16, B = KvT::bf16;
  for (const int n : {16, 8}) {
    if ((span + n - 1) / n > kMaxChunkC) continue;
    int c = 0;
    if (a.head_dim == 512)  // 16 blocks only: with 8, a block would merge more than 256 outputs
      c = n != 16 ? 0 : bf16 ? cluster_capacity<512, 16, 0, B>() : cluster_capacity<512, 16, 0, H>();
    else if (a.head_dim == 256)
      c = bf16 ? (n == 16 ? cluster_capacity<256, 16, 0, B>() : cluster_capacity<256, 8, 0, B>())
               : (n == 16 ? cluster_capacity<256, 16, 0, H>() : cluster_capacity<256, 8, 0, H>());
    else if (bf16 && a.head_dim == 128)
      c = n == 16 ? (g4 ? cluster_capacity<128, 16, 4, B>() : cluster_capacity<128, 16, 0, B>())
                  : (g4 ? cluster_capacity<128, 8, 4, B>() : cluster_capacity<128, 8, 0, B>());
    else if (bf16)
      c = n == 16 ? cluster_capacity<64, 16, 0, B>() : cluster_capacity<64, 8, 0, B>();
    else if (a.head_dim == 128)
      c = n == 16 ? (g4 ? cluster_capacity<128, 16, 4, H>() : cluster_capacity<128, 16, 0, H>())
                  : (g4 ? cluster_capacity<128, 8, 4, H>() : cluster_capacity<128, 8, 0, H>());
    else
      c = n == 16 ? (g4 ? cluster_capacity<64, 16, 4, H>() : cluster_capacity<64, 16, 0, H>())
                  : (g4 ? cluster_capacity<64, 8, 4, H>() : cluster_capacity<64, 8, 0, H>());
    if (c > 0) return n;
  }
  return 0;
}

cudaError_t launch_attention_cluster(const AttentionArgs& a, int n, const AttentionFlags& fl, const AttentionRope& rp,
                                     const AttentionQuant& aq, cudaStream_t s) {
  constexpr KvT H = KvT::f16, B = KvT::bf16;
  const bool g4 = a.n_head / a.n_head_kv == 4;
  if (a.head_dim == 512) {  // Gemma 4's full layers
    if (n != 16) return cudaErrorInvalidValue;
    return a.k_cache.type == QuantType::BF16 ? launch_cluster<512, 16, 0, B>(a, fl, rp, aq, s)
                                             : launch_cluster<512, 16, 0, H>(a, fl, rp, aq, s);
  }
  if (a.head_dim == 256) {  // Gemma's sliding layers
    if (a.k_cache.type == QuantType::BF16)
      return n == 16 ? launch_cluster<256, 16, 0, B>(a, fl, rp, aq, s) : launch_cluster<256, 8, 0, B>(a, fl, rp, aq, s);
    return n == 16 ? launch_cluster<256, 16, 0, H>(a, fl, rp, aq, s) : launch_cluster<256, 8, 0, H>(a, fl, rp, aq, s);
  }
  if (a.k_cache.type == QuantType::BF16) {
    if (a.head_dim == 128) {
      if (n == 16)
        return g4 ? launch_cluster<128, 16, 4, B>(a, fl, rp, aq, s) : launch_cluster<128, 16, 0, B>(a, fl, rp, aq, s);
      return g4 ? launch_cluster<128, 8, 4, B>(a, fl, rp, aq, s) : launch_cluster<128, 8, 0, B>(a, fl, rp, aq, s);
    }
    return n == 16 ? launch_cluster<64, 16, 0, B>(a, fl, rp, aq, s) : launch_cluster<64, 8, 0, B>(a, fl, rp, aq, s);
  }
  if (a.head_dim == 128) {
    if (n == 16)
      return g4 ? launch_cluster<128, 16, 4, H>(a, fl, rp, aq, s) : launch_cluster<128, 16, 0, H>(a, fl, rp, aq, s);
    return g4 ? launch_cluster<128, 8, 4, H>(a, fl, rp, aq, s) : launch_cluster<128, 8, 0, H>(a, fl, rp, aq, s);
  }
  if (n == 16) return g4 ? launch_cluster<64, 16, 4, H>(a, fl, rp, aq, s) : launch_cluster<64, 16, 0, H>(a, fl, rp, aq, s);
  return g4 ? launch_cluster<64, 8, 4, H>(a, fl, rp, aq, s) : launch_cluster<64, 8, 0, H>(a, fl, rp, aq, s);
}

}  // namespace brisk::cuda
