// The gated delta rule (DeltaRuleArgs, core/op_args.h) on the GPU: per value head h of a token
// of sequence s, with the state S [k_dim, v_dim] of slot s (F32, device memory beside the KV
// cache), g = rate * softplus(alpha + dt_bias), b = sigmoid(beta):
//   S := exp(g) S;  S += k (b (v - S^T k))^T;  o = S^T (scale q)
//
// Recurrent form (decode, and every step of at most 64 tokens: the steps captured as graphs).
// Grid (token, value head, 32-column tile of v_dim), 256 threads. A block whose token is not its
// sequence's first in the batch exits; the first one runs the sequence's tokens in batch order.
// The tile S[:, j0 : j0 + 32] lives in registers for the whole run: lane j holds column j0 + j,
// warp w rows w, w + 8, ... (kRows = k_dim / 8 of them), so S is read once and written once per
// step, with 128-byte coalesced rows. Per token the two column sums (S^T k, S^T q) are a partial
// sum per thread over its rows, then the 8 warps' partials added in warp order through shared
// memory (deterministic). Sequences are found through the step's sequence ids on the device and
// a sequence's first token at position 0 starts from zeros, so no host decision depends on which
// slots a step names: a decode step stays one graph.
//
// Chunked form (prefill: steps of more than 64 tokens, which run launch by launch), chunks of 64
// tokens of one sequence as the CPU's delta_net_x86.inc computes them (the WY / UT transform):
// with gc the cumulative log decay in the chunk, D[i][j] = exp(gc_i - gc_j),
//   A[i][j] = b_i (k_i . k_j) D[i][j] (j < i),  T = (I + A)^-1,
//   U = T (b v),  W = T (b exp(gc) k),  V' = U - W S,
//   O = exp(gc) q S + (q k^T ⊙ D) V',  S := exp(gc_last) S + (exp(gc_last - gc) k)^T V'.
//   - delta_chunk_prep_kernel, grid (chunk, value head): everything that does not depend on S
//     (A, T by forward substitution over the chunk's rows, U, W, q k^T ⊙ D and gc), all chunks in
//     parallel, into a scratch of [n_v_head, n_tok, v_dim + k_dim + 64 + 1] floats.
//   - delta_chunk_state_kernel, grid (run, value head, 32-column tile): the chunks of one
//     sequence in order, the state tile [k_dim, 32] in shared memory; per chunk three products
//     (V' and exp(gc) q S sharing each S read, the masked (q k^T ⊙ D) V', the state update).
//     The chunk's W, q and k rows and q k^T ⊙ D are first copied to shared memory with
//     coalesced loads (kStaged, where they fit: k_dim <= 128 on sm_90), so the products' inner
//     loops read shared memory instead of a chain of dependent global loads; the same
//     operations in the same order either way (BRISK_NO_CUDA_DELTA_STAGE).
// The host gives the runs and chunks (DeltaChunkPlan) from the step's sequence ids, which a
// prefill step holds on the host anyway.
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

constexpr int kChunk = 64;
constexpr int kWarps = 8;
constexpr int kTile = 32;  // v columns per block

struct DeltaParams {
  float* out;
  int64_t out_stride;
  const float* q;
  int64_t q_stride;
  const float* k;
  int64_t k_stride;
  const float* v;
  int64_t v_stride;
  const float* alpha;
  int64_t alpha_stride;
  const float* beta;
  int64_t beta_stride;
  const float* rate;     // [n_v_head]
  const float* dt_bias;  // [n_v_head]
  float* state;          // [n_slots, n_v_head * k_dim * v_dim]
  int64_t slot_floats;
  const int32_t* seq;
  const int32_t* pos;
  int64_t n_tok;
  int n_k_head, n_v_head, k_dim, v_dim;
  bool kv_tiled;
  float scale;
};

__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ int key_head(const DeltaParams& p, int h) {
  return p.kv_tiled ? h % p.n_k_head : h / (p.n_v_head / p.n_k_head);
}

__device__ __forceinline__ void token_gates(const DeltaParams& p, int64_t t, int h, float* g, float* b) {
  *g = p.rate[h] * softplus_f(p.alpha[t * p.alpha_stride + h] + p.dt_bias[h]);
  *b = sigmoid_f(p.beta[t * p.beta_stride + h]);
}

