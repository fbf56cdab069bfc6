// Kernels of the linear-attention (Gated DeltaNet) layers: the causal depthwise conv with its
// rolling window, L2 norm, the SiLU-gated RMS norm, x * sigmoid(gate), and the gated delta rule.
//
// Every op works on runs: the tokens of one sequence, in batch order (SeqRuns, built once per op
// from the step's sequence ids by a counting sort). Sequences are independent, so the parallel
// items are (run, channel block) for the conv and (run, value head) for the delta rule.
//
// Gated delta rule. Per value head the state S [k_dim, v_dim] (row i: v_dim floats) evolves per
// token t as S := exp(g_t) S + k_t (b_t (v_t - exp(g_t) S^T k_t))^T and o_t = S^T q_t.
//  - One token (decode): two passes over S, each row decayed and read for S^T k in the first,
//    updated and read for S^T q in the second; inner loops over v_dim vectorize.
//  - Runs of several tokens (prefill) go in chunks of C = 64 tokens (the WY / UT form of the
//    DeltaNet papers): with gc the cumulative log decay inside the chunk, D[i][j] = exp(gc_i -
//    gc_j) (j <= i) and A[i][j] = b_i (k_i . k_j) D[i][j] (j < i), T = (I + A)^-1 (unit lower
//    triangular, by forward substitution over C rows), then matrix products only:
//      U = T (b v),  W = T (b exp(gc) k),  V' = U - W S
//      O = exp(gc) q S + (q k^T ⊙ D) V'
//      S := exp(gc_last) S + (exp(gc_last - gc) k)^T V'
//    which costs about as many multiply-adds per token as the recurrent form but as products of
//    [C, k_dim] x [k_dim, v_dim] blocks that stay in L1/L2 instead of streaming S per token.
//    Decays are <= 1 wherever they multiply (g <= 0), so nothing overflows. BRISK_NO_CHUNKED_DELTA
//    runs every token through the recurrent step instead (other summation order).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace brisk::cpu {

namespace {

constexpr int64_t kChunk = 64;

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// [begin, end) of n items for part ith of nth (the ops' items are few and coarse).
void item_range(int64_t n, int ith, int nth, int64_t* b, int64_t* e) { split_range(n, ith, nth, b, e); }

}  // namespace

void seq_runs_build(const int32_t* seq, int64_t n_tok, int32_t n_slots, SeqRuns& runs) {
  runs.count.assign(size_t(n_slots) + 1, 0);
  for (int64_t t = 0; t < n_tok; ++t) {
    BRISK_CHECK(seq[t] >= 0 && seq[t] < n_slots, "recurrent state: token ", t, " names sequence ", seq[t],
                ", the state holds ", n_slots);
    ++runs.count[size_t(seq[t]) + 1];
  }
  runs.seq.clear();
  runs.offset.assign(1, 0);
  for (int32_t s = 0; s < n_slots; ++s) {
    if (runs.count[size_t(s) + 1] == 0) continue;
    runs.seq.push_back(s);
    runs.offset.push_back(runs.offset.back() + runs.count[size_t(s) + 1]);
  }
  // Start of each sequence's tokens, then a stable fill in batch order.
  for (int32_t s = 0; s < n_slots; ++s) runs.count[size_t(s) + 1] += runs.count[size_t(s)];
  runs.tokens.resize(size_t(n_tok));
  for (int64_t t = 0; t < n_tok; ++t) runs.tokens[size_t(runs.count[size_t(seq[t])]++)] = int32_t(t);
}

