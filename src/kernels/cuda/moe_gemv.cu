// Expert matmuls of the mixture-of-experts op on the GEMV units (gemv_units.cuh): one matmul per
// (token, slot) pair on the expert its id names (moe_gemv_kernel), the down projection with
// the weighted combine (moe_down_combine_kernel), and prefill's grouped runs of rows that share
// an expert (moe_items_kernel). Float experts whose rows the 16-byte units do not fit take one
// element per unit (FloatAnyUnit, 32 lanes a row; the kAny instances).
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/gemv_units.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

// Mixture-of-experts matmul: blockIdx.y is a (token, slot) pair, whose expert id (read on the
// device) selects the weight; blocks [0, bx1) take the first matrix, [bx1, ..) the second (the
// gate and up projections of the same input in one launch). kRowLanes lanes a row (8 / 16 /
// 32: as few as take the row's units in one pass, so short expert rows, e.g. 768 columns, do
// not leave most of a warp idle), each lane whole units, then a shuffle sum over the row's
// lanes; x the pair's row (or its token's).
struct MoeGemv {
  const uint8_t* const* w;
  const uint8_t* const* w2;  // the second matrix (nullptr: one)
  DevLayout L;
  int64_t n_out;
  unsigned bx1;              // blocks of the first matrix
  int n_expert;
  const int32_t* ids;
  int64_t pair0;
  int n_used;
  bool x_per_pair;
  XRef x;
  float* out;
  float* out2;
};

// x from its row `r` on (quantized rows with their scales, or float rows).
template <DevFormat F>
__device__ __forceinline__ XRef x_from_row(XRef x, int64_t r) {
  if (x.q) {
    const int64_t blk = act_block<F>();
    x.q += r * x.n_in;
    x.d += r * (x.n_in / blk);
  } else {
    x.f += r * x.x_stride;
  }
  return x;
}

// The unit of a format: kAny (float formats) one element per unit, for rows of any length
// (FloatAnyUnit), chosen by shape where the 16-byte units do not fit.
template <DevFormat F, bool kAny>
using MoeUnit = std::conditional_t<kAny, FloatAnyUnit<F>, Unit<F>>;

// Row r of pair `pair`'s expert in `table` (r < n_out, or a real row whose result is dropped),
// dotted with the pair's input: the sum over the row's kRowLanes lanes, in all of them; 0 for
// an expert id out of range. The whole warp calls it for one pair.
template <DevFormat F, int kRowLanes, bool kAny>
__device__ __forceinline__ float moe_pair_row(const MoeGemv& g, const uint8_t* const* table, int64_t pair, int64_t r,
                                              int sl) {
  using U = MoeUnit<F, kAny>;
  const int e = g.ids[pair];
  if (e < 0 || e >= g.n_expert) return 0.0f;  // warp-uniform
  const int64_t rr = r < g.n_out ? r : g.n_out - 1;
  const uint8_t* w = table[e];
  const RowRef row{.qs = w + size_t(rr) * g.L.qs_row, .sc = w + g.L.sc_offset + size_t(rr) * g.L.sc_row};
  const XRef x = x_from_row<F>(g.x, g.x_per_pair ? pair : pair / g.n_used);
  const int64_t n_units = U::count(x.n_in);
  constexpr int kB = U::kUnroll;
  float acc = 0.0f;
  for (int64_t base = 0; base < n_units; base += int64_t(kRowLanes) * kB) {
    typename U::Raw raw[kB] = {};
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int64_t u = base + kRowLanes * k + sl;
      if (u < n_units) U::load(row, u, raw[k]);
    }
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int64_t u0 = base + kRowLanes * k;
      if (u0 >= n_units) break;  // uniform
      const int64_t u = u0 + sl;
      const bool ok = u < n_units;
      if constexpr (U::kInt) {
        // Every lane: the K-quant dots shuffle within a block's 2 / 4 lanes, which a row's
        // lanes hold whole (n_units is a multiple of the units per block).
        const float v = U::dot(raw[k], x, 0, ok ? u : u0);
        if (ok) acc += v;
      } else {
        if (ok) acc += U::dot(raw[k], x, 0, u);
      }
    }
  }
  for (int o = kRowLanes / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  return acc;
}

