#include "kernels/cpu/ref.h"

#include <cmath>
#include <limits>

#include "kernels/cpu/ops.h"
#include "quant/format.h"

namespace brisk::ref {

namespace {
std::vector<float> weight_row(const Weight& w, int64_t r) {
  std::vector<float> out(size_t(w.n_in));
  cpu::row_to_f32(w.type, w.row(r), out.data(), w.n_in);
  return out;
}
}  // namespace

void matmul(const MatmulArgs& a) {
  const QuantType vt = format_traits(a.w.type).vec_dot_type;
  const auto rb = quant_row_bytes(vt, uint64_t(a.w.n_in)).value();
  std::vector<uint8_t> q(rb);
  std::vector<float> x(size_t(a.w.n_in));
  for (int64_t t = 0; t < a.x.rows; ++t) {
    if (vt == QuantType::F32) {
      for (int64_t i = 0; i < a.w.n_in; ++i) x[size_t(i)] = a.x.row(t)[i];
    } else {
      cpu::row_from_f32(vt, a.x.row(t), q.data(), a.w.n_in);
      cpu::row_to_f32(vt, q.data(), x.data(), a.w.n_in);
    }
    for (int64_t r = 0; r < a.w.n_out; ++r) {
      const std::vector<float> w = weight_row(a.w, r);
      double acc = 0.0;
      for (int64_t i = 0; i < a.w.n_in; ++i) acc += double(w[size_t(i)]) * double(x[size_t(i)]);
      if (a.bias) acc += a.bias[r];
      a.out.row(t)[r] = float(acc);
    }
  }
}

void rms_norm(const RmsNormArgs& a) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  for (int64_t r = 0; r < a.x.rows; ++r) {
    for (int64_t c0 = 0; c0 < a.x.cols; c0 += group) {
      double ss = 0.0;
      for (int64_t i = 0; i < group; ++i) ss += double(a.x.row(r)[c0 + i]) * a.x.row(r)[c0 + i];
      const double inv = 1.0 / std::sqrt(ss / double(group) + a.eps);
      for (int64_t i = 0; i < group; ++i) {
        const double w = a.weight ? a.weight[i] : 1.0;
        a.out.row(r)[c0 + i] = float(a.x.row(r)[c0 + i] * inv * w);
      }
    }
  }
}

void rope(const RopeArgs& a) {
  const RopeTable& tab = *a.table;
  const int32_t half = tab.n_rot / 2;
  for (int64_t t = 0; t < a.x.rows; ++t) {
    for (int32_t h = 0; h < a.n_head; ++h) {
      float* x = a.x.row(t) + int64_t(h) * a.head_dim;
      std::vector<float> orig(x, x + a.head_dim);
      for (int32_t d = 0; d < tab.n_rot; ++d) {
        // Element d pairs with its partner p; i is the frequency index of the pair.
        int32_t i, p;
        bool first;
        if (tab.neox) {
          first = d < half;
          i = first ? d : d - half;
          p = first ? d + half : d - half;
        } else {
          first = d % 2 == 0;
          i = d / 2;
          p = first ? d + 1 : d - 1;
        }
        const double theta = double(a.pos[t]) * tab.inv_freq[size_t(i)];
        const double c = std::cos(theta) * tab.attn_factor, s = std::sin(theta) * tab.attn_factor;
        x[d] = float(first ? orig[size_t(d)] * c - orig[size_t(p)] * s
                           : orig[size_t(p)] * s + orig[size_t(d)] * c);
      }
    }
  }
}

void kv_store(const KvStoreArgs& a) {
  for (int64_t t = 0; t < a.k.rows; ++t) {
    cpu::kv_write_f32(a.k_cache, a.seq[t], a.pos[t], a.k.row(t));
    cpu::kv_write_f32(a.v_cache, a.seq[t], a.pos[t], a.v.row(t));
  }
}

void softmax(float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - m);
  for (int64_t i = 0; i < n; ++i) x[i] = float(std::exp(double(x[i]) - m) / sum);
}

void attention(const AttentionArgs& a) {
  const int32_t hd = a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  std::vector<float> krow(size_t(a.k_cache.width)), vrow(size_t(a.v_cache.width));
  for (int64_t t = 0; t < a.q.rows; ++t) {
    const int64_t s = a.seq[t], p = a.pos[t];
    for (int32_t h = 0; h < a.n_head; ++h) {
      const int32_t kvh = h / group;
      const float* q = a.q.row(t) + int64_t(h) * hd;
      // Positions before the window are masked and never read (a windowed cache may have
      // released their blocks).
      const int64_t first = a.key_begin(t);
      std::vector<float> scores(size_t(p + 1 - first));
      for (int64_t j = first; j <= p; ++j) {
        cpu::kv_read_f32(a.k_cache, s, j, 0, a.k_cache.width, krow.data());
        double dot = 0.0;
        for (int32_t i = 0; i < hd; ++i) dot += double(q[i]) * krow[size_t(kvh * hd + i)];
        double sc = dot * a.scale;
        if (a.softcap > 0.0f) sc = a.softcap * std::tanh(sc / a.softcap);
        scores[size_t(j - first)] = float(sc);
      }
      softmax(scores.data(), p + 1 - first);
      float* out = a.out.row(t) + int64_t(h) * hd;
      for (int32_t i = 0; i < hd; ++i) out[i] = 0.0f;
      for (int64_t j = first; j <= p; ++j) {
        cpu::kv_read_f32(a.v_cache, s, j, 0, a.v_cache.width, vrow.data());
        for (int32_t i = 0; i < hd; ++i) out[i] += scores[size_t(j - first)] * vrow[size_t(kvh * hd + i)];
      }
    }
  }
}

void gated_act(const GatedActArgs& a) {
  for (int64_t r = 0; r < a.gate.rows; ++r) {
    for (int64_t i = 0; i < a.gate.cols; ++i) {
      const double g = a.gate.row(r)[i];
      const double act = a.act == Activation::silu       ? g / (1.0 + std::exp(-g))
                         : a.act == Activation::gelu_erf ? 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0)))
                                                         : 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
      a.out.row(r)[i] = float(act * a.up.row(r)[i]);
    }
  }
}

void add(const AddArgs& a) {
  for (int64_t r = 0; r < a.a.rows; ++r)
    for (int64_t i = 0; i < a.a.cols; ++i) a.out.row(r)[i] = a.a.row(r)[i] + a.b.row(r)[i];
}

void embedding(const EmbeddingArgs& a) {
  for (int64_t t = 0; t < a.out.rows; ++t) {
    const std::vector<float> w = weight_row(a.table, a.ids[t]);
    for (int64_t i = 0; i < a.table.n_in; ++i) a.out.row(t)[i] = w[size_t(i)] * a.scale;
  }
}

}  // namespace brisk::ref
