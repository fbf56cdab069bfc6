// The few-token GEMV over Q4_K and Q6_K rows with whole weight blocks per lane (2..kMaxTok
// tokens: speculative verify steps, small batches): out[t, r] = dot(W[r, :], x[t, :]) + bias[r],
// every token's row bit-identical to the one-token launch of the same matrix.
//
// Why whole blocks: in the one-token lane layout (gemv_few_kernel: 4 lanes per Q4_K block, 2 per
// Q6_K block) every (token, unit) pays the shuffles of the block's integer sums, the float steps
// on every lane of the block and the activation sums (16 dp4a per Q4_K unit, 32 per Q6_K unit);
// its 128-register warps (16 per multiprocessor) then wait on their loads between bursts of
// work: a 5-token Q4_K matmul read 0.95 TB/s where one token reads 2.3. Here a lane owns whole
// blocks (Q4_K: 8 lanes a row, 4 rows a warp; Q6_K: 16 lanes a row, 2 rows a warp), sums each
// block's integers alone (64 dp4a per token, no shuffles), and each token's activation sums
// over the sub-blocks are computed once per thread block into shared memory. The weights stream
// through shared memory (cp.async), one step (a row's kSlots blocks for each row of the warp)
// ahead of the dots, and each warp walks several row groups of a grid of one wave, so its loads
// overlap its work.
//
// Same bits as one token: the one-token kernels give the lane that finishes a block (lane 4 s
// for Q4_K, 2 s for Q6_K) the blocks s, s + kSlots, s + 2 kSlots, ... of its row; it adds each
// block's float value (Q4_K: fsub(fmul(fmul(d, xd), float(isum)), fmul(fmul(dmin, xd),
// float(msum))); Q6_K: fmul(fmul(d, xd), float(isum))) to its sum in block order, and the warp
// reduces its lanes with the xor tree 16, 8, ..., 1, whose last levels add the +0 of the lanes
// that finish no block. The integers are exact whatever the order of their terms, the float
// steps are the same, lane s here accumulates the same blocks in the same order, and the tree
// kSlots / 2, ..., 1 over a row's lanes pairs the same sums in the same order.
// BRISK_NO_CUDA_GEMV_FEW_BLOCKS restores gemv_few_kernel, BRISK_NO_CUDA_GEMV_FEW gemv_kernel<NT>.
#pragma once
#include <algorithm>
#include <atomic>

#include "kernels/cuda/gemv_q4k_early.cuh"
#include "kernels/cuda/gemv_units.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

constexpr int kFbWarps = 4;  // warps per thread block

__device__ __forceinline__ void fb_copy16(void* smem, const void* g) {
  const unsigned sa = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(g));
}
__device__ __forceinline__ void fb_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void fb_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Q4_K: blocks of 144 bytes (d, dmin, 12 bytes of 6-bit scales / mins, 128 of nibbles); 8 lanes
// a row (the one-token kernels' 8 block lanes), 4 rows a warp; activation sums over the 8
// sub-blocks of 32.
struct FbQ4k {
  static constexpr int kBlockBytes = 144, kSlots = 8, kRows = 4, kSums = 8;
  // Block b of one row (in shared memory) dotted with NT tokens: each token's isum, msum
  // integers and the float step of the one-token kernels, added to acc[t].
  template <int NT>
  static __device__ __forceinline__ void dot(const uint4* blk, const RowRef&, const XRef& x, const int* bsum, int64_t nb,
                                             int64_t b, float (&acc)[NT]) {
    const uint4 h = blk[0];
    // Scales / mins of sub-blocks 0..3 (bytes of SC0 / M0) and 4..7 (SC1 / M1): Unit<q4_k>::scale_min.
    const uint32_t SC0 = h.y & 0x3f3f3f3fu, M0 = h.z & 0x3f3f3f3fu;
    const uint32_t SC1 = (h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u);
    const uint32_t M1 = ((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u);
    int isum[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) isum[t] = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // chunk j: sub-blocks 2 j (low nibbles) and 2 j + 1 (high)
      const uint4 qa = blk[1 + 2 * j], qb = blk[2 + 2 * j];
      const uint4 la = nib(qa, 0), lb = nib(qb, 0), ha = nib(qa, 4), hb = nib(qb, 4);
      const uint32_t SC = j < 2 ? SC0 : SC1;
      const int sc_lo = int((SC >> (16 * (j & 1))) & 0xffu), sc_hi = int((SC >> (16 * (j & 1) + 8)) & 0xffu);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int8_t* xq = x.q + t * x.n_in + 256 * b + 64 * j;
        const int s_lo = dot16(lb, ld_x(xq + 16), dot16(la, ld_x(xq), 0));
        const int s_hi = dot16(hb, ld_x(xq + 48), dot16(ha, ld_x(xq + 32), 0));
        isum[t] += sc_lo * s_lo + sc_hi * s_hi;
      }
    }
    const float d = half_bits_to_f32(uint16_t(h.x & 0xffffu)), dmin = half_bits_to_f32(uint16_t(h.x >> 16));
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int4* bs = reinterpret_cast<const int4*>(bsum + (t * nb + b) * kSums);
      const int4 b0 = bs[0], b1 = bs[1];
      const int msum = int(M0 & 0xffu) * b0.x + int((M0 >> 8) & 0xffu) * b0.y + int((M0 >> 16) & 0xffu) * b0.z +
                       int(M0 >> 24) * b0.w + int(M1 & 0xffu) * b1.x + int((M1 >> 8) & 0xffu) * b1.y +
                       int((M1 >> 16) & 0xffu) * b1.z + int(M1 >> 24) * b1.w;
      const float xd = x.d[t * nb + b];
      acc[t] += __fsub_rn(__fmul_rn(__fmul_rn(d, xd), float(isum[t])), __fmul_rn(__fmul_rn(dmin, xd), float(msum)));
    }
  }
};

