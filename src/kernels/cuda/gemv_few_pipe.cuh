// The few-token Q4_K / Q6_K GEMV of gemv_few_mma.cuh with its weight reads pipelined through
// shared memory: same tiles, warps, integer sums, float steps and lead-lane tree (bit-equal to
// few_mma_kernel, hence to one token), but
//   - the grid is persistent: a block takes tiles blockIdx.x, blockIdx.x + gridDim.x, ...;
//   - each warp streams its Q4_K / Q6_K blocks (of 16 rows) through a ring of kFewPipeStages
//     slots with cp.async, kFewPipeStages - 1 blocks ahead of the one it computes, across tile
//     boundaries: while a block computes one tile and replays its tree, the next tile's weights
//     are already on the way.
// Why: few_mma_kernel issues all of a tile's loads at once, then computes, then exits; with two
// blocks per SM both are often computing with nothing in flight, and a gate / up launch of 5
// tokens reads at 40 % of DRAM bandwidth where the one-token kernel reads at 56 %.
//
// Slot layout (one 16-row block of the warp's stream): Q4_K rows at a pitch of 160 bytes (144
// + 16: a half-warp's 8-byte reads of rows g = 0..3 fall in distinct banks), Q6_K rows at 208
// (208 mod 128 = 80: the 8 rows' 32-bit reads in distinct banks) and then the 16 rows' d values,
// each as the 4-byte word that holds it.
// Its Q4_K blocks take the mins' sums on the tensor cores too (q4k_mma_block's MINS_MMA).
// BRISK_NO_CUDA_FEW_MMA_PIPE: few_mma_kernel instead; BRISK_NO_CUDA_FEW_MMA_MINS: the activation
// sums by dp4a and shuffles, as few_mma_kernel (both the same results).
#pragma once
#include <algorithm>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/gemv_few_mma.cuh"

namespace brisk::cuda {

constexpr int kFewPipeStages = 3;
constexpr int kFewPipeQ4kPitch = 160;
constexpr int kFewPipeQ6kPitch = 208;
constexpr int kFewPipeDOffset = kFewMmaRows * kFewPipeQ6kPitch;  // Q6_K: the d words
constexpr int kFewPipeSlot = kFewPipeDOffset + 4 * kFewMmaRows;  // 3,392 bytes (16-byte multiple)
constexpr size_t kFewPipeSmem = 2 * sizeof(FewMmaLead) + size_t(kFewMmaWarps) * kFewPipeStages * kFewPipeSlot;

__device__ __forceinline__ void cp_async4(void* smem, const void* g) {
  const unsigned sa = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sa), "l"(g));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// The part that tile `tile` of the launch belongs to, and its index within the part.
__device__ __forceinline__ int tile_part(const GemvParts& parts, unsigned tile, unsigned& local) {
  int m = 0;
#pragma unroll
  for (int i = 0; i + 1 < kMaxParts; ++i)
    if (i + 1 < parts.n && tile >= parts.p[i].block_end) m = i + 1;
  local = tile - (m > 0 ? parts.p[m - 1].block_end : 0u);
  return m;
}

// The byte offset (from the part's weights) of the Q6_K d of row r, block b.
__device__ __forceinline__ size_t q6k_d_offset(const GemvPart& P, int64_t r, int64_t b) {
  return P.L.sc_offset + size_t(r) * P.L.sc_row + 2 * size_t(b);
}

// The warp's copies of block b of tile `tile` (16 rows; rows past the part's end copy its last
// row) into `slot`, lanes taking the 16-byte pieces in turn.
__device__ __forceinline__ void few_pipe_issue(const GemvParts& parts, unsigned q6k_parts, unsigned tile, int64_t b,
                                               uint8_t* slot, int lane) {
  unsigned local;
  const int m = tile_part(parts, tile, local);
  const GemvPart& P = parts.p[m];
  const int64_t r0 = int64_t(local) * kFewMmaRows;
  const auto row_of = [&](int i) { return r0 + i < P.n_out ? r0 + i : P.n_out - 1; };
  if ((q6k_parts >> m) & 1u) {
    constexpr int kPieces = 208 / 16;
    for (int c = lane; c < kFewMmaRows * kPieces; c += 32) {
      const int i = c / kPieces, e = c - kPieces * i;
      cp_async16(slot + i * kFewPipeQ6kPitch + 16 * e, P.w + size_t(row_of(i)) * P.L.qs_row + 208 * b + 16 * e);
    }
    if (lane < kFewMmaRows) {  // the 4-byte word holding the d (the plane starts 256-byte aligned)
      const size_t off = q6k_d_offset(P, row_of(lane), b);
      cp_async4(slot + kFewPipeDOffset + 4 * lane, P.w + (off & ~size_t(3)));
    }
  } else {
    constexpr int kPieces = 144 / 16;
    for (int c = lane; c < kFewMmaRows * kPieces; c += 32) {
      const int i = c / kPieces, e = c - kPieces * i;
      cp_async16(slot + i * kFewPipeQ4kPitch + 16 * e, P.w + size_t(row_of(i)) * P.L.qs_row + 144 * b + 16 * e);
    }
  }
}