template <int kRows>
__global__ void __launch_bounds__(kWarps * 32) delta_recurrent_kernel(DeltaParams p) {
  BRISK_PDL_ENTER();
  __shared__ float red_kv[kWarps][kTile];
  __shared__ float red_o[kWarps][kTile];
  const int64_t t0 = blockIdx.x;
  const int h = blockIdx.y;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int j = blockIdx.z * kTile + lane;
  const bool col = j < p.v_dim;
  const int32_t s = p.seq[t0];
  for (int64_t u = 0; u < t0; ++u)
    if (p.seq[u] == s) return;  // the sequence's first token runs it
  const int kh = key_head(p, h);
  const int64_t dk = p.k_dim, dv = p.v_dim;
  float* S = p.state + int64_t(s) * p.slot_floats + int64_t(h) * dk * dv;
  float st[kRows];
  const bool fresh = p.pos[t0] == 0;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = w + kWarps * r;
    st[r] = (!fresh && col && i < dk) ? S[int64_t(i) * dv + j] : 0.0f;
  }
  for (int64_t t = t0; t < p.n_tok; ++t) {
    if (p.seq[t] != s) continue;
    float g, b;
    token_gates(p, t, h, &g, &b);
    const float decay = expf(g);
    const float* kr = p.k + t * p.k_stride + int64_t(kh) * dk;
    const float* qr = p.q + t * p.q_stride + int64_t(kh) * dk;
    float kv = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = w + kWarps * r;
      st[r] *= decay;
      if (i < dk) kv += kr[i] * st[r];
    }
    red_kv[w][lane] = kv;
    __syncthreads();
    kv = 0.0f;
#pragma unroll
    for (int ww = 0; ww < kWarps; ++ww) kv += red_kv[ww][lane];
    const float vj = col ? p.v[t * p.v_stride + int64_t(h) * dv + j] : 0.0f;
    const float delta = b * (vj - kv);
    float o = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = w + kWarps * r;
      if (i < dk) {
        st[r] += kr[i] * delta;
        o += qr[i] * p.scale * st[r];
      }
    }
    red_o[w][lane] = o;
    __syncthreads();
    if (w == 0 && col) {
      o = 0.0f;
#pragma unroll
      for (int ww = 0; ww < kWarps; ++ww) o += red_o[ww][lane];
      p.out[t * p.out_stride + int64_t(h) * dv + j] = o;
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = w + kWarps * r;
    if (col && i < dk) S[int64_t(i) * dv + j] = st[r];
  }
}

struct ChunkParams {
  DeltaParams p;
  DeltaChunkPlan plan;
};

// Scratch planes, per value head and token row of the plan's order.
struct ChunkScratch {
  float* U;    // [n_v_head, n_tok, v_dim]
  float* W;    // [n_v_head, n_tok, k_dim]
  float* QKD;  // [n_v_head, n_tok, kChunk]
  float* G;    // [n_v_head, n_tok] cumulative log decay in the chunk
};

__device__ __forceinline__ ChunkScratch chunk_scratch(const DeltaParams& p, float* base) {
  const int64_t n = p.n_tok, nh = p.n_v_head;
  ChunkScratch c;
  c.U = base;
  c.W = c.U + nh * n * p.v_dim;
  c.QKD = c.W + nh * n * p.k_dim;
  c.G = c.QKD + nh * n * kChunk;
  return c;
}