template <DevFormat F, int kRowLanes, bool kAny>
__global__ void __launch_bounds__(128) moe_gemv_kernel(MoeGemv g) {
  static_assert(kRowLanes >= 4 && kRowLanes <= 32 && kRowLanes % 4 == 0, "rows of whole K-quant lane groups");
  constexpr int kRowsPerWarp = 32 / kRowLanes;
  const bool second = blockIdx.x >= g.bx1;
  const unsigned bx = second ? blockIdx.x - g.bx1 : blockIdx.x;
  const int lane = threadIdx.x & 31, sl = lane % kRowLanes;
  const int64_t r0 = (int64_t(bx) * (blockDim.x / 32) + threadIdx.x / 32) * kRowsPerWarp;
  BRISK_PDL_ENTER();
  if (r0 >= g.n_out) return;  // whole warps
  const int64_t pair = g.pair0 + blockIdx.y;
  const int64_t r = r0 + lane / kRowLanes;
  const float acc = moe_pair_row<F, kRowLanes, kAny>(g, second ? g.w2 : g.w, pair, r, sl);
  if (sl == 0 && r < g.n_out) (second ? g.out2 : g.out)[pair * g.n_out + r] = acc;
}

// The down projection of every slot of a token and their weighted sum in one launch:
// blockIdx.y is a token, blockIdx.x a group of kRowsPerWarp output rows; warp w computes those
// rows for slots w, w + warps, ... (each exactly as moe_gemv_kernel computes a pair's rows) into
// shared memory, then thread i < kRowsPerWarp sums row i over the slots in expert id order with
// their weights, as launch_moe_combine does: the same bits as the two launches.
template <DevFormat F, int kRowLanes, bool kAny>
__global__ void __launch_bounds__(512) moe_down_combine_kernel(MoeGemv g, const float* wts, float* out,
                                                                int64_t out_stride) {
  constexpr int kRowsPerWarp = 32 / kRowLanes;
  __shared__ float part[kMoeMaxUsed][kRowsPerWarp];
  __shared__ int32_t sid[kMoeMaxUsed];
  __shared__ int order[kMoeMaxUsed];
  const int lane = threadIdx.x & 31, sl = lane % kRowLanes, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t t = blockIdx.y, r0 = int64_t(blockIdx.x) * kRowsPerWarp, r = r0 + lane / kRowLanes;
  const int n_used = g.n_used;
  BRISK_PDL_ENTER();
  // The slots in expert id order (stable: equal ids keep slot order, as the insertion sort of
  // launch_moe_combine leaves them).
  if (threadIdx.x < n_used) sid[threadIdx.x] = g.ids[t * n_used + threadIdx.x];
  __syncthreads();
  if (threadIdx.x < n_used) {
    const int j = threadIdx.x, id = sid[j];
    int rank = 0;
    for (int k = 0; k < n_used; ++k) rank += sid[k] < id || (sid[k] == id && k < j);
    order[rank] = j;
  }
  for (int slot = warp; slot < n_used; slot += warps) {
    const float acc = moe_pair_row<F, kRowLanes, kAny>(g, g.w, t * n_used + slot, r, sl);
    if (sl == 0) part[slot][lane / kRowLanes] = acc;
  }
  __syncthreads();
  if (threadIdx.x < kRowsPerWarp && r0 + threadIdx.x < g.n_out) {
    float o = 0.0f;
    for (int j = 0; j < n_used; ++j) {
      const int slot = order[j];
      o = fmaf(wts[t * n_used + slot], part[slot][threadIdx.x], o);
    }
    out[t * out_stride + r0 + threadIdx.x] = o;
  }
}