void conv_state_rows(const ConvStateArgs& a, const SeqRuns& runs, int ith, int nth) {
  const int64_t C = a.x.cols, K = a.kernel;
  constexpr int64_t kBlock = 64;
  const int64_t n_blocks = (C + kBlock - 1) / kBlock;
  int64_t begin, end;
  item_range(runs.n_runs() * n_blocks, ith, nth, &begin, &end);
  float wt[16 * kBlock];  // taps [K, block] (K <= 16, checked by the backend)
  for (int64_t item = begin; item < end; ++item) {
    const int64_t r = item / n_blocks, c0 = (item % n_blocks) * kBlock, nc = std::min(kBlock, C - c0);
    const int32_t* toks = runs.tokens.data() + runs.offset[size_t(r)];
    const int64_t n = runs.offset[size_t(r) + 1] - runs.offset[size_t(r)];
    float* state = a.state.slot(runs.seq[size_t(r)]);
    const bool fresh = a.pos[toks[0]] == 0;
    for (int64_t j = 0; j < K; ++j)
      for (int64_t c = 0; c < nc; ++c) wt[j * kBlock + c] = a.weight[(c0 + c) * K + j];
    // Input row of window index m (m < 0: the state's row K - 1 + m), nullptr for zeros.
    auto in_row = [&](int64_t m) -> const float* {
      if (m >= 0) return a.x.row(toks[m]) + c0;
      return fresh ? nullptr : state + (K - 1 + m) * C + c0;
    };
    for (int64_t i = 0; i < n; ++i) {
      float* o = a.out.row(toks[i]) + c0;
      for (int64_t c = 0; c < nc; ++c) o[c] = 0.0f;
      for (int64_t j = 0; j < K; ++j) {
        const float* x = in_row(i - (K - 1) + j);
        if (!x) continue;
        const float* w = wt + j * kBlock;
        for (int64_t c = 0; c < nc; ++c) o[c] += w[c] * x[c];
      }
      if (a.silu)
        for (int64_t c = 0; c < nc; ++c) o[c] = o[c] / (1.0f + std::exp(-o[c]));
    }
    // New window: the inputs of the last K - 1 positions (rows read before they are replaced:
    // row r takes window index n - (K - 1) + r, an old state row r + n > r when negative).
    for (int64_t rr = 0; rr < K - 1; ++rr) {
      const float* x = in_row(n - (K - 1) + rr);
      float* dst = state + rr * C + c0;
      if (x) std::memmove(dst, x, size_t(nc) * sizeof(float));
      else std::memset(dst, 0, size_t(nc) * sizeof(float));
    }
  }
}

void l2_norm_rows(const L2NormArgs& a, int ith, int nth) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  for_each_group(a.x, group, ith, nth, [&](int64_t r, int64_t c0) {
    const float* x = a.x.row(r) + c0;
    float* y = a.out.row(r) + c0;
    const float inv = float(1.0 / std::sqrt(sum_squares(x, group) + double(a.eps)));
    for (int64_t i = 0; i < group; ++i) y[i] = x[i] * inv;
  });
}

void gated_rms_norm_rows(const GatedRmsNormArgs& a, int ith, int nth) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  for_each_group(a.x, group, ith, nth, [&](int64_t r, int64_t c0) {
    const float* x = a.x.row(r) + c0;
    const float* z = a.z.row(r) + c0;
    float* y = a.out.row(r) + c0;
    const float inv = float(1.0 / std::sqrt(sum_squares(x, group) / double(group) + double(a.eps)));
    for (int64_t i = 0; i < group; ++i) y[i] = x[i] * inv * a.weight[i] * (z[i] / (1.0f + std::exp(-z[i])));
  });
}

void sigmoid_mul_rows(const SigmoidMulArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.x.rows, ith, nth, &begin, &end);
  const bool per_row = a.gate.cols == 1 && a.x.cols != 1;
  for (int64_t r = begin; r < end; ++r) {
    const float* x = a.x.row(r);
    const float* g = a.gate.row(r);
    float* y = a.out.row(r);
    if (per_row) {
      const float s = sigmoid(g[0]);
      for (int64_t i = 0; i < a.x.cols; ++i) y[i] = x[i] * s;
    } else {
      for (int64_t i = 0; i < a.x.cols; ++i) y[i] = x[i] / (1.0f + std::exp(-g[i]));
    }
  }
}

int64_t delta_rule_scratch_floats(const DeltaRuleArgs& a) {
  const int64_t dk = a.k_dim, dv = a.v_dim;
  // Q, K, W [C, dk]; V, U, O [C, dv]; T, QK [C, C]; g, b, gc [C]; kv [dv].
  return kChunk * (3 * dk + 3 * dv + 2 * kChunk + 3) + dv + 16;
}