// Q6_K: device blocks of 208 bytes (ql[128], qh[64], 16 int8 scales; the fp16 d in the row's
// scale array); 16 lanes a row (the one-token kernels' 16 block lanes: lane 2 s of a block pair
// takes its float step), 2 rows a warp; activation sums over the 16 groups of 16.
struct FbQ6k {
  static constexpr int kBlockBytes = 208, kSlots = 16, kRows = 2, kSums = 16;
  // Element 128 h + 32 qq + 16 p + i: low 4 bits in ql byte 64 h + 32 (qq & 1) + 16 p + i
  // (shifted by 4 (qq >> 1)), high 2 in qh byte 32 h + 16 p + i (shifted by 2 qq), scale byte
  // 8 h + 2 qq + p: UnitQ6kSpread's values. isum = sum of scale x (sum q x - 32 sum x) per group.
  template <int NT>
  static __device__ __forceinline__ void dot(const uint4* blk, const RowRef& row, const XRef& x, const int* bsum,
                                             int64_t nb, int64_t b, float (&acc)[NT]) {
    const uint4 scw = blk[12];
    const uint32_t S[4] = {scw.x, scw.y, scw.z, scw.w};
    int isum[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) isum[t] = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 h0 = blk[8 + 2 * h], h1 = blk[9 + 2 * h];
      const uint32_t H[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
      for (int qq = 0; qq < 4; ++qq) {
        const uint4 l0 = blk[4 * h + 2 * (qq & 1)], l1 = blk[4 * h + 2 * (qq & 1) + 1];
        const uint32_t L[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
        int q[8];
#pragma unroll
        for (int k = 0; k < 8; ++k)
          q[k] = int(((L[k] >> (4 * (qq >> 1))) & 0x0f0f0f0fu) | (((H[k] >> (2 * qq)) & 0x03030303u) << 4));
        const int sb = 8 * h + 2 * qq;
        const int sc0 = int(int8_t(uint8_t(S[sb >> 2] >> (8 * (sb & 3))))),
                  sc1 = int(int8_t(uint8_t(S[(sb + 1) >> 2] >> (8 * ((sb + 1) & 3)))));
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const int4* xq = reinterpret_cast<const int4*>(x.q + t * x.n_in + 256 * b + 128 * h + 32 * qq);
          const int4 x0 = xq[0], x1 = xq[1];
          int s0 = __dp4a(q[0], x0.x, 0), s1 = __dp4a(q[4], x1.x, 0);
          s0 = __dp4a(q[1], x0.y, s0);
          s1 = __dp4a(q[5], x1.y, s1);
          s0 = __dp4a(q[2], x0.z, s0);
          s1 = __dp4a(q[6], x1.z, s1);
          s0 = __dp4a(q[3], x0.w, s0);
          s1 = __dp4a(q[7], x1.w, s1);
          isum[t] += sc0 * s0 + sc1 * s1;
        }
      }
    }
    const float d = half_at(row.sc, b);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int4* bs = reinterpret_cast<const int4*>(bsum + (t * nb + b) * kSums);
      int off = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int4 v = bs[k];
        const uint32_t w = S[k];
        off += int(int8_t(uint8_t(w))) * v.x + int(int8_t(uint8_t(w >> 8))) * v.y + int(int8_t(uint8_t(w >> 16))) * v.z +
               int(int8_t(uint8_t(w >> 24))) * v.w;
      }
      const float xd = x.d[t * nb + b];
      acc[t] += __fmul_rn(__fmul_rn(d, xd), float(isum[t] - 32 * off));
    }
  }
};