// Expert matmuls of a prefill batch, grouped: x holds the pairs' rows sorted by expert, and
// each item (blockIdx.y) is up to kMoeItemRows consecutive rows that share one expert: {expert,
// first row, rows}. A warp loads each weight unit of its row once and dots it with every row of
// the item (as the multi-token GEMV reuses its loads); each row's sum is moe_pair_row's (the
// same units per lane, the same shuffle tree), so a pair gets the bits it gets in decode.
template <DevFormat F, int kRowLanes, bool kAny>
__global__ void __launch_bounds__(128) moe_items_kernel(MoeGemv g, const int32_t* items, const int32_t* n_items) {
  using U = MoeUnit<F, kAny>;
  constexpr int kNt = kMoeItemRows;
  constexpr int kRowsPerWarp = 32 / kRowLanes;
  const bool second = blockIdx.x >= g.bx1;
  const unsigned bx = second ? blockIdx.x - g.bx1 : blockIdx.x;
  const int lane = threadIdx.x & 31, sl = lane % kRowLanes;
  const int64_t r0 = (int64_t(bx) * (blockDim.x / 32) + threadIdx.x / 32) * kRowsPerWarp;
  BRISK_PDL_ENTER();
  if (r0 >= g.n_out || (n_items && int(blockIdx.y) >= *n_items)) return;  // whole warps
  const int32_t* it = items + 3 * int64_t(blockIdx.y);
  const int e = it[0], n = it[2];
  const int64_t first = it[1];
  if (e < 0 || e >= g.n_expert || n < 1 || n > kNt) return;  // not made by the backend
  const int64_t r = r0 + lane / kRowLanes;
  const int64_t rr = r < g.n_out ? r : g.n_out - 1;
  const uint8_t* w = (second ? g.w2 : g.w)[e];
  const RowRef row{.qs = w + size_t(rr) * g.L.qs_row, .sc = w + g.L.sc_offset + size_t(rr) * g.L.sc_row};
  const XRef x = x_from_row<F>(g.x, first);
  const int64_t n_units = U::count(x.n_in);
  constexpr int kB = U::kUnroll;
  float acc[kNt];
#pragma unroll
  for (int t = 0; t < kNt; ++t) acc[t] = 0.0f;
  for (int64_t base = 0; base < n_units; base += int64_t(kRowLanes) * kB) {
    typename U::Raw raw[kB] = {};
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int64_t u = base + kRowLanes * k + sl;
      if (u < n_units) U::load(row, u, raw[k]);
    }
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int64_t u0 = base + kRowLanes * k;
      if (u0 >= n_units) break;  // uniform
      const int64_t u = u0 + sl;
      const bool ok = u < n_units;
#pragma unroll
      for (int t = 0; t < kNt; ++t) {
        if (t >= n) break;  // uniform
        if constexpr (U::kInt) {
          const float v = U::dot(raw[k], x, t, ok ? u : u0);
          if (ok) acc[t] += v;
        } else {
          if (ok) acc[t] += U::dot(raw[k], x, t, u);
        }
      }
    }
  }
  float* out = second ? g.out2 : g.out;
#pragma unroll
  for (int t = 0; t < kNt; ++t) {
    if (t >= n) break;
    float v = acc[t];
    for (int o = kRowLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (sl == 0 && r < g.n_out) out[(first + t) * g.n_out + r] = v;
  }
}

// The kernels' view of a launch: blocks of kMoeWarps warps, kRowLanes lanes a row; bx1 blocks
// for the first matrix.
constexpr int kMoeWarps = 4;
template <DevFormat F, int kRowLanes>
MoeGemv moe_gemv_of(const MoeMatmulArgs& a) {
  constexpr int64_t kRowsPerBlock = int64_t(kMoeWarps) * (32 / kRowLanes);
  return MoeGemv{.w = reinterpret_cast<const uint8_t* const*>(a.w), .w2 = reinterpret_cast<const uint8_t* const*>(a.w2),
                 .L = dev_layout(F, a.n_in, a.n_out), .n_out = a.n_out,
                 .bx1 = unsigned((a.n_out + kRowsPerBlock - 1) / kRowsPerBlock), .n_expert = a.n_expert, .ids = a.ids,
                 .pair0 = 0, .n_used = a.n_used, .x_per_pair = a.x_per_pair,
                 .x = XRef{.q = a.xq.q, .d = a.xq.d, .f = a.x, .n_in = a.n_in, .x_stride = a.x_stride}, .out = a.out,
                 .out2 = a.out2};
}

