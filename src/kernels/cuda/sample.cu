// The host sampler's chain (runtime/sampler.cpp) on the device, one block of 1024 threads per
// logits row, so that a decode step copies back a token id instead of the logits:
//   1. working copy of the row; the edits in the host's order (logit biases added, then the
//      repetition / presence / frequency penalties of the tokens in the penalty window), by
//      one thread, so repeated bias entries round as on the host
//   2. NaN -> -inf; the row maximum; +inf logits (if any) become the only candidates; greedy
//      rows take the first index of the maximum
//   3. top-k: the k-th largest logit by a 4-pass radix select over order-preserving integer
//      keys (256-bin block histograms), then the k best with ties broken by the lower id (ties
//      at the threshold ranked in id order by a block scan over contiguous chunks)
//   4. bitonic sort of the <= 1024 candidates (logit descending, id ascending); softmax at
//      temperature 1 (double sum) for top-p (the smallest best prefix reaching the mass) and
//      min-p (p >= min_p * p_max), both prefixes of that order
//   5. the kept set sorted by id, weights exp((l - top) / T), and the draw: the first id whose
//      running sum (double, in id order) exceeds u * total, with u the host sampler's draw.
// Sums run in a different association than on the host (tree instead of sequential), so a
// draw may differ from the host's only when u * total falls within rounding of a boundary.
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sample.h"

namespace brisk::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
static_assert(kDeviceSampleMaxTopK == kThreads, "one candidate per thread");

__device__ inline uint32_t order_key(float v) {
  const uint32_t b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Block-wide reductions (every thread gets the result). `red` holds kWarps values.
template <class T, class Op>
__device__ T block_reduce(T v, T* red, Op op) {
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  T r = red[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, red[w]);
  return r;
}

// Exclusive prefix sum of v over the block's threads; *total gets the sum.
__device__ int block_exclusive_scan(int v, int* red, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  int inc = v;
  for (int o = 1; o < 32; o *= 2) {
    const int n = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += n;
  }
  __syncthreads();
  if (lane == 31) red[warp] = inc;
  __syncthreads();
  int before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += red[w];
    all += red[w];
  }
  *total = all;
  return before + inc - v;
}

