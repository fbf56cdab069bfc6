// The decode GEMV (matmuls of up to 8 tokens): out[t, r] = dot(W[r, :], x[t, :]) + bias[r], on weights in
// the device layout (dequant.cuh).
//   - kLanes lanes per weight row (32 for Q8_0 / Q4_K / Q6_K / 16-bit formats, 16 for the shorter
//     rows of Q4_0, so each lane has enough loads in flight), up to kMaxWarps warps per
//     block; one-token Q6_K warps take two rows and read each activation unit once for both. A lane owns whole "units" of the row (a Q8_0 / Q4_0 block, a quarter Q4_K block, half a Q6_K block, or 16 bytes of
//     F32/F16/BF16) and issues the 128-bit loads of kUnroll units before any math, so each
//     weight byte is read once, coalesced, and enough bytes are in flight to reach the memory
//     bandwidth; the up to kMaxTok tokens of the launch are accumulated in registers.
//   - Quantized weights meet activations already quantized to the format's vec_dot_type
//     (Q8_0 blocks of 32 or Q8_K blocks of 256, int8 + float scale, act_round.cu): the
//     products are __dp4a integer sums per block, then scaled exactly as the CPU's vec_dot
//     does (float(isum) * (d_w * d_x)); lanes that share a K-quant block add their integer
//     partials with warp shuffles first, so each block's integer sum is the CPU's.
//   - F32 / F16 / BF16 weights take float activations (already rounded through F16 / BF16)
//     and float FMAs.
// The per-lane partial sums are reduced with warp shuffles. Larger batches run as several
// launches of kMaxTok tokens (weights re-read per launch). Launches of 2..kMaxTok tokens take
// the few-token kernel (gemv_few.cuh: each unit decoded once for all tokens, every token summed
// as the one-token launch sums it); gemv_kernel<NT > 1> is its reference (BRISK_NO_CUDA_GEMV_FEW).
// One-token Q8_0 / float / spread Q4_K rows of several passes (down projections: 4096 rows of
// 14336) are split over up to 8 warps of a block that take the row's passes in turn (kSplit):
// a launch with one warp per row is one wave of warps that each wait on 4-7 dependent passes,
// and its tail leaves the memory idle; split, the warps are short and come in several waves
// (Llama-3.1-8B decode: BF16 211 -> 228 tok/s, Q8_0 372 -> 382, Q4_K_M 435 -> 450).
// Q4_K blocks are spread over their lanes so that every warp load reads whole sectors
// (UnitQ4kSpread: Llama-3.1-8B Q4_K_M matmuls at 64% of the copy bandwidth against 58% with
// adjacent chunks), Q6_K blocks likewise (UnitQ6kSpread: the Q6_K output GEMV 157 -> 125 us),
// and a launch can add a residual to its output in the epilogue (launch_matmul_add). One-token
// Q4_K rows load and decode their weights before the dependent-launch wait (q4k_early_kernel),
// two rows per warp where that makes a launch one wave (q4k_pair_kernel).
#pragma once
#include <atomic>

#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/gemv_few.cuh"
#include "kernels/cuda/gemv_few_pipe.cuh"
#include "kernels/cuda/gemv_q4k_early.cuh"
#include "kernels/cuda/gemv_units.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

