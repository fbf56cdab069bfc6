#include "kernels/cpu/encoder_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/ops.h"

namespace brisk::cpu {

float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

void layer_norm_rows(const LayerNormArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.x.rows, ith, nth, &begin, &end);
  const int64_t n = a.x.cols;
  for (int64_t r = begin; r < end; ++r) {
    const float* x = a.x.row(r);
    float* o = a.out.row(r);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const double mean = sum / double(n);
    double var = 0.0;
    for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
    const float m = float(mean);
    const float inv = float(1.0 / std::sqrt(var / double(n) + double(a.eps)));
    for (int64_t i = 0; i < n; ++i) {
      float v = (x[i] - m) * inv;
      if (a.weight) v *= a.weight[i];
      if (a.bias) v += a.bias[i];
      o[i] = v;
    }
  }
}

void unary_rows(const UnaryArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.x.rows, ith, nth, &begin, &end);
  for (int64_t r = begin; r < end; ++r) {
    const float* x = a.x.row(r);
    float* o = a.out.row(r);
    if (a.op == UnaryOp::gelu_erf) {
      for (int64_t i = 0; i < a.x.cols; ++i) o[i] = gelu_erf(x[i]);
    } else if (a.op == UnaryOp::gelu_tanh) {
      for (int64_t i = 0; i < a.x.cols; ++i) o[i] = gelu_tanh(x[i]);
    } else {
      for (int64_t i = 0; i < a.x.cols; ++i) o[i] = std::tanh(x[i]);
    }
  }
}

int64_t im2col_frames_out(int64_t frames_in, int32_t kernel, int32_t stride, int32_t pad) {
  const int64_t span = frames_in + 2 * int64_t(pad) - kernel;
  return span < 0 || stride <= 0 ? 0 : span / stride + 1;
}

void im2col_rows(const Im2colArgs& a, int ith, int nth) {
  const int64_t frames_out = im2col_frames_out(a.frames_in, a.kernel, a.stride, a.pad);
  const int64_t cols = a.x.cols;
  int64_t begin, end;
  split_range(a.out.rows, ith, nth, &begin, &end);
  for (int64_t r = begin; r < end; ++r) {
    const int64_t s = r / frames_out, t = r % frames_out;
    float* o = a.out.row(r);
    for (int32_t k = 0; k < a.kernel; ++k) {
      const int64_t f = t * a.stride + k - a.pad;
      const float* x = f >= 0 && f < a.frames_in ? a.x.row(s * a.frames_in + f) : nullptr;
      for (int64_t c = 0; c < cols; ++c) o[c * a.kernel + k] = x ? x[c] : 0.0f;
    }
  }
}

void attention_weights_rows(const AttentionWeightsArgs& a, float* scratch, int ith, int nth) {
  int64_t begin, end;
  split_range(a.q.rows, ith, nth, &begin, &end);
  const int32_t group = a.n_head / a.n_head_kv;
  const int64_t col0 = int64_t(a.head / group) * a.head_dim;
  for (int64_t t = begin; t < end; ++t) {
    const float* q = a.q.row(t) + int64_t(a.head) * a.head_dim;
    float* o = a.out.row(t);
    const int32_t n = a.pos[t] + 1;
    float mx = -INFINITY;
    for (int32_t j = 0; j < n; ++j) {
      kv_read_f32(a.k_cache, a.seq[t], j, col0, a.head_dim, scratch);
      float s = 0.0f;
      for (int32_t d = 0; d < a.head_dim; ++d) s += q[d] * scratch[d];
      o[j] = s * a.scale;
      mx = std::max(mx, o[j]);
    }
    double sum = 0.0;
    for (int32_t j = 0; j < n; ++j) {
      o[j] = std::exp(o[j] - mx);
      sum += o[j];
    }
    const float inv = float(1.0 / sum);
    for (int32_t j = 0; j < n; ++j) o[j] *= inv;
    std::fill(o + n, o + a.out.cols, 0.0f);
  }
}

int64_t attention_dense_scratch_floats(const AttentionDenseArgs& a, bool avx512) {
  const int64_t n = a.n_seq >= 1 ? a.max_seq_len() : a.q.rows;
  const int64_t n_pad = (n + 15) / 16 * 16;
  return avx512 ? (int64_t(a.head_dim) + 8) * n_pad + 16 : n;
}

void attention_dense_rows(const AttentionDenseArgs& a, float* scratch, int ith, int nth) {
  const int64_t hd = a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  int64_t begin, end;
  split_range(a.q.rows * a.n_head, ith, nth, &begin, &end);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t r = item / a.n_head, h = item % a.n_head, s = a.seq_of(r);
    int64_t b, n;  // the keys: rows [b, b + n)
    a.key_range(r, a.seq_begin(s), a.seq_begin(s + 1), &b, &n);
    n -= b;
    const float* q = a.q.row(r) + h * hd;
    const int64_t kv_col = (h / group) * hd;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const float* k = a.k.row(b + j) + kv_col;
      float d = 0.0f;
      for (int64_t c = 0; c < hd; ++c) d += q[c] * k[c];
      scratch[j] = d * a.scale;
      mx = std::max(mx, scratch[j]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) sum += scratch[j] = std::exp(scratch[j] - mx);
    float* o = a.out.row(r) + h * hd;
    std::fill(o, o + hd, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float* v = a.v.row(b + j) + kv_col;
      const float p = scratch[j] / sum;
      for (int64_t c = 0; c < hd; ++c) o[c] += p * v[c];
    }
  }
}

}  // namespace brisk::cpu