namespace {

struct HeadRun {
  const DeltaRuleArgs* a;
  const int32_t* toks;  // the run's tokens
  int64_t n;
  int32_t h, kh;
  float* S;             // [dk, dv]
};

void token_gates(const DeltaRuleArgs& a, int64_t t, int32_t h, float* g, float* b) {
  *g = a.decay_rate[h] * softplus(a.alpha.row(t)[h] + a.dt_bias[h]);
  *b = sigmoid(a.beta.row(t)[h]);
}

// One token: S := exp(g) S; kv = S^T k; S += k (b (v - kv))^T; o = S^T (scale q).
void delta_step(const HeadRun& r, int64_t t, float* kv) {
  const DeltaRuleArgs& a = *r.a;
  const int64_t dk = a.k_dim, dv = a.v_dim;
  const float* q = a.q.row(t) + int64_t(r.kh) * dk;
  const float* k = a.k.row(t) + int64_t(r.kh) * dk;
  const float* v = a.v.row(t) + int64_t(r.h) * dv;
  float* o = a.out.row(t) + int64_t(r.h) * dv;
  float g, b;
  token_gates(a, t, r.h, &g, &b);
  const float decay = std::exp(g);
  for (int64_t j = 0; j < dv; ++j) kv[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = r.S + i * dv;
    const float ki = k[i];
    for (int64_t j = 0; j < dv; ++j) {
      row[j] *= decay;
      kv[j] += ki * row[j];
    }
  }
  for (int64_t j = 0; j < dv; ++j) {
    kv[j] = b * (v[j] - kv[j]);
    o[j] = 0.0f;
  }
  for (int64_t i = 0; i < dk; ++i) {
    float* row = r.S + i * dv;
    const float ki = k[i], qi = q[i] * a.scale;
    for (int64_t j = 0; j < dv; ++j) {
      row[j] += ki * kv[j];
      o[j] += qi * row[j];
    }
  }
}

// Tokens [i0, i0 + c) of the run as one chunk (c <= kChunk), see the file comment.
void delta_chunk(const HeadRun& r, int64_t i0, int64_t c, float* scratch) {
  const DeltaRuleArgs& a = *r.a;
  const int64_t dk = a.k_dim, dv = a.v_dim, C = kChunk;
  float* Q = scratch;       // [C, dk] scaled q
  float* K = Q + C * dk;    // [C, dk]
  float* W = K + C * dk;    // [C, dk]
  float* V = W + C * dk;    // [C, dv] b * v
  float* U = V + C * dv;    // [C, dv] U, then V'
  float* O = U + C * dv;    // [C, dv]
  float* T = O + C * dv;    // [C, C] A, then T
  float* QK = T + C * C;    // [C, C] (q k^T) ⊙ D
  float* g = QK + C * C;    // [C] log decay, then cumulative
  float* b = g + C;         // [C]
  float* eg = b + C;        // [C] exp(gc)
  for (int64_t i = 0; i < c; ++i) {
    const int64_t t = r.toks[i0 + i];
    const float* q = a.q.row(t) + int64_t(r.kh) * dk;
    const float* k = a.k.row(t) + int64_t(r.kh) * dk;
    const float* v = a.v.row(t) + int64_t(r.h) * dv;
    token_gates(a, t, r.h, &g[i], &b[i]);
    for (int64_t j = 0; j < dk; ++j) {
      Q[i * dk + j] = q[j] * a.scale;
      K[i * dk + j] = k[j];
    }
    for (int64_t j = 0; j < dv; ++j) V[i * dv + j] = b[i] * v[j];
  }
  double acc = 0.0;
  for (int64_t i = 0; i < c; ++i) {
    acc += double(g[i]);
    g[i] = float(acc);
    eg[i] = std::exp(g[i]);
  }
  // A (strictly lower, into T) and (q k^T) ⊙ D (lower with the diagonal).
  for (int64_t i = 0; i < c; ++i) {
    const float* ki = K + i * dk;
    const float* qi = Q + i * dk;
    for (int64_t j = 0; j <= i; ++j) {
      const float* kj = K + j * dk;
      float kk = 0.0f, qk = 0.0f;
      for (int64_t d = 0; d < dk; ++d) {
        kk += ki[d] * kj[d];
        qk += qi[d] * kj[d];
      }
      const float dec = std::exp(g[i] - g[j]);
      QK[i * C + j] = qk * dec;
      T[i * C + j] = b[i] * kk * dec;
    }
  }
  // T := (I + A)^-1 in place, row by row: T_i = e_i - sum_{m < i} A[i][m] T_m. Row i's A values
  // are read before they are replaced (column j < m is written only after m's term is added).
  float row[kChunk];
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t j = 0; j < i; ++j) row[j] = 0.0f;
    for (int64_t m = 0; m < i; ++m) {
      const float coef = -T[i * C + m];
      const float* tm = T + m * C;
      for (int64_t j = 0; j < m; ++j) row[j] += coef * tm[j];
      row[m] += coef;  // T[m][m] = 1
    }
    for (int64_t j = 0; j < i; ++j) T[i * C + j] = row[j];
    T[i * C + i] = 1.0f;
  }
  // U = T (b v) and W = T (b exp(gc) k).
  for (int64_t i = 0; i < c; ++i) {
    float* u = U + i * dv;
    float* w = W + i * dk;
    for (int64_t j = 0; j < dv; ++j) u[j] = 0.0f;
    for (int64_t j = 0; j < dk; ++j) w[j] = 0.0f;
    for (int64_t m = 0; m <= i; ++m) {
      const float tu = T[i * C + m];
      const float tw = tu * b[m] * eg[m];
      const float* vm = V + m * dv;
      const float* km = K + m * dk;
      for (int64_t j = 0; j < dv; ++j) u[j] += tu * vm[j];
      for (int64_t j = 0; j < dk; ++j) w[j] += tw * km[j];
    }
  }
  // V' = U - W S and O = exp(gc) q S (both read S before its update).
  for (int64_t i = 0; i < c; ++i) {
    float* u = U + i * dv;
    float* o = O + i * dv;
    for (int64_t j = 0; j < dv; ++j) o[j] = 0.0f;
    const float* w = W + i * dk;
    const float* q = Q + i * dk;
    for (int64_t d = 0; d < dk; ++d) {
      const float* s = r.S + d * dv;
      const float wd = w[d], qd = q[d] * eg[i];
      for (int64_t j = 0; j < dv; ++j) {
        u[j] -= wd * s[j];
        o[j] += qd * s[j];
      }
    }
  }
  // O += (q k^T ⊙ D) V', written to the output rows.
  for (int64_t i = 0; i < c; ++i) {
    float* o = O + i * dv;
    for (int64_t j = 0; j <= i; ++j) {
      const float w = QK[i * C + j];
      const float* u = U + j * dv;
      for (int64_t x = 0; x < dv; ++x) o[x] += w * u[x];
    }
    std::memcpy(a.out.row(r.toks[i0 + i]) + int64_t(r.h) * dv, o, size_t(dv) * sizeof(float));
  }
  // S := exp(gc_last) S + (exp(gc_last - gc) k)^T V'.
  const float last = g[c - 1], decay = eg[c - 1];
  for (int64_t i = 0; i < c; ++i) b[i] = std::exp(last - g[i]);  // b is free: the key weights
  for (int64_t d = 0; d < dk; ++d) {
    float* s = r.S + d * dv;
    for (int64_t j = 0; j < dv; ++j) s[j] *= decay;
    for (int64_t i = 0; i < c; ++i) {
      const float w = b[i] * K[i * dk + d];
      const float* u = U + i * dv;
      for (int64_t j = 0; j < dv; ++j) s[j] += w * u[j];
    }
  }
}

}  // namespace