// With `early` (weights no kernel of the step writes), the first pass's weight loads are
// issued before the dependent-launch wait, so they stream while the previous kernel (the
// producer of x) still runs; x and the bias are read after it.
//
// One launch can serve up to kMaxParts matrices of the same format and row length on the same
// activations (q / k / v, gate / up): blocks [end[i-1], end[i]) take matrix i, every row as in
// a launch of its own (same lanes, same order: identical results), one launch boundary instead
// of several.
//
// kWide = 2 doubles the units a lane loads per pass (long rows of one token: half the dependent
// passes, twice the bytes in flight); a lane still adds its units in the same order.
//
// With a residual (part.res), each output is also added to it, as launch_add would: the residual
// add after the o-projection / down projection costs no launch of its own, and the RMS norm
// that follows reads one finished row (no block barrier for a norm written in place).
//
// kRows > 1 (formats of 32 lanes per row) gives a warp kRows consecutive rows: a lane takes the
// same units of each, so the activations of a unit are read once for kRows rows (the L1 traffic
// of the K-quant dots is mostly activations); each row is summed as with kRows = 1.
// kSpread (Q4_K / Q6_K): the spread lane layout (UnitQ4kSpread, UnitQ6kSpread); for F32 / F16 /
// BF16, one element per unit (FloatAnyUnit: rows of any length, chosen by shape).
// kSplit > 1 (one row per warp): kSplit consecutive warps share a row (below). Split kernels are
// built for kMinB resident blocks per multiprocessor where given (Q8_0: 3), else 4; the others
// for kMinB, 0 (unset) unless the launcher asks: a minimum of 1 lets ptxas spend more registers
// (Q8_0 64 -> 80, Q4_K 64 -> 84), which cuts the resident blocks (Llama-3.1-8B Q4_K_M 433 -> 369
// tok/s with 1 for all).
template <DevFormat F, int NT, int kWide = 1, int kRows = 1, bool kSpread = false, int kSplit = 1, int kMinB = 0>
__global__ void __launch_bounds__(32 * kMaxWarps, kSplit > 1 ? (kMinB ? kMinB : 4) : kMinB)
    gemv_kernel(GemvParts parts, XRef x, bool early) {
  static_assert(!kSpread || F == DevFormat::q4_k || F == DevFormat::q5_k || F == DevFormat::q6_k ||
                    F == DevFormat::f32 || F == DevFormat::f16 || F == DevFormat::bf16,
                "the spread layouts are the K-quants' and the float formats' rows of any length");

  using U = std::conditional_t<kSpread, SpreadUnit<F>, Unit<F>>;
  constexpr int kUnroll = U::kUnroll * kWide;
  constexpr int kLanes = U::kLanes;         // lanes per row
  static_assert(kRows == 1 || kLanes == 32, "several rows per warp: one row across the warp");
  constexpr int kRowsPerWarp = 32 / kLanes * kRows;
  int m = 0;
#pragma unroll
  for (int i = 0; i + 1 < kMaxParts; ++i)
    if (i + 1 < parts.n && blockIdx.x >= parts.p[i].block_end) m = i + 1;
  const unsigned b_local = blockIdx.x - (m > 0 ? parts.p[m > 0 ? m - 1 : 0].block_end : 0u);
  float* const out = parts.p[m].out;
  const int64_t out_stride = parts.p[m].out_stride;
  const uint8_t* const w = parts.p[m].w;
  const DevLayout L = parts.p[m].L;
  const int64_t n_out = parts.p[m].n_out;
  const float* const bias = parts.p[m].bias;
  const float* const res = parts.p[m].res;
  static_assert(kSplit == 1 || kLanes == 32, "split rows: one row across each warp");
  const int lane = threadIdx.x & 31, sl = lane % kLanes;
  const int warp = int(threadIdx.x >> 5), part = warp % kSplit;  // part: which passes of the row
  const int64_t r0 = (int64_t(b_local) * (blockDim.x / 32 / kSplit) + warp / kSplit) * kRowsPerWarp;
  if (kSplit == 1 && r0 >= n_out) {  // whole warps leave together
    BRISK_PDL_ENTER();
    return;
  }
  const int64_t r = r0 + lane / kLanes;  // the first row (kRows > 1: r .. r + kRows - 1)
  RowRef row[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int64_t rr = r + j < n_out ? r + j : n_out - 1;  // lanes of a missing row read a real one, store nothing
    row[j] = RowRef{.qs = w + size_t(rr) * L.qs_row, .sc = w + L.sc_offset + size_t(rr) * L.sc_row};
  }
  const int64_t n_units = U::count(x.n_in);
  // Warp-uniform trip count: lanes past the end load nothing and add nothing, but still take
  // part in the shuffles of the K-quant dots.
  constexpr int64_t kStep = int64_t(kLanes) * kUnroll;
  typename U::Raw raw[kRows][kUnroll];
  auto load_pass = [&](int64_t base) {
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t u = base + kLanes * k + sl;
#pragma unroll
      for (int j = 0; j < kRows; ++j)
        if (u < n_units) U::load(row[j], u, raw[j][k]);
    }
  };
  // kSplit > 1: the kSplit warps of a row take its passes in turn (warp part takes passes part,
  // part + kSplit, ...), and add their sums through shared memory in warp order.
  // (kSplit == 1: warps past the end have left, and the first pass is 0 at compile time.)
  const int64_t first = kSplit == 1 ? 0 : r0 < n_out ? int64_t(part) * kStep : n_units;  // past the end: no passes
  if (early && (kSplit == 1 || first < n_units)) load_pass(first);
  BRISK_PDL_ENTER();
  if (!early && (kSplit == 1 || first < n_units)) load_pass(first);
  float acc[kRows][NT];
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[j][t] = 0.0f;
  for (int64_t base = first; base < n_units; base += kStep * kSplit) {
    if (base > first) load_pass(base);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t u0 = base + kLanes * k;
      if (u0 >= n_units) break;  // uniform
      const int64_t u = u0 + sl;
      const bool ok = u < n_units;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
#pragma unroll
        for (int j = 0; j < kRows; ++j) {
          if constexpr (U::kInt) {
            // Every lane calls dot (shuffles; a block's lanes are all in range or all out), lanes
            // past the end read the activations of unit u0 and drop the result.
            const float v = U::dot(raw[j][k], x, t, ok ? u : u0);
            if (ok) acc[j][t] += v;
          } else {
            if (ok) acc[j][t] += U::dot(raw[j][k], x, t, u);
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float v = acc[j][t];
      for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[j][t] = v;
    }
  }
  if constexpr (kSplit > 1) {
    __shared__ float part_sums[kMaxWarps][kRows][NT];
    if (lane == 0)
#pragma unroll
      for (int j = 0; j < kRows; ++j)
#pragma unroll
        for (int t = 0; t < NT; ++t) part_sums[warp][j][t] = acc[j][t];
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int j = 0; j < kRows; ++j)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float v = part_sums[warp][j][t];
#pragma unroll
        for (int q = 1; q < kSplit; ++q) v += part_sums[warp + q][j][t];
        acc[j][t] = v;
      }
  }
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    if (sl == 0 && r + j < n_out) {
      const float b = bias ? bias[r + j] : 0.0f;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float o = acc[j][t] + b;
        out[t * out_stride + r + j] = o;
        if (res) parts.p[m].sum[t * parts.p[m].sum_stride + r + j] = res[t * parts.p[m].res_stride + r + j] + o;
      }
    }
  }
}