// Sorts (key[i], id[i]), i < kThreads, in place: by_id ? id ascending : key descending then id
// ascending. Unused slots hold key -inf and id INT32_MAX (they sort last).
__device__ void bitonic_sort(float* key, int32_t* id, bool by_id) {
  const int i = threadIdx.x;
  for (int size = 2; size <= kThreads; size *= 2) {
    for (int stride = size / 2; stride > 0; stride /= 2) {
      __syncthreads();
      const int j = i ^ stride;
      if (j > i) {
        const bool ascending_block = (i & size) == 0;
        const float ka = key[i], kb = key[j];
        const int32_t ia = id[i], ib = id[j];
        // "a before b" in the final order
        const bool a_first = by_id ? ia < ib : (ka > kb || (ka == kb && ia < ib));
        if (a_first != ascending_block) {
          key[i] = kb;
          key[j] = ka;
          id[i] = ib;
          id[j] = ia;
        }
      }
    }
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* x, int64_t stride, int64_t n,
                                                          const DeviceSampleSpec* specs,
                                                          const DeviceSampleEdit* edits, float* work_all,
                                                          int32_t* ids) {
  BRISK_PDL_ENTER();
  __shared__ float red_f[kWarps];
  __shared__ int red_i[kWarps];
  __shared__ double red_d[kWarps];
  __shared__ int hist[256];
  __shared__ uint32_t sh_prefix;
  __shared__ int sh_need, sh_count, sh_keep;
  __shared__ float cand_l[kThreads];
  __shared__ int32_t cand_id[kThreads];
  __shared__ float cand_p[kThreads];

  const int tid = threadIdx.x;
  const DeviceSampleSpec sp = specs[blockIdx.x];
  const float* in = x + size_t(blockIdx.x) * size_t(stride);
  float* w = work_all + size_t(blockIdx.x) * size_t(n);
  int32_t* out = ids + blockIdx.x;

  // 1. working copy, then the edits in order
  for (int64_t i = tid; i < n; i += kThreads) w[i] = in[i];
  __syncthreads();
  if (tid == 0) {
    for (int32_t e = 0; e < sp.n_edits; ++e) {
      const DeviceSampleEdit ed = edits[sp.edit_offset + e];
      float l = w[ed.token];
      if (ed.count > 0) {
        l = l > 0.0f ? l / sp.repeat_penalty : l * sp.repeat_penalty;
        l -= float(ed.count) * sp.frequency_penalty + sp.presence_penalty;
      } else {
        l += ed.bias;
      }
      w[ed.token] = l;
    }
  }
  __syncthreads();

  // 2. NaN -> -inf, maximum, +inf, greedy
  float mx = -INFINITY;
  for (int64_t i = tid; i < n; i += kThreads) {
    float v = w[i];
    if (isnan(v)) w[i] = v = -INFINITY;
    mx = fmaxf(mx, v);
  }
  mx = block_reduce(mx, red_f, [](float a, float b) { return fmaxf(a, b); });
  if (mx == -INFINITY) {
    if (tid == 0) *out = -1;
    return;
  }
  if (mx == INFINITY) {
    for (int64_t i = tid; i < n; i += kThreads) w[i] = w[i] == INFINITY ? 0.0f : -INFINITY;
    mx = 0.0f;
    __syncthreads();
  }
  const bool greedy = !(sp.temperature > 0.0f) || !isfinite(1.0f / sp.temperature);
  if (greedy) {
    int first = INT32_MAX;
    for (int64_t i = tid; i < n && first == INT32_MAX; i += kThreads)
      if (w[i] == mx) first = int(i);
    first = block_reduce(first, red_i, [](int a, int b) { return a < b ? a : b; });
    if (tid == 0) *out = first;
    return;
  }

  // 3. top-k candidates
  int live = 0;
  for (int64_t i = tid; i < n; i += kThreads) live += w[i] != -INFINITY;
  live = block_reduce(live, red_i, [](int a, int b) { return a + b; });
  const int k = sp.top_k < live ? sp.top_k : live;
  if (tid == 0) sh_count = 0;
  cand_l[tid] = -INFINITY;
  cand_id[tid] = INT32_MAX;
  __syncthreads();
  if (k == live) {  // every token that is not banned
    for (int64_t i = tid; i < n; i += kThreads) {
      if (w[i] == -INFINITY) continue;
      const int slot = atomicAdd(&sh_count, 1);
      cand_l[slot] = w[i];
      cand_id[slot] = int32_t(i);
    }
  } else {
    uint32_t prefix = 0, mask = 0;
    int need = k;  // taken from the keys matching the prefix, best first
    for (int shift = 24; shift >= 0; shift -= 8) {
      if (tid < 256) hist[tid] = 0;
      __syncthreads();
      for (int64_t i = tid; i < n; i += kThreads) {
        const float v = w[i];
        if (v == -INFINITY) continue;
        const uint32_t key = order_key(v);
        if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
      }
      __syncthreads();
      if (tid == 0) {
        int above = 0;
        for (int b = 255; b >= 0; --b) {
          if (above + hist[b] >= need) {
            sh_prefix = prefix | (uint32_t(b) << shift);
            sh_need = need - above;
            break;
          }
          above += hist[b];
        }
      }
      __syncthreads();
      prefix = sh_prefix;
      need = sh_need;
      mask |= 0xFFu << shift;
    }
    // prefix is the k-th largest key; the keys above it are all taken, `need` of the ties
    // at it (the lowest ids) complete the k.
    for (int64_t i = tid; i < n; i += kThreads) {
      const float v = w[i];
      if (v == -INFINITY || order_key(v) <= prefix) continue;
      const int slot = atomicAdd(&sh_count, 1);
      cand_l[slot] = v;
      cand_id[slot] = int32_t(i);
    }
    const int64_t chunk = (n + kThreads - 1) / kThreads;
    const int64_t c0 = int64_t(tid) * chunk, c1 = c0 + chunk < n ? c0 + chunk : n;
    int ties = 0;
    for (int64_t i = c0; i < c1; ++i) ties += w[i] != -INFINITY && order_key(w[i]) == prefix;
    int total = 0;
    int rank = block_exclusive_scan(ties, red_i, &total);
    const int first_slot = k - need;
    for (int64_t i = c0; i < c1 && rank < need; ++i) {
      if (w[i] == -INFINITY || order_key(w[i]) != prefix) continue;
      cand_l[first_slot + rank] = w[i];
      cand_id[first_slot + rank] = int32_t(i);
      ++rank;
    }
  }
  __syncthreads();

  // 4. best-first order; top-p and min-p on softmax probabilities at temperature 1
  bitonic_sort(cand_l, cand_id, false);
  int keep = k;
  const bool use_top_p = sp.top_p < 1.0f, use_min_p = sp.min_p > 0.0f;
  if (use_top_p || use_min_p) {
    const float top = cand_l[0];
    const double e = tid < k ? exp(double(cand_l[tid] - top)) : 0.0;
    cand_p[tid] = float(e);
    const double part = tid < k ? double(cand_p[tid]) : 0.0;
    const double sum = block_reduce(part, red_d, [](double a, double b) { return a + b; });
    if (tid < k) cand_p[tid] = float(double(cand_p[tid]) / sum);
    __syncthreads();
    if (tid == 0) {
      int kept = k;
      if (use_top_p) {
        double cum = 0.0;
        for (int j = 0; j < k; ++j) {
          cum += cand_p[j];
          if (cum >= sp.top_p) {
            kept = j + 1;
            break;
          }
        }
      }
      if (use_min_p) {
        const float threshold = fminf(sp.min_p, 1.0f) * cand_p[0];
        int m = 0;
        while (m < kept && cand_p[m] >= threshold) ++m;
        kept = m;
      }
      sh_keep = kept;
    }
    __syncthreads();
    keep = sh_keep;
  }

  // 5. temperature and the draw over the kept set in id order
  const float top = cand_l[0];
  const float inv_t = 1.0f / sp.temperature;
  if (tid >= keep) {
    cand_l[tid] = -INFINITY;
    cand_id[tid] = INT32_MAX;
  }
  bitonic_sort(cand_l, cand_id, true);
  cand_p[tid] = tid < keep ? float(exp(double((cand_l[tid] - top) * inv_t))) : 0.0f;
  __syncthreads();
  if (tid == 0) {
    double total = 0.0;
    for (int j = 0; j < keep; ++j) total += cand_p[j];
    const double target = sp.u * total;
    double cum = 0.0;
    int32_t pick = -1;
    for (int j = 0; j < keep && pick < 0; ++j) {
      cum += cand_p[j];
      if (target < cum) pick = cand_id[j];
    }
    for (int j = keep - 1; j >= 0 && pick < 0; --j)  // rounding at the very top
      if (cand_p[j] > 0.0f) pick = cand_id[j];
    *out = pick >= 0 ? pick : cand_id[0];
  }
}

}  // namespace

cudaError_t launch_sample_rows(const Mat& x, const DeviceSampleSpec* specs, const DeviceSampleEdit* edits,
                               float* work, int32_t* ids, cudaStream_t stream) {
  if (x.rows == 0) return cudaSuccess;
  launch_kernel(sample_kernel, dim3(unsigned(x.rows)), dim3(kThreads), 0, stream, x.data, x.row_stride(), x.cols,
                specs, edits, work, ids);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