// Shared memory: K, scaled Q [kChunk][k_dim + 1], T [kChunk][kChunk + 1], g / gc, b, exp(gc).
__global__ void __launch_bounds__(256) delta_chunk_prep_kernel(ChunkParams cp) {
  BRISK_PDL_ENTER();
  extern __shared__ float sm[];
  const DeltaParams& p = cp.p;
  const int64_t chunk = blockIdx.x;
  const int h = blockIdx.y;
  const int tid = threadIdx.x, nthr = blockDim.x;
  const int32_t r0 = cp.plan.chunks[chunk * 3], c = cp.plan.chunks[chunk * 3 + 1];
  const int dk = p.k_dim, ldk = dk + 1, ldt = kChunk + 1;
  const int kh = key_head(p, h);
  float* Ks = sm;
  float* Qs = Ks + kChunk * ldk;
  float* T = Qs + kChunk * ldk;
  float* gc = T + kChunk * ldt;
  float* bb = gc + kChunk;
  float* eg = bb + kChunk;
  const int32_t* toks = cp.plan.tokens + r0;
  for (int idx = tid; idx < c * dk; idx += nthr) {
    const int i = idx / dk, d = idx % dk;
    const int64_t t = toks[i];
    Ks[i * ldk + d] = p.k[t * p.k_stride + int64_t(kh) * dk + d];
    Qs[i * ldk + d] = p.q[t * p.q_stride + int64_t(kh) * dk + d] * p.scale;
  }
  if (tid < c) token_gates(p, toks[tid], h, &gc[tid], &bb[tid]);
  __syncthreads();
  if (tid == 0) {
    double acc = 0.0;  // as the CPU: cumulative sums in double
    for (int i = 0; i < c; ++i) {
      acc += double(gc[i]);
      gc[i] = float(acc);
    }
  }
  __syncthreads();
  if (tid < c) eg[tid] = expf(gc[tid]);
  const ChunkScratch cs = chunk_scratch(p, cp.plan.scratch);
  const int64_t row0 = int64_t(h) * p.n_tok + r0;
  // A (strictly lower, into T) and q k^T ⊙ D (with the diagonal, to the scratch).
  for (int idx = tid; idx < c * kChunk; idx += nthr) {
    const int i = idx / kChunk, jj = idx % kChunk;
    float qkd = 0.0f, a = 0.0f;
    if (jj <= i) {
      float kk = 0.0f, qk = 0.0f;
      for (int d = 0; d < dk; ++d) {
        const float kj = Ks[jj * ldk + d];
        kk += Ks[i * ldk + d] * kj;
        qk += Qs[i * ldk + d] * kj;
      }
      const float dec = expf(gc[i] - gc[jj]);
      qkd = qk * dec;
      if (jj < i) a = bb[i] * kk * dec;
    }
    cs.QKD[(row0 + i) * kChunk + jj] = qkd;
    T[i * ldt + jj] = a;
  }
  if (tid < c) cs.G[row0 + tid] = gc[tid];
  __syncthreads();
  // T := (I + A)^-1 by forward substitution, row after row: T[i][j] = -(A[i][j] + sum over
  // j < m < i of A[i][m] T[m][j]) for j < i, T[i][i] = 1 (row i's A read before it is replaced).
  for (int i = 1; i < c; ++i) {
    float val = 0.0f;
    if (tid < i) {
      val = T[i * ldt + tid];
      for (int m = tid + 1; m < i; ++m) val += T[i * ldt + m] * T[m * ldt + tid];
      val = -val;
    }
    __syncthreads();
    if (tid < i) T[i * ldt + tid] = val;
    __syncthreads();
  }
  if (tid < c) T[tid * ldt + tid] = 1.0f;
  __syncthreads();
  // U = T (b v) and W = T (b exp(gc) k).
  const int dv = p.v_dim;
  for (int idx = tid; idx < c * dv; idx += nthr) {
    const int i = idx / dv, jj = idx % dv;
    float u = 0.0f;
    for (int m = 0; m <= i; ++m) u += T[i * ldt + m] * (bb[m] * p.v[int64_t(toks[m]) * p.v_stride + int64_t(h) * dv + jj]);
    cs.U[(row0 + i) * dv + jj] = u;
  }
  for (int idx = tid; idx < c * dk; idx += nthr) {
    const int i = idx / dk, d = idx % dk;
    float wv = 0.0f;
    for (int m = 0; m <= i; ++m) wv += T[i * ldt + m] * (bb[m] * eg[m]) * Ks[m * ldk + d];
    cs.W[(row0 + i) * dk + d] = wv;
  }
}