// Blocks of `warps` warps of Kernel resident on the whole device at once (cached per kernel and
// block size; 0 where the query fails).
template <auto Kernel>
int64_t resident_blocks(int warps) {
  static std::atomic<int64_t> cache[kMaxWarps + 1] = {};
  std::atomic<int64_t>& c = cache[warps];
  int64_t n = c.load(std::memory_order_relaxed);
  if (n == 0) {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, Kernel, 32 * warps, 0) != cudaSuccess) {
      cudaGetLastError();
      b = 0;
    }
    n = b > 0 ? int64_t(b) * sm_count() : -1;
    c.store(n, std::memory_order_relaxed);
  }
  return n > 0 ? n : 0;
}

// Blocks of 4 warps of two rows each over the parts (their block_end set in `pairs`).
inline unsigned pair_blocks(const MatmulArgs* a, int n_parts, GemvParts& pairs) {
  unsigned b = 0;
  for (int i = 0; i < n_parts; ++i) {
    b += unsigned((a[i].w.n_out + 7) / 8);
    pairs.p[i].block_end = b;
  }
  return b;
}
// Rows two per warp (q4k_pair_kernel) where one per warp takes more than one wave of Single and
// the pairs fit in one wave of Pair (blocks of 4 warps).
template <auto Single, auto Pair>
bool pairs_pay(unsigned single_blocks, unsigned pair_blocks) {
  return !flags().no_cuda_gemv_pairs && int64_t(single_blocks) > resident_blocks<Single>(4) &&
         int64_t(pair_blocks) <= resident_blocks<Pair>(4);
}

// Whether the 16-byte units of a float format (FloatUnit) fit the launch's rows from token t0: rows
// a multiple of the unit's elements, weight rows and activation rows 16-byte aligned.
template <DevFormat F>
bool float_units_fit(const MatmulArgs* a, int n_parts, int64_t t0) {
  const int64_t n_in = a[0].w.n_in;
  const size_t row_bytes = dev_layout(F, n_in, 1).qs_row;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n_in % unit_elems<F>() != 0 || row_bytes % 16 != 0 || a[0].x.row_stride() % 4 != 0 || !aligned(a[0].x.row(t0)))
    return false;
  for (int i = 0; i < n_parts; ++i)
    if (!aligned(a[i].w.data)) return false;
  return true;
}