template <DevFormat F, int kRowLanes, bool kAny = false>
cudaError_t moe_items_lanes(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, const int32_t* n_items_dev,
                            cudaStream_t s) {
  const MoeGemv g = moe_gemv_of<F, kRowLanes>(a);
  launch_kernel(moe_items_kernel<F, kRowLanes, kAny>, dim3(g.bx1 * (a.w2 ? 2u : 1u), unsigned(n_items)),
                dim3(32 * kMoeWarps), 0, s, g, items, n_items_dev);
  return cudaGetLastError();
}

template <DevFormat F, int kRowLanes, bool kAny = false>
cudaError_t moe_matmul_lanes(const MoeMatmulArgs& a, cudaStream_t s) {
  MoeGemv g = moe_gemv_of<F, kRowLanes>(a);
  const unsigned bx = g.bx1 * (a.w2 ? 2u : 1u);
  for (int64_t p0 = 0; p0 < a.n_pairs; p0 += 65535) {
    g.pair0 = p0;
    const unsigned by = unsigned(a.n_pairs - p0 < 65535 ? a.n_pairs - p0 : 65535);
    launch_kernel(moe_gemv_kernel<F, kRowLanes, kAny>, dim3(bx, by), dim3(32 * kMoeWarps), 0, s, g);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <DevFormat F, int kRowLanes, bool kAny = false>
cudaError_t moe_combine_lanes(const MoeMatmulArgs& a, const float* wts, const Mat& out, cudaStream_t s) {
  MoeGemv g = moe_gemv_of<F, kRowLanes>(a);
  g.x_per_pair = true;
  constexpr int kRowsPerWarp = 32 / kRowLanes;
  // A warp a slot up to 16 (8 routed experts and a shared one: 9 warps, not one warp taking two).
  const int warps = a.n_used < 16 ? a.n_used : 16;
  const dim3 grid(unsigned((a.n_out + kRowsPerWarp - 1) / kRowsPerWarp), unsigned(out.rows));
  launch_kernel(moe_down_combine_kernel<F, kRowLanes, kAny>, grid, dim3(32 * warps), 0, s, g, wts, out.data,
                out.row_stride());
  return cudaGetLastError();
}

template <DevFormat F>
constexpr bool kMoeFloat = F == DevFormat::f32 || F == DevFormat::f16 || F == DevFormat::bf16;

// Whether a float format's 16-byte units fit the launch: rows a multiple of the unit's elements,
// expert rows and activation rows 16-byte aligned (the experts' addresses are their uploads',
// cudaMalloc'd). Otherwise the kAny kernels (one element per unit, 32 lanes a row) run.
template <DevFormat F>
bool moe_units_fit(const MoeMatmulArgs& a) {
  return !kMoeFloat<F> || (a.n_in % unit_elems<F>() == 0 && dev_layout(F, a.n_in, 1).qs_row % 16 == 0 &&
                           reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.x_stride % 4 == 0);
}

// Lanes a row: halved (down to 8) while half as many still take the row's units in one pass.
template <DevFormat F>
int moe_row_lanes(const MoeMatmulArgs& a) {
  if (a.row_lanes != 0) return a.row_lanes;
  const int64_t n_units = a.n_in / unit_elems<F>();
  int lanes = 32;
  while (lanes > 8 && int64_t(lanes / 2) * Unit<F>::kUnroll >= n_units) lanes /= 2;
  return lanes;
}

template <DevFormat F>
cudaError_t moe_combine_fmt(const MoeMatmulArgs& a, const float* wts, const Mat& out, cudaStream_t s) {
  if (Unit<F>::kInt != (a.xq.q != nullptr)) return cudaErrorInvalidValue;
  if constexpr (kMoeFloat<F>)
    if (!moe_units_fit<F>(a)) return moe_combine_lanes<F, 32, true>(a, wts, out, s);
  switch (moe_row_lanes<F>(a)) {
    case 8: return moe_combine_lanes<F, 8>(a, wts, out, s);
    case 16: return moe_combine_lanes<F, 16>(a, wts, out, s);
    case 32: return moe_combine_lanes<F, 32>(a, wts, out, s);
    default: return cudaErrorInvalidValue;
  }
}

template <DevFormat F>
cudaError_t moe_items_fmt(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, const int32_t* n_items_dev,
                          cudaStream_t s) {
  if (Unit<F>::kInt != (a.xq.q != nullptr) || (a.w2 && !a.out2)) return cudaErrorInvalidValue;
  if constexpr (kMoeFloat<F>)
    if (!moe_units_fit<F>(a)) return moe_items_lanes<F, 32, true>(a, items, n_items, n_items_dev, s);
  switch (moe_row_lanes<F>(a)) {
    case 8: return moe_items_lanes<F, 8>(a, items, n_items, n_items_dev, s);
    case 16: return moe_items_lanes<F, 16>(a, items, n_items, n_items_dev, s);
    case 32: return moe_items_lanes<F, 32>(a, items, n_items, n_items_dev, s);
    default: return cudaErrorInvalidValue;
  }
}

template <DevFormat F>
cudaError_t moe_matmul_fmt(const MoeMatmulArgs& a, cudaStream_t s) {
  if (Unit<F>::kInt != (a.xq.q != nullptr) || (a.w2 && !a.out2)) return cudaErrorInvalidValue;
  if constexpr (kMoeFloat<F>)
    if (!moe_units_fit<F>(a)) return moe_matmul_lanes<F, 32, true>(a, s);
  switch (moe_row_lanes<F>(a)) {
    case 8: return moe_matmul_lanes<F, 8>(a, s);
    case 16: return moe_matmul_lanes<F, 16>(a, s);
    case 32: return moe_matmul_lanes<F, 32>(a, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_moe_matmul(const MoeMatmulArgs& a, cudaStream_t s) {
  if (a.n_expert < 1 || a.n_used < 1 || a.n_in <= 0 || a.n_out <= 0 || !a.w || !a.ids || !a.out) return cudaErrorInvalidValue;
  if (a.n_pairs == 0) return cudaSuccess;
  if (!a.xq.q && !a.x) return cudaErrorInvalidValue;
  BRISK_FMT_DISPATCH(moe_matmul_fmt, a.type, a, s)
}

cudaError_t launch_moe_matmul_combine(const MoeMatmulArgs& a, const float* w, const Mat& out, cudaStream_t s) {
  if (a.n_expert < 1 || a.n_used < 1 || a.n_used > kMoeMaxUsed || a.n_in <= 0 || a.n_out <= 0 || !a.w || !a.ids ||
      !w || a.w2 || out.rows > 65535 || out.cols != a.n_out || a.n_pairs != out.rows * a.n_used)
    return cudaErrorInvalidValue;
  if (out.rows == 0) return cudaSuccess;
  if (!a.xq.q && !a.x) return cudaErrorInvalidValue;
  BRISK_FMT_DISPATCH(moe_combine_fmt, a.type, a, w, out, s)
}

cudaError_t launch_moe_items(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, cudaStream_t s,
                             const int32_t* n_items_dev) {
  if (a.n_expert < 1 || a.n_in <= 0 || a.n_out <= 0 || !a.w || !a.out || !items || n_items < 0 || n_items > 65535)
    return cudaErrorInvalidValue;
  if (n_items == 0) return cudaSuccess;
  if (!a.xq.q && !a.x) return cudaErrorInvalidValue;
  BRISK_FMT_DISPATCH(moe_items_fmt, a.type, a, items, n_items, n_items_dev, s)
}

}  // namespace brisk::cuda