template <class Fmt>
constexpr int kFbStage = Fmt::kRows * Fmt::kSlots * Fmt::kBlockBytes;  // bytes of a warp's step

// Shared memory of a thread block: 2 steps per warp, then the activation sums [NT, nb, kSums].
template <class Fmt>
constexpr size_t few_blocks_smem(int nt, int64_t nb) {
  return size_t(kFbWarps) * 2 * kFbStage<Fmt> + sizeof(int) * size_t(nt) * size_t(nb) * Fmt::kSums;
}

// Thread block c of part m takes the row groups (Fmt::kRows rows) [c G, (c + 1) G) of its part
// (G = `groups`), warp w of them the groups c G + w, c G + w + 4, ...; a warp's work is its
// (group, step) pairs in order, the weights of the next one copied while the current one is
// dotted. A step is kSlots blocks of each row of the group.
template <class Fmt, int NT>
__device__ __forceinline__ void few_blocks_part(const GemvPart& P, unsigned b_local, const XRef& x, int64_t groups, bool early,
                                                uint8_t* fb_smem) {
  constexpr int kSlots = Fmt::kSlots, kRows = Fmt::kRows, kSums = Fmt::kSums;
  constexpr int kRowStep = kSlots * Fmt::kBlockBytes, kStage = kFbStage<Fmt>;
  const int lane = threadIdx.x & 31, warp = int(threadIdx.x >> 5);
  const int rr = lane / kSlots, s = lane % kSlots;  // row of the group, slot (block s of each step)
  const int64_t nb = x.n_in / 256, steps = (nb + kSlots - 1) / kSlots;
  const int64_t n_groups = (P.n_out + kRows - 1) / kRows;
  const int64_t g0 = int64_t(b_local) * groups;
  const int64_t g_end = g0 + groups < n_groups ? g0 + groups : n_groups;
  const int64_t mine = g0 + warp < g_end ? (g_end - g0 - warp + kFbWarps - 1) / kFbWarps : 0;
  const int64_t n_work = mine * steps;
  uint8_t* const stage = fb_smem + size_t(warp) * 2 * kStage;
  int* const bsum = reinterpret_cast<int*>(fb_smem + size_t(kFbWarps) * 2 * kStage);
  // Copies work item w's weights (rows of the group past n_out: none) into stage buffer w & 1.
  auto issue = [&](int64_t w) {
    const int64_t g = g0 + warp + (w / steps) * kFbWarps, st = w % steps;
    const int64_t left = nb - kSlots * st;
    const int chunks = int(left < kSlots ? left : kSlots) * (Fmt::kBlockBytes / 16);
    uint8_t* dst = stage + (w & 1) * kStage;
#pragma unroll
    for (int k = 0; k < kStage / 16 / 32; ++k) {
      const int c = lane + 32 * k, row = c / (kRowStep / 16), off = c % (kRowStep / 16);
      const int64_t r = kRows * g + row;
      if (off < chunks && r < P.n_out)
        fb_copy16(dst + row * kRowStep + 16 * off, P.w + size_t(r) * P.L.qs_row + size_t(st) * kRowStep + 16 * off);
    }
    fb_commit();
  };
  if (early && n_work > 0) issue(0);
  BRISK_PDL_ENTER();
  if (!early && n_work > 0) issue(0);
  // Each token's sums over the groups of 256 / kSums activations (exact integers: the one-token
  // kernels' sums are the same integers).
  constexpr int kPer = 256 / kSums;
  for (int64_t e = threadIdx.x; e < NT * nb * kSums; e += blockDim.x) {
    const int8_t* xp = x.q + (e / kSums / nb) * x.n_in + kPer * (e % (nb * kSums));
    bsum[e] = kPer == 32 ? sum16(ld_x(xp + 16), sum16(ld_x(xp), 0)) : sum16(ld_x(xp), 0);
  }
  __syncthreads();
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  for (int64_t w = 0; w < n_work; ++w) {  // warp-uniform
    if (w + 1 < n_work) {
      issue(w + 1);
      fb_wait<1>();
    } else {
      fb_wait<0>();
    }
    __syncwarp();
    const int64_t g = g0 + warp + (w / steps) * kFbWarps, st = w % steps;
    const int64_t b = kSlots * st + s, r = kRows * g + rr;
    const RowRef row{.qs = nullptr, .sc = P.w + P.L.sc_offset + size_t(r < P.n_out ? r : P.n_out - 1) * P.L.sc_row};
    if (b < nb)
      Fmt::template dot<NT>(reinterpret_cast<const uint4*>(stage + (w & 1) * kStage + rr * kRowStep + s * Fmt::kBlockBytes),
                            row, x, bsum, nb, b, acc);
    if (st == steps - 1) {  // the group's rows are done: the one-token tree, then the epilogue
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float v = acc[t];
#pragma unroll
        for (int o = kSlots / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        acc[t] = 0.0f;
        if (s == 0 && r < P.n_out) {
          const float o = v + (P.bias ? P.bias[r] : 0.0f);
          P.out[t * P.out_stride + r] = o;
          if (P.res) P.sum[t * P.sum_stride + r] = P.res[t * P.res_stride + r] + o;
        }
      }
    }
    __syncwarp();  // the buffer read here is the one the next item's copy overwrites
  }
}
template <class Fmt, int NT>
__global__ void __launch_bounds__(32 * kFbWarps, 3) gemv_few_blocks(GemvParts parts, XRef x, int64_t groups, bool early) {
  extern __shared__ __align__(16) uint8_t fb_smem[];
  unsigned b_local;
  const int m = block_part(parts, b_local);
  few_blocks_part<Fmt, NT>(parts.p[m], b_local, x, groups, early, fb_smem);
}
// Q4_K and Q6_K parts on the same activations in one launch (a Q4_K_M layer's q / k with a Q6_K
// v): parts whose bit is set in q6k_parts are Q6_K; every row as in a launch of its format.
template <int NT>
__global__ void __launch_bounds__(32 * kFbWarps, 3)
    gemv_few_blocks_mixed(GemvParts parts, XRef x, int64_t groups, unsigned q6k_parts, bool early) {
  extern __shared__ __align__(16) uint8_t fb_smem[];
  unsigned b_local;
  const int m = block_part(parts, b_local);
  if ((q6k_parts >> m) & 1u)  // block-uniform
    few_blocks_part<FbQ6k, NT>(parts.p[m], b_local, x, groups, early, fb_smem);
  else
    few_blocks_part<FbQ4k, NT>(parts.p[m], b_local, x, groups, early, fb_smem);
}