// A thread's share of a staged block (rows g and g + 8), as q4k_mma_load / q6k_mma_load read it
// from global memory.
__device__ __forceinline__ void q4k_pipe_read(const uint8_t* slot, int g, int t4, Q4kMmaRaw& raw) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint8_t* row = slot + (g + 8 * i) * kFewPipeQ4kPitch;
    raw.h[i] = *reinterpret_cast<const uint4*>(row);
#pragma unroll
    for (int c = 0; c < 4; ++c) raw.q[i][c] = *reinterpret_cast<const uint2*>(row + 16 + 32 * c + 8 * t4);
  }
}
__device__ __forceinline__ void q6k_pipe_read(const uint8_t* slot, const GemvPart& P, int64_t r0, int64_t b, int g,
                                              int t4, Q6kMmaRaw& raw) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint8_t* row = slot + (g + 8 * i) * kFewPipeQ6kPitch;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
#pragma unroll
        for (int j = 0; j < 2; ++j)
          raw.ql[i][h][j][p] = *reinterpret_cast<const uint32_t*>(row + 64 * h + 32 * j + 16 * p + 4 * t4);
        raw.qh[i][h][p] = *reinterpret_cast<const uint32_t*>(row + 128 + 32 * h + 16 * p + 4 * t4);
      }
    raw.sc[i] = *reinterpret_cast<const uint4*>(row + 192);
    const int64_t r = r0 + g + 8 * i < P.n_out ? r0 + g + 8 * i : P.n_out - 1;
    const uint32_t word = *reinterpret_cast<const uint32_t*>(slot + kFewPipeDOffset + 4 * (g + 8 * i));
    raw.d[i] = half_bits_to_f32(uint16_t((q6k_d_offset(P, r, b) & 2) ? word >> 16 : word & 0xffffu));
  }
}

// The persistent few-token kernel (n_tiles tiles of 16 rows over `parts`, as few_mma_kernel's
// blocks). Warp w's stream: blocks w, w + 8, ... < nb of each of its block's tiles in turn.
template <int NT>
__global__ void __launch_bounds__(32 * kFewMmaWarps, 2) few_pipe_kernel(GemvParts parts, XRef x, unsigned q6k_parts,
                                                                        bool early, unsigned n_tiles, bool mins_mma) {
  static_assert(NT >= 1 && NT <= 8, "an mma tile holds 8 tokens");
  extern __shared__ __align__(16) uint8_t few_pipe_smem[];
  FewMmaLead* lead = reinterpret_cast<FewMmaLead*>(few_pipe_smem);  // [2]: tiles alternate
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int g = lane >> 2, t4 = lane & 3;
  uint8_t* ring = few_pipe_smem + 2 * sizeof(FewMmaLead) + size_t(warp) * kFewPipeStages * kFewPipeSlot;
  const int64_t nb = x.n_in / 256;

  // The next block of the stream to copy (none once its tile is past n_tiles; a warp with
  // warp >= nb has none at all).
  unsigned next_tile = blockIdx.x;
  int64_t next_b = warp;
  int next_slot = 0;
  const auto issue_next = [&] {
    if (next_b < nb && next_tile < n_tiles) {
      few_pipe_issue(parts, q6k_parts, next_tile, next_b, ring + next_slot * kFewPipeSlot, lane);
      next_b += kFewMmaWarps;
      if (next_b >= nb) {
        next_b = warp;
        next_tile += gridDim.x;
      }
    }
    cp_async_commit();  // empty groups keep the count: group k holds the stream's block k
    next_slot = next_slot + 1 == kFewPipeStages ? 0 : next_slot + 1;
  };
  const auto prologue = [&] {
#pragma unroll
    for (int s = 0; s + 1 < kFewPipeStages; ++s) issue_next();
  };
  if (early) prologue();
  BRISK_PDL_ENTER();
  if (!early) prologue();

  int slot = 0, lb = 0;
  for (unsigned tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    unsigned local;
    const int m = tile_part(parts, tile, local);
    const GemvPart& P = parts.p[m];
    const int64_t r0 = int64_t(local) * kFewMmaRows;
    const bool q6k = (q6k_parts >> m) & 1u;  // block-uniform
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    for (int64_t b = warp; b < nb; b += kFewMmaWarps) {  // warp-uniform
      __syncwarp();  // every lane is done with the slot the next copy overwrites
      issue_next();
      const uint8_t* s = ring + slot * kFewPipeSlot;
      slot = slot + 1 == kFewPipeStages ? 0 : slot + 1;
      // The block's activations are read before the wait for its weights (both in flight).
      if (q6k) {
        Q6kMmaX X;
        q6k_mma_x<NT>(x, nb, b, g, t4, X);
        cp_async_wait<kFewPipeStages - 1>();
        __syncwarp();  // the other lanes' copies of this block are visible
        Q6kMmaRaw raw;
        q6k_pipe_read(s, P, r0, b, g, t4, raw);
        // Lead lane 2w's blocks (w mod 16) and lead lane 2 (w + 8)'s in turn, as q6k_few_mma_rows.
        if ((b >> 3) & 1)  // acc[] by a constant index: registers
          q6k_mma_block(raw, X, acc[1]);
        else
          q6k_mma_block(raw, X, acc[0]);
      } else {
        Q4kMmaX X;
        q4k_mma_x<NT>(x, nb, b, g, t4, X);
        cp_async_wait<kFewPipeStages - 1>();
        __syncwarp();
        Q4kMmaRaw raw;
        q4k_pipe_read(s, g, t4, raw);
        if (mins_mma)
          q4k_mma_block<true>(raw, X, t4, acc[0]);
        else
          q4k_mma_block<false>(raw, X, t4, acc[0]);
      }
    }
    FewMmaLead& L = lead[lb];
    few_mma_store_lead(L, warp, g, t4, acc[0]);
    if (q6k) few_mma_store_lead(L, warp + kFewMmaWarps, g, t4, acc[1]);
    // lead[lb] complete. The next tile writes lead[lb ^ 1]; the one after it writes lead[lb]
    // again only past the next tile's barrier, which every thread reaches after this epilogue.
    __syncthreads();
    few_mma_store_row<NT>(L, P, r0, q6k);
    lb ^= 1;
  }
  cp_async_wait<0>();  // no copy outlives the block
}