// The split kernel (kSplit warps a row) for nt tokens: one token as built for kMinB resident
// blocks; 2..8 tokens (the same per-row sums: speculative verify groups, small batches) for 2,
// whose registers hold the tokens' sums without spills.
template <DevFormat F, bool kSp, int kMinB>
void launch_gemv_split(int split, int nt, dim3 grid, dim3 block, cudaStream_t s, const GemvParts& parts,
                       const XRef& x, bool early) {
#define BRISK_GEMV_SPLIT(N, S, B)                                                                        \
  if (nt == N && split == S) {                                                                           \
    launch_kernel(gemv_kernel<F, N, 1, 1, kSp, S, B>, grid, block, 0, s, parts, x, early);               \
    return;                                                                                              \
  }
#define BRISK_GEMV_SPLITS(N, B) BRISK_GEMV_SPLIT(N, 2, B) BRISK_GEMV_SPLIT(N, 4, B) BRISK_GEMV_SPLIT(N, 8, B)
  BRISK_GEMV_SPLITS(1, kMinB)
  BRISK_GEMV_SPLITS(2, 2) BRISK_GEMV_SPLITS(3, 2) BRISK_GEMV_SPLITS(4, 2) BRISK_GEMV_SPLITS(5, 2)
  BRISK_GEMV_SPLITS(6, 2) BRISK_GEMV_SPLITS(7, 2) BRISK_GEMV_SPLITS(8, 2)
#undef BRISK_GEMV_SPLITS
#undef BRISK_GEMV_SPLIT
}