// The largest dynamic shared memory a block may take, set once for `kernel` (48 KiB where the
// queries fail).
template <auto Kernel>
int few_blocks_max_smem() {
  static const int v = [] {
    int dev = 0, b = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, b) != cudaSuccess)
      b = 48 * 1024;
    cudaGetLastError();
    return b;
  }();
  return v;
}

// Sets the parts' block_end for a launch of Kernel with `smem` bytes per block (the row groups
// of part i have `rows[i]` rows) and returns the row groups per block (0: it does not fit).
template <auto Kernel>
int64_t few_blocks_geometry(GemvParts& parts, const int* rows, size_t smem) {
  if (smem > size_t(few_blocks_max_smem<Kernel>())) return 0;
  // Resident blocks per multiprocessor, cached for the last shared memory size asked.
  static std::atomic<int64_t> cached{-1};
  int64_t c = cached.load(std::memory_order_relaxed);
  int per_sm = 0;
  if (c >= 0 && size_t(c >> 8) == smem) {
    per_sm = int(c & 0xff);
  } else {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, 32 * kFbWarps, smem) != cudaSuccess) {
      cudaGetLastError();
      per_sm = 0;
    }
    per_sm = per_sm < 0 ? 0 : per_sm > 255 ? 255 : per_sm;
    cached.store(int64_t(smem) << 8 | per_sm, std::memory_order_relaxed);
  }
  if (per_sm < 1) return 0;
  int64_t total = 0;
  for (int i = 0; i < parts.n; ++i) total += (parts.p[i].n_out + rows[i] - 1) / rows[i];
  // Row groups per thread block: the whole launch in one wave of resident blocks, at least one
  // group per warp.
  const int64_t resident = int64_t(per_sm) * sm_count();
  int64_t groups = (total + resident - 1) / resident;
  groups = groups < kFbWarps ? kFbWarps : groups;
  unsigned blocks = 0;
  for (int i = 0; i < parts.n; ++i) {
    blocks += unsigned(((parts.p[i].n_out + rows[i] - 1) / rows[i] + groups - 1) / groups);
    parts.p[i].block_end = blocks;
  }
  return groups;
}