namespace brisk::ref {

void attention_dense(const AttentionDenseArgs& a) {
  const int64_t hd = a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  std::vector<double> p, o(static_cast<size_t>(hd));
  for (int64_t r = 0; r < a.q.rows; ++r) {
    const int64_t s = a.seq_of(r);
    int64_t b, n;  // the keys: rows [b, b + n)
    a.key_range(r, a.seq_begin(s), a.seq_begin(s + 1), &b, &n);
    n -= b;
    p.assign(size_t(n), 0.0);
    for (int32_t h = 0; h < a.n_head; ++h) {
      const float* q = a.q.row(r) + int64_t(h) * hd;
      const int64_t col = int64_t(h / group) * hd;
      double mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        double d = 0.0;
        for (int64_t c = 0; c < hd; ++c) d += double(q[c]) * a.k.row(b + j)[col + c];
        p[size_t(j)] = d * a.scale;
        mx = std::max(mx, p[size_t(j)]);
      }
      double sum = 0.0;
      for (double& v : p) sum += (v = std::exp(v - mx));
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < hd; ++c) o[size_t(c)] += p[size_t(j)] / sum * a.v.row(b + j)[col + c];
      for (int64_t c = 0; c < hd; ++c) a.out.row(r)[int64_t(h) * hd + c] = float(o[size_t(c)]);
    }
  }
}

void layer_norm(const LayerNormArgs& a) {
  for (int64_t r = 0; r < a.x.rows; ++r) {
    const float* x = a.x.row(r);
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < a.x.cols; ++i) mean += x[i];
    mean /= double(a.x.cols);
    for (int64_t i = 0; i < a.x.cols; ++i) var += (x[i] - mean) * (x[i] - mean);
    var /= double(a.x.cols);
    std::vector<double> v(static_cast<size_t>(a.x.cols));
    for (int64_t i = 0; i < a.x.cols; ++i) {
      v[size_t(i)] = (x[i] - mean) / std::sqrt(var + double(a.eps)) * (a.weight ? a.weight[i] : 1.0) +
                     (a.bias ? a.bias[i] : 0.0);
    }
    float* o = a.out.row(r);
    for (int64_t i = 0; i < a.x.cols; ++i) o[i] = float(v[size_t(i)]);
  }
}

void unary(const UnaryArgs& a) {
  for (int64_t r = 0; r < a.x.rows; ++r) {
    const float* x = a.x.row(r);
    float* o = a.out.row(r);
    for (int64_t i = 0; i < a.x.cols; ++i) {
      const double v = x[i];
      o[i] = a.op == UnaryOp::gelu_erf    ? float(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))))
             : a.op == UnaryOp::gelu_tanh ? float(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))))
                                          : float(std::tanh(v));
    }
  }
}

void im2col(const Im2colArgs& a) {
  const int64_t frames_out = cpu::im2col_frames_out(a.frames_in, a.kernel, a.stride, a.pad);
  for (int64_t r = 0; r < a.out.rows; ++r) {
    const int64_t s = r / frames_out, t = r % frames_out;
    for (int64_t c = 0; c < a.x.cols; ++c)
      for (int32_t k = 0; k < a.kernel; ++k) {
        const int64_t f = t * a.stride + k - a.pad;
        a.out.row(r)[c * a.kernel + k] = f >= 0 && f < a.frames_in ? a.x.row(s * a.frames_in + f)[c] : 0.0f;
      }
  }
}

void attention_weights(const AttentionWeightsArgs& a) {
  const int32_t group = a.n_head / a.n_head_kv;
  std::vector<float> k(static_cast<size_t>(a.head_dim));
  for (int64_t t = 0; t < a.q.rows; ++t) {
    const float* q = a.q.row(t) + int64_t(a.head) * a.head_dim;
    const int32_t n = a.pos[t] + 1;
    std::vector<double> s(static_cast<size_t>(n));
    double mx = -INFINITY;
    for (int32_t j = 0; j < n; ++j) {
      cpu::kv_read_f32(a.k_cache, a.seq[t], j, int64_t(a.head / group) * a.head_dim, a.head_dim, k.data());
      double d = 0.0;
      for (int32_t i = 0; i < a.head_dim; ++i) d += double(q[i]) * k[size_t(i)];
      s[size_t(j)] = d * a.scale;
      mx = std::max(mx, s[size_t(j)]);
    }
    double sum = 0.0;
    for (double& v : s) sum += (v = std::exp(v - mx));
    float* o = a.out.row(t);
    for (int64_t j = 0; j < a.out.cols; ++j) o[j] = j < n ? float(s[size_t(j)] / sum) : 0.0f;
  }
}

}  // namespace brisk::ref