// Shared memory: the state tile S [k_dim][kTile], V' [kChunk][kTile], exp(gc), key weights;
// staged: the chunk's W, q, k [kChunk][k_dim] and q k^T ⊙ D [kChunk][kChunk].
template <bool kStaged>
__global__ void __launch_bounds__(kWarps * 32) delta_chunk_state_kernel(ChunkParams cp) {
  BRISK_PDL_ENTER();
  extern __shared__ float sm[];
  const DeltaParams& p = cp.p;
  const int run = blockIdx.x, h = blockIdx.y;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int dk = p.k_dim, dv = p.v_dim;
  const int j = blockIdx.z * kTile + lane;
  const bool col = j < dv;
  const int kh = key_head(p, h);
  float* S = sm;                     // [dk][kTile]
  float* Vp = S + dk * kTile;        // [kChunk][kTile]
  float* eg = Vp + kChunk * kTile;   // [kChunk]
  float* kw = eg + kChunk;           // [kChunk]
  float* Ws = kw + kChunk;           // staged rows [kChunk][dk] each
  float* Qs = Ws + kChunk * dk;
  float* Ks = Qs + kChunk * dk;
  float* Ds = Ks + kChunk * dk;      // [kChunk][kChunk]
  const int32_t first_chunk = cp.plan.runs[run * 2], n_chunks = cp.plan.runs[run * 2 + 1];
  const int32_t first_tok = cp.plan.tokens[cp.plan.chunks[first_chunk * 3]];
  const int32_t s = p.seq[first_tok];
  float* Sg = p.state + int64_t(s) * p.slot_floats + int64_t(h) * dk * dv;
  const bool fresh = p.pos[first_tok] == 0;
  for (int i = w; i < dk; i += kWarps) S[i * kTile + lane] = (!fresh && col) ? Sg[int64_t(i) * dv + j] : 0.0f;
  const ChunkScratch cs = chunk_scratch(p, cp.plan.scratch);
  for (int ci = 0; ci < n_chunks; ++ci) {
    const int32_t* ch = cp.plan.chunks + int64_t(first_chunk + ci) * 3;
    const int32_t r0 = ch[0], c = ch[1];
    const int32_t* toks = cp.plan.tokens + r0;
    const int64_t row0 = int64_t(h) * p.n_tok + r0;
    const float last = cs.G[row0 + c - 1];
    if (threadIdx.x < c) {
      const float g = cs.G[row0 + threadIdx.x];
      eg[threadIdx.x] = expf(g);
      kw[threadIdx.x] = expf(last - g);
    }
    if constexpr (kStaged) {
      for (int idx = threadIdx.x; idx < c * dk; idx += kWarps * 32) {
        const int i = idx / dk, d = idx - i * dk;
        const int64_t t = toks[i];
        Ws[idx] = cs.W[(row0 + i) * dk + d];
        Qs[idx] = p.q[t * p.q_stride + int64_t(kh) * dk + d];
        Ks[idx] = p.k[t * p.k_stride + int64_t(kh) * dk + d];
      }
      for (int idx = threadIdx.x; idx < c * kChunk; idx += kWarps * 32) Ds[idx] = cs.QKD[row0 * kChunk + idx];
    }
    __syncthreads();
    // V' = U - W S and P = exp(gc) q S (both read S before its update); rows i = w + 8 r.
    float P[kChunk / kWarps];
#pragma unroll
    for (int r = 0; r < kChunk / kWarps; ++r) {
      const int i = w + kWarps * r;
      P[r] = 0.0f;
      if (i >= c) continue;
      const float* Wr = kStaged ? Ws + i * dk : cs.W + (row0 + i) * dk;
      const float* Qr = kStaged ? Qs + i * dk : p.q + int64_t(toks[i]) * p.q_stride + int64_t(kh) * dk;
      float u = col ? cs.U[(row0 + i) * dv + j] : 0.0f, o = 0.0f;
      for (int d = 0; d < dk; ++d) {
        const float sv = S[d * kTile + lane];
        u -= Wr[d] * sv;
        o += Qr[d] * sv;
      }
      Vp[i * kTile + lane] = u;
      P[r] = o * p.scale * eg[i];
    }
    __syncthreads();
    // O = P + (q k^T ⊙ D) V'.
#pragma unroll
    for (int r = 0; r < kChunk / kWarps; ++r) {
      const int i = w + kWarps * r;
      if (i >= c) continue;
      const float* qkd = kStaged ? Ds + i * kChunk : cs.QKD + (row0 + i) * kChunk;
      float o = P[r];
      for (int m = 0; m <= i; ++m) o += qkd[m] * Vp[m * kTile + lane];
      if (col) p.out[int64_t(toks[i]) * p.out_stride + int64_t(h) * dv + j] = o;
    }
    // S := exp(gc_last) S + (exp(gc_last - gc) k)^T V' (each thread its own entries).
    const float decay = eg[c - 1];
    for (int d = w; d < dk; d += kWarps) {
      float sv = S[d * kTile + lane] * decay;
      for (int i = 0; i < c; ++i) {
        const float kd = kStaged ? Ks[i * dk + d] : p.k[int64_t(toks[i]) * p.k_stride + int64_t(kh) * dk + d];
        sv += kw[i] * kd * Vp[i * kTile + lane];
      }
      S[d * kTile + lane] = sv;
    }
    __syncthreads();
  }
  if (col)
    for (int i = w; i < dk; i += kWarps) Sg[int64_t(i) * dv + j] = S[i * kTile + lane];
}