// Launches gemv_few_blocks for NT tokens over `parts` (their block_end set here); false where
// its shared memory does not fit (the caller runs gemv_few_kernel).
template <class Fmt, int NT>
bool launch_few_blocks_nt(GemvParts parts, const XRef& x, bool early, cudaStream_t s) {
  constexpr auto kernel = gemv_few_blocks<Fmt, NT>;
  const size_t smem = few_blocks_smem<Fmt>(NT, x.n_in / 256);
  int rows[kMaxParts];
  for (int& r : rows) r = Fmt::kRows;
  const int64_t groups = few_blocks_geometry<kernel>(parts, rows, smem);
  if (groups == 0) return false;
  launch_kernel(kernel, dim3(parts.p[parts.n - 1].block_end), dim3(32 * kFbWarps), smem, s, parts, x, groups, early);
  return true;
}
template <int NT>
bool launch_few_blocks_mixed_nt(GemvParts parts, const XRef& x, unsigned q6k_parts, bool early, cudaStream_t s) {
  constexpr auto kernel = gemv_few_blocks_mixed<NT>;
  const int64_t nb = x.n_in / 256;
  const size_t smem = std::max(few_blocks_smem<FbQ4k>(NT, nb), few_blocks_smem<FbQ6k>(NT, nb));
  int rows[kMaxParts];
  for (int i = 0; i < kMaxParts; ++i) rows[i] = (q6k_parts >> i) & 1u ? FbQ6k::kRows : FbQ4k::kRows;
  const int64_t groups = few_blocks_geometry<kernel>(parts, rows, smem);
  if (groups == 0) return false;
  launch_kernel(kernel, dim3(parts.p[parts.n - 1].block_end), dim3(32 * kFbWarps), smem, s, parts, x, groups, q6k_parts, early);
  return true;
}

// The launches of 2..kMaxTok tokens: one format (Fmt), or Q4_K and Q6_K parts (q6k_parts).
#define BRISK_FEW_BLOCKS_SWITCH(CALL)          \
  switch (nt) {                                \
    case 2: return CALL(2);                    \
    case 3: return CALL(3);                    \
    case 4: return CALL(4);                    \
    case 5: return CALL(5);                    \
    case 6: return CALL(6);                    \
    case 7: return CALL(7);                    \
    case 8: return CALL(8);                    \
    default: return false;                     \
  }
template <class Fmt>
bool launch_few_blocks(const GemvParts& parts, const XRef& x, int nt, bool early, cudaStream_t s) {
#define BRISK_FEW_ONE(N) launch_few_blocks_nt<Fmt, N>(parts, x, early, s)
  BRISK_FEW_BLOCKS_SWITCH(BRISK_FEW_ONE)
#undef BRISK_FEW_ONE
}
inline bool launch_few_blocks_mixed(const GemvParts& parts, const XRef& x, int nt, unsigned q6k_parts, bool early,
                                    cudaStream_t s) {
#define BRISK_FEW_MIXED(N) launch_few_blocks_mixed_nt<N>(parts, x, q6k_parts, early, s)
  BRISK_FEW_BLOCKS_SWITCH(BRISK_FEW_MIXED)
#undef BRISK_FEW_MIXED
}
#undef BRISK_FEW_BLOCKS_SWITCH

}  // namespace brisk::cuda
