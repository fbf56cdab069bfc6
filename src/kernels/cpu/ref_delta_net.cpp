// Scalar references of the linear-attention ops. Tokens are taken one at a time in batch order,
// each against its own sequence's state slot (so interleaved sequences need no grouping), with
// sums in double: the conv shifts its window one row per token, the delta rule runs its
// recurrent form (the definition the chunked kernel is checked against).
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/ref.h"

namespace brisk::ref {

namespace {

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

}  // namespace

void conv_state(const ConvStateArgs& a) {
  const int64_t C = a.x.cols, K = a.kernel;
  std::vector<float> window(size_t(K * C));
  for (int64_t t = 0; t < a.x.rows; ++t) {
    float* state = a.state.slot(a.seq[t]);  // [K - 1, C]
    if (a.pos[t] == 0 && K > 1) std::memset(state, 0, size_t((K - 1) * C) * sizeof(float));
    if (K > 1) std::memcpy(window.data(), state, size_t((K - 1) * C) * sizeof(float));
    std::memcpy(window.data() + (K - 1) * C, a.x.row(t), size_t(C) * sizeof(float));
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0.0;
      for (int64_t j = 0; j < K; ++j) acc += double(a.weight[c * K + j]) * double(window[size_t(j * C + c)]);
      a.out.row(t)[c] = float(a.silu ? silu(acc) : acc);
    }
    if (K > 1) std::memcpy(state, window.data() + C, size_t((K - 1) * C) * sizeof(float));
  }
}

void l2_norm(const L2NormArgs& a) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  for (int64_t r = 0; r < a.x.rows; ++r)
    for (int64_t c0 = 0; c0 < a.x.cols; c0 += group) {
      double ss = 0.0;
      for (int64_t i = 0; i < group; ++i) ss += double(a.x.row(r)[c0 + i]) * double(a.x.row(r)[c0 + i]);
      const double inv = 1.0 / std::sqrt(ss + double(a.eps));
      for (int64_t i = 0; i < group; ++i) a.out.row(r)[c0 + i] = float(double(a.x.row(r)[c0 + i]) * inv);
    }
}

void gated_rms_norm(const GatedRmsNormArgs& a) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  for (int64_t r = 0; r < a.x.rows; ++r)
    for (int64_t c0 = 0; c0 < a.x.cols; c0 += group) {
      const float* x = a.x.row(r) + c0;
      double ss = 0.0;
      for (int64_t i = 0; i < group; ++i) ss += double(x[i]) * double(x[i]);
      const double inv = 1.0 / std::sqrt(ss / double(group) + double(a.eps));
      for (int64_t i = 0; i < group; ++i)
        a.out.row(r)[c0 + i] = float(double(x[i]) * inv * double(a.weight[i]) * silu(a.z.row(r)[c0 + i]));
    }
}

void sigmoid_mul(const SigmoidMulArgs& a) {
  for (int64_t r = 0; r < a.x.rows; ++r)
    for (int64_t i = 0; i < a.x.cols; ++i) {
      const double g = a.gate.cols == 1 ? a.gate.row(r)[0] : a.gate.row(r)[i];
      a.out.row(r)[i] = float(double(a.x.row(r)[i]) * sigmoid(g));
    }
}

void delta_rule(const DeltaRuleArgs& a) {
  const int64_t dk = a.k_dim, dv = a.v_dim;
  const int32_t group = a.n_v_head / a.n_k_head;
  std::vector<double> S(static_cast<size_t>(dk * dv));
  std::vector<double> kv(static_cast<size_t>(dv));
  for (int64_t t = 0; t < a.q.rows; ++t) {
    for (int32_t h = 0; h < a.n_v_head; ++h) {
      float* state = a.state.slot(a.seq[t]) + int64_t(h) * dk * dv;
      if (a.pos[t] == 0) std::memset(state, 0, size_t(dk * dv) * sizeof(float));
      for (size_t i = 0; i < S.size(); ++i) S[i] = state[i];
      const int32_t kh = a.kv_tiled ? h % a.n_k_head : h / group;
      const float* q = a.q.row(t) + int64_t(kh) * dk;
      const float* k = a.k.row(t) + int64_t(kh) * dk;
      const float* v = a.v.row(t) + int64_t(h) * dv;
      const double g = double(a.decay_rate[h]) * softplus(double(a.alpha.row(t)[h]) + double(a.dt_bias[h]));
      const double b = sigmoid(a.beta.row(t)[h]);
      const double decay = std::exp(g);
      for (double& s : S) s *= decay;
      for (int64_t j = 0; j < dv; ++j) {
        double m = 0.0;
        for (int64_t i = 0; i < dk; ++i) m += S[size_t(i * dv + j)] * double(k[i]);
        kv[size_t(j)] = b * (double(v[j]) - m);
      }
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) S[size_t(i * dv + j)] += double(k[i]) * kv[size_t(j)];
      for (int64_t j = 0; j < dv; ++j) {
        double o = 0.0;
        for (int64_t i = 0; i < dk; ++i) o += S[size_t(i * dv + j)] * double(q[i]) * double(a.scale);
        a.out.row(t)[int64_t(h) * dv + j] = float(o);
      }
      for (size_t i = 0; i < S.size(); ++i) state[i] = float(S[i]);
    }
  }
}

}  // namespace brisk::ref