DeltaParams params_of(const DeltaRuleArgs& a) {
  return DeltaParams{.out = a.out.data, .out_stride = a.out.row_stride(), .q = a.q.data, .q_stride = a.q.row_stride(),
                     .k = a.k.data, .k_stride = a.k.row_stride(), .v = a.v.data, .v_stride = a.v.row_stride(),
                     .alpha = a.alpha.data, .alpha_stride = a.alpha.row_stride(), .beta = a.beta.data,
                     .beta_stride = a.beta.row_stride(), .rate = a.decay_rate, .dt_bias = a.dt_bias,
                     .state = a.state.data, .slot_floats = a.state.slot_floats, .seq = a.seq, .pos = a.pos,
                     .n_tok = a.q.rows, .n_k_head = a.n_k_head, .n_v_head = a.n_v_head, .k_dim = a.k_dim,
                     .v_dim = a.v_dim, .kv_tiled = a.kv_tiled, .scale = a.scale};
}

size_t prep_smem(int k_dim) { return sizeof(float) * (size_t(2 * kChunk) * size_t(k_dim + 1) + kChunk * (kChunk + 1) + 3 * kChunk); }
size_t state_smem(int k_dim, bool staged) {
  return sizeof(float) * (size_t(k_dim) * kTile + kChunk * kTile + 2 * kChunk +
                          (staged ? size_t(3 * kChunk) * size_t(k_dim) + kChunk * kChunk : 0));
}

}  // namespace

bool delta_rule_supported(const DeltaRuleArgs& a) { return a.k_dim >= 1 && a.k_dim <= kDeltaMaxKeyDim && a.v_dim >= 1; }

cudaError_t launch_delta_rule_recurrent(const DeltaRuleArgs& a, cudaStream_t stream) {
  if (a.q.rows == 0) return cudaSuccess;
  if (!delta_rule_supported(a) || a.q.rows > 65535 || a.n_v_head > 65535) return cudaErrorInvalidValue;
  const DeltaParams p = params_of(a);
  const dim3 grid(unsigned(a.q.rows), unsigned(a.n_v_head), unsigned((a.v_dim + kTile - 1) / kTile));
  const dim3 block(kWarps * 32);
  const int rows = (a.k_dim + kWarps - 1) / kWarps;
  if (rows <= 2) return launch_kernel(delta_recurrent_kernel<2>, grid, block, 0, stream, p);
  if (rows <= 4) return launch_kernel(delta_recurrent_kernel<4>, grid, block, 0, stream, p);
  if (rows <= 8) return launch_kernel(delta_recurrent_kernel<8>, grid, block, 0, stream, p);
  if (rows <= 16) return launch_kernel(delta_recurrent_kernel<16>, grid, block, 0, stream, p);
  return launch_kernel(delta_recurrent_kernel<32>, grid, block, 0, stream, p);
}

size_t delta_rule_chunk_scratch_floats(const DeltaRuleArgs& a) {
  return size_t(a.n_v_head) * size_t(a.q.rows) * size_t(a.v_dim + a.k_dim + kChunk + 1);
}

cudaError_t launch_delta_rule_chunked(const DeltaRuleArgs& a, const DeltaChunkPlan& plan, cudaStream_t stream) {
  if (a.q.rows == 0 || plan.n_runs == 0) return cudaSuccess;
  if (!delta_rule_supported(a) || a.n_v_head > 65535) return cudaErrorInvalidValue;
  const ChunkParams cp{.p = params_of(a), .plan = plan};
  int device = 0, smem_max = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e != cudaSuccess) return e;
  const bool staged = !flags().no_cuda_delta_stage && state_smem(a.k_dim, true) <= size_t(smem_max);
  const size_t s1 = prep_smem(a.k_dim), s2 = state_smem(a.k_dim, staged);
  auto* state_kernel = staged ? delta_chunk_state_kernel<true> : delta_chunk_state_kernel<false>;
  e = cudaFuncSetAttribute(delta_chunk_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(s1));
  if (e != cudaSuccess) return e;
  e = cudaFuncSetAttribute(state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(s2));
  if (e != cudaSuccess) return e;
  e = launch_kernel(delta_chunk_prep_kernel, dim3(unsigned(plan.n_chunks), unsigned(a.n_v_head)), dim3(256), s1,
                    stream, cp);
  if (e != cudaSuccess) return e;
  return launch_kernel(state_kernel,
                       dim3(unsigned(plan.n_runs), unsigned(a.n_v_head), unsigned((a.v_dim + kTile - 1) / kTile)),
                       dim3(kWarps * 32), s2, stream, cp);
}

}  // namespace brisk::cuda