void delta_rule_rows(const DeltaRuleArgs& a, const SeqRuns& runs, float* scratch, bool chunked, int ith, int nth) {
  const int64_t n_items = runs.n_runs() * a.n_v_head;
  const int32_t group = a.n_v_head / a.n_k_head;
  const int64_t per_head = int64_t(a.k_dim) * a.v_dim;
  int64_t begin, end;
  item_range(n_items, ith, nth, &begin, &end);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t ri = item / a.n_v_head;
    const int32_t h = int32_t(item % a.n_v_head);
    HeadRun r{.a = &a,
              .toks = runs.tokens.data() + runs.offset[size_t(ri)],
              .n = runs.offset[size_t(ri) + 1] - runs.offset[size_t(ri)],
              .h = h,
              .kh = a.kv_tiled ? h % a.n_k_head : h / group,
              .S = a.state.slot(runs.seq[size_t(ri)]) + int64_t(h) * per_head};
    if (a.pos[r.toks[0]] == 0) std::memset(r.S, 0, size_t(per_head) * sizeof(float));
    if (!chunked || r.n == 1) {
      for (int64_t i = 0; i < r.n; ++i) delta_step(r, r.toks[i], scratch);
      continue;
    }
    for (int64_t i0 = 0; i0 < r.n; i0 += kChunk) delta_chunk(r, i0, std::min(kChunk, r.n - i0), scratch);
  }
}

}  // namespace brisk::cpu