// Warps per block: kMaxWarps, halved while that leaves fewer than two blocks per multiprocessor
// (small matrices spread over more multiprocessors); counted over all parts of the launch.
template <DevFormat F>
void launch_gemv(const MatmulArgs* a, int n_parts, const QuantAct* xq, const Mat* res, const Mat* sum, int64_t t0, int nt,
                 bool early, cudaStream_t s) {
  // One token over spread Q4_K rows: the usual units per lane and pass, rows of several passes
  // split over warps (below), instead of the wide kernel (Llama-3.1-8B Q4_K_M 435 -> 450 tok/s).
  const bool q4k_split = F == DevFormat::q4_k && nt == 1 && !flags().no_cuda_gemv_split && !flags().no_cuda_q4k_spread;
  // Spread Q5_K rows likewise (it has no early-decode kernel, so its rows of several passes
  // always split), for steps of 2..8 tokens too (below).
  const bool q5k_split = F == DevFormat::q5_k && !flags().no_cuda_gemv_split && !flags().no_cuda_q5k_spread;
  // One token over Q6_K: two rows per warp (gemv_kernel's kRows; Q4_K measured slower with 2
  // or 4, as was Q6_K's wide variant with 2 rows).
  const bool two_rows = F == DevFormat::q6_k && nt == 1 && !flags().no_cuda_gemv_rows;
  constexpr bool kFloat = F == DevFormat::f32 || F == DevFormat::f16 || F == DevFormat::bf16;
  // Float rows that the 16-byte units do not fit (length, row or activation alignment): one
  // element per unit (FloatAnyUnit), one warp per row, no split.
  const bool float_any = kFloat && !float_units_fit<F>(a, n_parts, t0);
  // 2..kMaxTok tokens: the few-token kernel (gemv_few.cuh) with the split of one token (below),
  // each unit decoded once for all tokens (float rows of any length keep gemv_kernel).
  const bool few = nt > 1 && !flags().no_cuda_gemv_few && !float_any;
  const int64_t n_units = a[0].w.n_in / unit_elems<F>();
  // One token over K-quant rows of more than one pass: the wide variant (measured slower for
  // BF16 and no faster for Q8_0, whose passes already hold 4-8 units per lane).
  const bool wide = (F == DevFormat::q4_k || F == DevFormat::q6_k) && !two_rows && nt == 1 && !flags().no_cuda_gemv_wide && !q4k_split &&
                    n_units > int64_t(Unit<F>::kLanes) * Unit<F>::kUnroll;
  const int64_t step = int64_t(Unit<F>::kLanes) * Unit<F>::kUnroll * (wide ? 2 : 1);
  const int64_t passes = (n_units + step - 1) / step;
  // One token over Q8_0 / float / spread Q4_K rows of more than one pass: split rows
  // (gemv_kernel's kSplit), up to one pass per warp. (The wide Q4_K kernel split measured 432.5
  // against 434.5 tok/s for Llama-3.1-8B Q4_K_M, and the Q6_K kernels split slower too: the
  // down projection 30.2 us with one row per warp in 4 warps against 22.4 for two rows a warp.)
  // (Q4_K rows decoded early take their passes in one warp: Llama-3.1-8B Q4_K_M 485.4-485.9
  // against 481.8-481.9 tok/s with the split, the Q4_K down projection 17.1-17.9 against
  // 18.3-19.1 us event-timed.)
  // Steps of 2..8 tokens split their Q8_0 / float / Q5_K rows as one token does, so that each
  // row sums its passes in the order of decoding that token alone (a speculative verify group's
  // rows equal one-token decoding; rows not split summed the passes in one warp, in another
  // order).
  const bool can_split = (q4k_split && flags().no_cuda_q4k_early_decode) || q5k_split ||
                         (!flags().no_cuda_gemv_split && (F == DevFormat::q8_0 || (kFloat && !float_any)));
  // One token over Q4_K / Q6_K rows: blocks of at most 4 warps, whose resident slots free as
  // soon as their 4 warps finish (Llama-3.1-8B Q4_K_M 461.0 -> 465.8-466.1 tok/s, gate / up
  // 24.0-24.6 -> 23.2-23.7 us event-timed; Q8_0 measured slower with 4: 391.8 against 396.6).
  constexpr bool kSmallBlockFormat = F == DevFormat::q4_k || F == DevFormat::q5_k || F == DevFormat::q6_k;
  const bool small_blocks = nt == 1 && kSmallBlockFormat && !flags().no_cuda_gemv_small_blocks;
  const int max_warps = small_blocks ? kMaxWarps / 2 : kMaxWarps;
  // The split of one token (its blocks' warps bound it), whatever the step's tokens.
  const int max_split = kSmallBlockFormat && !flags().no_cuda_gemv_small_blocks ? kMaxWarps / 2 : kMaxWarps;
  int split = 1;
  while (can_split && split * 2 <= passes && split * 2 <= max_split) split *= 2;
  // Few tokens over spread Q4_K rows: two rows per warp share each token's activations.
  const bool few_rows = few && F == DevFormat::q4_k && !flags().no_cuda_q4k_spread && split == 1 &&
                        !flags().no_cuda_gemv_few_rows;
  const int rows_per_warp = 32 / Unit<F>::kLanes * (two_rows || few_rows ? 2 : 1);
  int64_t rows = 0;
  for (int i = 0; i < n_parts; ++i) rows += a[i].w.n_out;
  int warps = max_warps;
  while (warps > split && (rows * split + warps * rows_per_warp - 1) / (warps * rows_per_warp) < 2 * sm_count()) warps /= 2;
  const int64_t rows_per_block = int64_t(warps / split) * rows_per_warp;
  GemvParts parts{};
  parts.n = n_parts;
  unsigned blocks = 0;
  for (int i = 0; i < n_parts; ++i) {
    blocks += unsigned((a[i].w.n_out + rows_per_block - 1) / rows_per_block);
    parts.p[i] = GemvPart{.out = a[i].out.row(t0), .out_stride = a[i].out.row_stride(),
                          .w = static_cast<const uint8_t*>(a[i].w.data), .L = dev_layout(F, a[i].w.n_in, a[i].w.n_out),
                          .n_out = a[i].w.n_out, .bias = a[i].bias, .block_end = blocks, .res = nullptr,
                          .res_stride = 0, .sum = nullptr, .sum_stride = 0};
  }
  if (res) {
    parts.p[0].res = res->row(t0);
    parts.p[0].res_stride = res->row_stride();
    parts.p[0].sum = sum->row(t0);
    parts.p[0].sum_stride = sum->row_stride();
  }
  const dim3 grid(blocks), block(32 * warps);
  XRef x{.q = nullptr, .d = nullptr, .f = nullptr, .n_in = a[0].w.n_in, .x_stride = a[0].x.row_stride()};
  if (xq) {
    const int64_t blk = act_block<F>();
    x.q = xq->q + t0 * a[0].w.n_in;
    x.d = xq->d + t0 * (a[0].w.n_in / blk);
  } else {
    x.f = a[0].x.row(t0);
  }
  // Q4_K / Q5_K / Q6_K: the spread lane layouts unless BRISK_NO_CUDA_Q4K_SPREAD / _Q5K_ / _Q6K_;
  // float formats: rows of any length where the 16-byte units do not fit.
  constexpr bool kKquant = F == DevFormat::q4_k || F == DevFormat::q5_k || F == DevFormat::q6_k;
  constexpr bool kCanSpread = kKquant || kFloat;
  const bool spread = F == DevFormat::q4_k   ? !flags().no_cuda_q4k_spread
                      : F == DevFormat::q5_k ? !flags().no_cuda_q5k_spread
                      : F == DevFormat::q6_k ? !flags().no_cuda_q6k_spread
                                             : float_any;
  if (few) {
    // Q4_K / Q6_K rows that one token does not split: on the tensor cores where enabled (same bits).
    if constexpr (F == DevFormat::q4_k || F == DevFormat::q6_k) {
      if (spread && split == 1 && !flags().no_cuda_gemv_few_mma) {
        launch_few_mma(parts, x, nt, F == DevFormat::q6_k ? ~0u : 0u, early, s);
        return;
      }
    }
    if (kKquant && spread)
      launch_gemv_few<F, kKquant>(parts, x, nt, split, few_rows, grid, block, early, s);
    else
      launch_gemv_few<F, false>(parts, x, nt, split, few_rows, grid, block, early, s);
    return;
  }
  if constexpr (F == DevFormat::q6_k) {
    if (two_rows) {
      if (spread)
        launch_kernel(gemv_kernel<F, 1, 1, 2, kCanSpread>, grid, block, 0, s, parts, x, early);
      else
        launch_kernel(gemv_kernel<F, 1, 1, 2>, grid, block, 0, s, parts, x, early);
      return;
    }
  }
  if constexpr (F == DevFormat::q4_k || F == DevFormat::q6_k) {
    if (wide) {
      if (spread)
        launch_kernel(gemv_kernel<F, 1, 2, 1, kCanSpread>, grid, block, 0, s, parts, x, early);
      else
        launch_kernel(gemv_kernel<F, 1, 2>, grid, block, 0, s, parts, x, early);
      return;
    }
  }
  if constexpr (F == DevFormat::q8_0) {
    // One-token Q8_0 rows of one pass: built with a minimum of 1 resident block (80 registers,
    // 3 blocks per multiprocessor instead of 4; same code): 382.0 against 378.8 tok/s. Where
    // the launch is one wave of the 64-register build and more of the 80-register one, the
    // former: e.g. an o-projection of 512 blocks of 8 warps is one wave of 528 at 4 blocks per
    // multiprocessor, 1.3 waves of 396 at 3 (10.4-10.9 us against 11.7-12.0 event-timed). (Over
    // many waves the warps stagger and the faster build wins: gate / up 28672 rows took 34.4-35.1
    // us with it, 35.6-36.3 with the 64-register one; q / k / v, 768 blocks, 1.9 waves at 3 and
    // 1.5 at 4: Llama-3.1-8B Q8_0 384.5 against 393.4 tok/s with the 64-register build.)
    if (nt == 1 && split == 1) {
      constexpr auto k80 = gemv_kernel<F, 1, 1, 1, false, 1, 1>;
      constexpr auto k64 = gemv_kernel<F, 1>;
      const int64_t blocks = parts.p[n_parts - 1].block_end;
      if (!flags().no_cuda_gemv_waves && blocks <= resident_blocks<k64>(warps) && blocks > resident_blocks<k80>(warps))
        launch_kernel(k64, grid, block, 0, s, parts, x, early);
      else
        launch_kernel(k80, grid, block, 0, s, parts, x, early);
      return;
    }
  }
  if constexpr (F == DevFormat::q8_0) {
    // Split Q8_0 rows: built for 3 resident blocks (77 registers; 4 blocks: 64 with 16 bytes of
    // spills). Same code and results; Llama-3.1-8B Q8_0 393.8 against 391.3-391.6 tok/s, the
    // down projection 21.3 against 22.0 us event-timed.
    if (split > 1) {
      launch_gemv_split<F, false, 3>(split, nt, grid, block, s, parts, x, early);
      return;
    }
  }
  if constexpr (F == DevFormat::q4_k) {
    // One-token spread Q4_K rows (one per warp, not split): decoded before the wait.
    if (nt == 1 && spread && !wide && split == 1 && !flags().no_cuda_q4k_early_decode) {
      // Rows of several passes: 64 registers with 40 bytes of spills, one wave of 4096 down
      // rows; built for 3 blocks (80 registers, no spills, 1.3 waves): 473.6-474.3 against
      // 488.4-488.9 tok/s for Llama-3.1-8B Q4_K_M.
      if (passes > 1) {
        launch_kernel(q4k_early_kernel<false, true>, grid, block, 0, s, parts, x, 0u, early);
        return;
      }
      if (warps == 4) {
        GemvParts pairs = parts;
        if (pairs_pay<q4k_early_kernel<>, q4k_pair_kernel<>>(blocks, pair_blocks(a, n_parts, pairs))) {
          launch_kernel(q4k_pair_kernel<>, dim3(pairs.p[n_parts - 1].block_end), block, 0, s, pairs, x, 0u, early);
          return;
        }
      }
      launch_kernel(q4k_early_kernel<>, grid, block, 0, s, parts, x, 0u, early);
      return;
    }
  }
  if constexpr (F == DevFormat::q4_k) {  // split rows (spread only; one token: nt == 1 here)
    if (split == 8) { launch_kernel(gemv_kernel<F, 1, 1, 1, true, 8>, grid, block, 0, s, parts, x, early); return; }
    if (split == 4) { launch_kernel(gemv_kernel<F, 1, 1, 1, true, 4>, grid, block, 0, s, parts, x, early); return; }
    if (split == 2) { launch_kernel(gemv_kernel<F, 1, 1, 1, true, 2>, grid, block, 0, s, parts, x, early); return; }
  }
  if constexpr (kFloat || F == DevFormat::q5_k) {  // split rows (Q5_K: spread only)
    if (split > 1) {
      launch_gemv_split<F, kKquant, 0>(split, nt, grid, block, s, parts, x, early);
      return;
    }
  }
  if (spread) {
#define BRISK_GEMV_CASE(N) \
  case N: launch_kernel(gemv_kernel<F, N, 1, 1, kCanSpread>, grid, block, 0, s, parts, x, early); break;
    switch (nt) {
      BRISK_GEMV_CASE(1) BRISK_GEMV_CASE(2) BRISK_GEMV_CASE(3) BRISK_GEMV_CASE(4)
      BRISK_GEMV_CASE(5) BRISK_GEMV_CASE(6) BRISK_GEMV_CASE(7) BRISK_GEMV_CASE(8)
      default: break;
    }
#undef BRISK_GEMV_CASE
    return;
  }
#define BRISK_GEMV_CASE(N) \
  case N: launch_kernel(gemv_kernel<F, N>, grid, block, 0, s, parts, x, early); break;
  switch (nt) {
    BRISK_GEMV_CASE(1) BRISK_GEMV_CASE(2) BRISK_GEMV_CASE(3) BRISK_GEMV_CASE(4)
    BRISK_GEMV_CASE(5) BRISK_GEMV_CASE(6) BRISK_GEMV_CASE(7) BRISK_GEMV_CASE(8)
    default: break;
  }
#undef BRISK_GEMV_CASE
}

template <DevFormat F>
cudaError_t matmul_fmt(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s,
                       const Mat* res, const Mat* sum) {
  if (Unit<F>::kInt != (xq != nullptr)) return cudaErrorInvalidValue;
  early = early && !flags().no_cuda_prefetch;
  for (int64_t t0 = 0; t0 < a[0].x.rows; t0 += kMaxTok) {
    const int nt = int(a[0].x.rows - t0 < kMaxTok ? a[0].x.rows - t0 : kMaxTok);
    launch_gemv<F>(a, n_parts, xq, res, sum, t0, nt, early, s);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace brisk::cuda