// Blocks of few_pipe_kernel<NT> per SM (0 when it cannot run: the caller falls back).
template <int NT>
int few_pipe_blocks_per_sm() {
  static const int n = [] {
    if (cudaFuncSetAttribute(few_pipe_kernel<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kFewPipeSmem)) !=
        cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, few_pipe_kernel<NT>, 32 * kFewMmaWarps, kFewPipeSmem) !=
        cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return b;
  }();
  return n;
}

template <int NT>
void launch_few_pipe(const GemvParts& parts, const XRef& x, unsigned tiles, unsigned q6k_parts, bool early,
                     cudaStream_t s) {
  const int per_sm = few_pipe_blocks_per_sm<NT>();
  if (per_sm <= 0) {
    launch_kernel(few_mma_kernel<NT>, dim3(tiles), dim3(32 * kFewMmaWarps), 0, s, parts, x, q6k_parts, early);
    return;
  }
  const unsigned grid = std::min(tiles, unsigned(per_sm * sm_count()));
  launch_kernel(few_pipe_kernel<NT>, dim3(grid), dim3(32 * kFewMmaWarps), kFewPipeSmem, s, parts, x, q6k_parts, early,
                tiles, !flags().no_cuda_few_mma_mins);
}

// The few-token tensor-core GEMV for nt (2..8) tokens over `parts` (Q4_K, and Q6_K where
// q6k_parts has their bit; block_end recounted in tiles of kFewMmaRows rows): the pipelined
// kernel, or few_mma_kernel under BRISK_NO_CUDA_FEW_MMA_PIPE.
inline void launch_few_mma(GemvParts parts, const XRef& x, int nt, unsigned q6k_parts, bool early, cudaStream_t s) {
  if (flags().no_cuda_few_mma_pipe) {
    launch_few_mma_tiles(parts, x, nt, q6k_parts, early, s);
    return;
  }
  unsigned tiles = 0;
  for (int i = 0; i < parts.n; ++i) {
    tiles += unsigned((parts.p[i].n_out + kFewMmaRows - 1) / kFewMmaRows);
    parts.p[i].block_end = tiles;
  }
  switch (nt) {
    case 2: launch_few_pipe<2>(parts, x, tiles, q6k_parts, early, s); return;
    case 3: launch_few_pipe<3>(parts, x, tiles, q6k_parts, early, s); return;
    case 4: launch_few_pipe<4>(parts, x, tiles, q6k_parts, early, s); return;
    case 5: launch_few_pipe<5>(parts, x, tiles, q6k_parts, early, s); return;
    case 6: launch_few_pipe<6>(parts, x, tiles, q6k_parts, early, s); return;
    case 7: launch_few_pipe<7>(parts, x, tiles, q6k_parts, early, s); return;
    case 8: launch_few_pipe<8>(parts, x, tiles, q6k_parts, early, s); return;
    default: return;
  }
}

}  // namespace brisk::cuda
