// The encoder ops of the CPU backend (layer_norm, unary GELU, im2col, attention_weights)
// against their scalar references, with the fast GELU's kill switch, and the Backend defaults
// that name an op a backend lacks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "backend/backend.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/cpu/encoder_ops.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ref.h"
#include "quant/format.h"
#include "paged_kv.h"
#include "scoped_env.h"

namespace brisk {
namespace {

std::vector<float> enc_randn(size_t n, uint32_t seed, float scale = 1.0f, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

float enc_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

Mat enc_mat(std::vector<float>& v, int64_t rows, int64_t cols) { return Mat{.data = v.data(), .rows = rows, .cols = cols}; }

TEST(EncoderOps, LayerNormMatchesReference) {
  for (int threads : {1, 3}) {
    auto be = make_cpu_backend(threads);
    for (int64_t cols : {1, 7, 48, 512, 1281}) {
      const int64_t rows = 37;
      std::vector<float> x = enc_randn(size_t(rows * cols), 1, 3.0f, 5.0f);  // large mean: the variance must be centred
      std::vector<float> w = enc_randn(size_t(cols), 2), b = enc_randn(size_t(cols), 3);
      std::vector<float> out(x.size()), ref(x.size());
      const LayerNormArgs a{.out = enc_mat(out, rows, cols), .x = enc_mat(x, rows, cols), .weight = w.data(), .bias = b.data(),
                            .eps = 1e-5f};
      be->layer_norm(a);
      LayerNormArgs r = a;
      r.out = enc_mat(ref, rows, cols);
      ref::layer_norm(r);
      EXPECT_LT(enc_max_diff(out, ref), 2e-5f) << "cols " << cols << " threads " << threads;
      // In place, no weight or bias: mean 0, variance 1.
      std::vector<float> y = x;
      be->layer_norm({.out = enc_mat(y, rows, cols), .x = enc_mat(y, rows, cols), .eps = 0.0f});
      if (cols > 1) {
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < cols; ++i) mean += y[size_t(i)];
        mean /= double(cols);
        for (int64_t i = 0; i < cols; ++i) var += (y[size_t(i)] - mean) * (y[size_t(i)] - mean);
        EXPECT_NEAR(mean, 0.0, 1e-5);
        EXPECT_NEAR(var / double(cols), 1.0, 1e-4);
      }
    }
  }
}

TEST(EncoderOps, GeluMatchesReferenceWithAndWithoutTheFastPath) {
  auto be = make_cpu_backend(2);
  const int64_t rows = 9, cols = 133;
  std::vector<float> x = enc_randn(size_t(rows * cols), 4, 3.0f);
  x[0] = 0.0f;
  x[1] = -12.0f;
  x[2] = 12.0f;
  x[3] = 1e-8f;
  for (UnaryOp op : {UnaryOp::gelu_erf, UnaryOp::gelu_tanh}) {
    std::vector<float> ref(x.size());
    ref::unary({.out = enc_mat(ref, rows, cols), .x = enc_mat(x, rows, cols), .op = op});
    for (const char* off : {"0", "1"}) {
      ScopedEnv env("BRISK_NO_FAST_GELU", off);
      std::vector<float> out(x.size());
      be->unary({.out = enc_mat(out, rows, cols), .x = enc_mat(x, rows, cols), .op = op});
      float worst = 0.0f;
      for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]) / std::max(1.0f, std::fabs(x[i])));
      EXPECT_LT(worst, 4e-7f) << "op " << int(op) << " BRISK_NO_FAST_GELU=" << off;
    }
    // The kernels themselves: the AVX-512 one only where the CPU has it.
    std::vector<float> plain(x.size());
    cpu::unary_rows({.out = enc_mat(plain, rows, cols), .x = enc_mat(x, rows, cols), .op = op}, 0, 1);
    EXPECT_LT(enc_max_diff(plain, ref), 2e-6f);
    if (op == UnaryOp::gelu_erf && cpu_features().avx512) {
      std::vector<float> fast(x.size());
      cpu::unary_rows_avx512({.out = enc_mat(fast, rows, cols), .x = enc_mat(x, rows, cols), .op = op}, 0, 1);
      EXPECT_LT(enc_max_diff(fast, ref), 3e-6f);
      EXPECT_EQ(fast[0], 0.0f);
      EXPECT_EQ(fast[1], -0.0f);
      EXPECT_EQ(fast[2], 12.0f);
    }
  }
}

TEST(EncoderOps, Im2colMatchesReferenceAndAConvolution) {
  auto be = make_cpu_backend(2);
  for (int32_t stride : {1, 2, 3}) {
    for (int32_t kernel : {1, 3, 4}) {
      const int32_t pad = kernel / 2, frames = 11, cols = 5, n_seq = 3;
      std::vector<float> x = enc_randn(size_t(n_seq * frames * cols), 5);
      const int64_t fo = cpu::im2col_frames_out(frames, kernel, stride, pad);
      std::vector<float> out(size_t(n_seq * fo * cols * kernel), -1.0f), ref(out.size(), -2.0f);
      const Im2colArgs a{.out = enc_mat(out, n_seq * fo, cols * kernel), .x = enc_mat(x, n_seq * frames, cols),
                         .frames_in = frames, .kernel = kernel, .stride = stride, .pad = pad};
      be->im2col(a);
      Im2colArgs r = a;
      r.out = enc_mat(ref, n_seq * fo, cols * kernel);
      ref::im2col(r);
      EXPECT_EQ(out, ref);
      // A convolution through the unfolded rows equals the direct sum.
      std::vector<float> w = enc_randn(size_t(2 * cols * kernel), 6);
      for (int32_t s = 0; s < n_seq; ++s)
        for (int64_t t = 0; t < fo; ++t)
          for (int o = 0; o < 2; ++o) {
            double direct = 0.0, unfolded = 0.0;
            for (int32_t c = 0; c < cols; ++c)
              for (int32_t k = 0; k < kernel; ++k) {
                const int64_t f = t * stride + k - pad;
                const float wv = w[size_t((o * cols + c) * kernel + k)];
                if (f >= 0 && f < frames) direct += wv * x[size_t((s * frames + f) * cols + c)];
                unfolded += wv * out[size_t((s * fo + t) * cols * kernel + c * kernel + k)];
              }
            EXPECT_NEAR(direct, unfolded, 1e-5);
          }
    }
  }
  std::vector<float> x(10), out(10);
  EXPECT_THROW(be->im2col({.out = enc_mat(out, 1, 10), .x = enc_mat(x, 2, 5), .frames_in = 2, .kernel = 3, .stride = 1, .pad = 0}),
               Error);  // kernel longer than the padded sequence
}

TEST(EncoderOps, AttentionWeightsMatchReferenceAndSumToOne) {
  auto be = make_cpu_backend(2);
  const int32_t n_head = 4, n_head_kv = 2, head_dim = 16, n_pos = 40, n_seq = 2;
  for (QuantType kt : {QuantType::F32, QuantType::F16}) {
    testing::HostKv kv = testing::make_host_kv(kt, n_head_kv * head_dim, n_pos, n_seq, 16, testing::KvLayout::scrambled);
    std::vector<float> row = enc_randn(size_t(n_head_kv * head_dim), 7);
    for (int32_t s = 0; s < n_seq; ++s)
      for (int32_t p = 0; p < n_pos; ++p) {
        row = enc_randn(row.size(), uint32_t(100 + s * n_pos + p));
        cpu::kv_write_f32(kv.kc, s, p, row.data());
      }
    const int64_t n_tok = 5;
    std::vector<float> q = enc_randn(size_t(n_tok * n_head * head_dim), 8);
    std::vector<int32_t> seq = {0, 1, 1, 0, 1}, pos = {39, 0, 17, 5, 39};
    for (int32_t head = 0; head < n_head; ++head) {
      std::vector<float> out(size_t(n_tok * n_pos), -1.0f), ref(out.size(), -2.0f);
      const AttentionWeightsArgs a{.out = enc_mat(out, n_tok, n_pos), .q = enc_mat(q, n_tok, n_head * head_dim), .k_cache = kv.kc,
                                   .seq = seq.data(), .pos = pos.data(), .head = head, .n_head = n_head,
                                   .n_head_kv = n_head_kv, .head_dim = head_dim, .scale = 0.25f};
      be->attention_weights(a);
      AttentionWeightsArgs r = a;
      r.out = enc_mat(ref, n_tok, n_pos);
      ref::attention_weights(r);
      EXPECT_LT(enc_max_diff(out, ref), 1e-6f);
      for (int64_t t = 0; t < n_tok; ++t) {
        double sum = 0.0;
        for (int32_t j = 0; j < n_pos; ++j) {
          sum += out[size_t(t * n_pos + j)];
          if (j > pos[size_t(t)]) {
            EXPECT_EQ(out[size_t(t * n_pos + j)], 0.0f);
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
}

TEST(EncoderOps, DenseAttentionMatchesReference) {
  auto be = make_cpu_backend(3);
  for (auto [n_head, n_head_kv, head_dim] : {std::tuple{4, 4, 64}, std::tuple{6, 2, 16}, std::tuple{3, 3, 48},
                                             std::tuple{2, 1, 20}}) {
    for (int32_t n_seq : {1, 2}) {
      const int64_t n = 37, rows = n * n_seq;
      std::vector<float> q = enc_randn(size_t(rows * n_head * head_dim), 11, 1.5f);
      std::vector<float> k = enc_randn(size_t(rows * n_head_kv * head_dim), 12, 1.5f);
      std::vector<float> v = enc_randn(size_t(rows * n_head_kv * head_dim), 13);
      std::vector<float> ref(q.size());
      AttentionDenseArgs a{.out = enc_mat(ref, rows, n_head * head_dim), .q = enc_mat(q, rows, n_head * head_dim),
                           .k = enc_mat(k, rows, n_head_kv * head_dim), .v = enc_mat(v, rows, n_head_kv * head_dim),
                           .n_seq = n_seq, .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim,
                           .scale = 1.0f / std::sqrt(float(head_dim))};
      ref::attention_dense(a);
      for (const char* off : {"0", "1"}) {
        ScopedEnv env("BRISK_NO_BLOCKED_ATTENTION", off);
        std::vector<float> out(q.size(), -7.0f);
        a.out = enc_mat(out, rows, n_head * head_dim);
        ASSERT_TRUE(be->attention_dense(a));
        EXPECT_LT(enc_max_diff(out, ref), 2e-5f) << n_head << "/" << n_head_kv << " x " << head_dim << ", " << n_seq
                                                 << " seq, BRISK_NO_BLOCKED_ATTENTION=" << off;
      }
    }
  }
}

// Packed sequences of different lengths (seq_start): each row attends to its own sequence only,
// so the packed result equals each sequence run alone; both kernels against the reference.
TEST(EncoderOps, PackedDenseAttentionEqualsEachSequenceAlone) {
  auto be = make_cpu_backend(3);
  for (auto [n_head, n_head_kv, head_dim] : {std::tuple{4, 2, 32}, std::tuple{3, 3, 20}}) {
    const std::vector<int32_t> lens = {1, 9, 17, 2, 40, 8, 3};
    std::vector<int32_t> start = {0};
    for (int32_t l : lens) start.push_back(start.back() + l);
    const int64_t rows = start.back(), qw = n_head * head_dim, kw = n_head_kv * head_dim;
    std::vector<float> q = enc_randn(size_t(rows * qw), 31, 1.5f), k = enc_randn(size_t(rows * kw), 32, 1.5f);
    std::vector<float> v = enc_randn(size_t(rows * kw), 33), ref(q.size());
    AttentionDenseArgs a{.out = enc_mat(ref, rows, qw), .q = enc_mat(q, rows, qw), .k = enc_mat(k, rows, kw),
                         .v = enc_mat(v, rows, kw), .n_seq = int32_t(lens.size()), .seq_start = start.data(),
                         .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim,
                         .scale = 1.0f / std::sqrt(float(head_dim))};
    ref::attention_dense(a);
    // The reference packed equals the reference of each sequence alone.
    for (size_t s = 0; s < lens.size(); ++s) {
      const int64_t b = start[s], n = lens[s];
      std::vector<float> alone(size_t(n * qw));
      AttentionDenseArgs one = a;
      one.seq_start = nullptr;
      one.n_seq = 1;
      one.q = Mat{.data = q.data() + b * qw, .rows = n, .cols = qw};
      one.k = Mat{.data = k.data() + b * kw, .rows = n, .cols = kw};
      one.v = Mat{.data = v.data() + b * kw, .rows = n, .cols = kw};
      one.out = enc_mat(alone, n, qw);
      ref::attention_dense(one);
      for (int64_t i = 0; i < n * qw; ++i) ASSERT_EQ(alone[size_t(i)], ref[size_t(b * qw + i)]) << "sequence " << s;
    }
    for (const char* off : {"0", "1"}) {
      ScopedEnv env("BRISK_NO_BLOCKED_ATTENTION", off);
      std::vector<float> out(q.size(), -7.0f);
      a.out = enc_mat(out, rows, qw);
      ASSERT_TRUE(be->attention_dense(a));
      EXPECT_LT(enc_max_diff(out, ref), 2e-5f) << n_head << "/" << n_head_kv << " x " << head_dim
                                               << ", BRISK_NO_BLOCKED_ATTENTION=" << off;
    }
    std::vector<int32_t> bad = start;
    bad[3] = bad[2];  // an empty sequence
    a.seq_start = bad.data();
    EXPECT_THROW(be->attention_dense(a), Error);
    // The CPU takes no q / k / v biases in the attention: the caller keeps them in the matmuls.
    a.seq_start = start.data();
    const std::vector<float> bias(size_t(qw), 0.5f);
    a.q_bias = a.k_bias = a.v_bias = bias.data();
    EXPECT_FALSE(be->attention_dense_bias(a));
    EXPECT_THROW(be->attention_dense(a), Error);
  }
}

// A symmetric local window (ModernBERT's local layers): row i of a sequence sees the keys j of
// its sequence with |i - j| <= window, checked against a brute-force masked softmax here; the
// reference and both CPU kernels agree on packed sequences shorter and longer than the window.
TEST(EncoderOps, WindowedDenseAttention) {
  auto be = make_cpu_backend(3);
  for (auto [n_head, n_head_kv, head_dim, window] : {std::tuple{4, 2, 32, 8}, std::tuple{3, 3, 16, 1},
                                                     std::tuple{2, 1, 20, 5}, std::tuple{2, 2, 16, 40}}) {
    const std::vector<int32_t> lens = {1, 9, 17, 2, 70, 8, 33};
    std::vector<int32_t> start = {0};
    for (int32_t l : lens) start.push_back(start.back() + l);
    const int64_t rows = start.back(), qw = n_head * head_dim, kw = n_head_kv * head_dim;
    std::vector<float> q = enc_randn(size_t(rows * qw), 41, 1.5f), k = enc_randn(size_t(rows * kw), 42, 1.5f);
    std::vector<float> v = enc_randn(size_t(rows * kw), 43), ref(q.size()), brute(q.size());
    AttentionDenseArgs a{.out = enc_mat(ref, rows, qw), .q = enc_mat(q, rows, qw), .k = enc_mat(k, rows, kw),
                         .v = enc_mat(v, rows, kw), .n_seq = int32_t(lens.size()), .seq_start = start.data(),
                         .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim,
                         .scale = 1.0f / std::sqrt(float(head_dim)), .window = window};
    ref::attention_dense(a);
    const int32_t group = n_head / n_head_kv;
    for (size_t s = 0; s < lens.size(); ++s)
      for (int64_t i = start[s]; i < start[s + 1]; ++i)
        for (int32_t h = 0; h < n_head; ++h) {
          std::vector<double> w(size_t(rows), 0.0);
          double mx = -INFINITY, sum = 0.0;
          for (int64_t j = start[s]; j < start[s + 1]; ++j) {
            if (std::abs(i - j) > window) continue;
            double d = 0.0;
            for (int32_t c = 0; c < head_dim; ++c) d += double(q[size_t(i * qw + h * head_dim + c)]) * k[size_t(j * kw + (h / group) * head_dim + c)];
            w[size_t(j)] = d * a.scale;
            mx = std::max(mx, w[size_t(j)]);
          }
          for (int64_t j = start[s]; j < start[s + 1]; ++j)
            if (std::abs(i - j) <= window) sum += (w[size_t(j)] = std::exp(w[size_t(j)] - mx));
          for (int32_t c = 0; c < head_dim; ++c) {
            double o = 0.0;
            for (int64_t j = start[s]; j < start[s + 1]; ++j)
              if (std::abs(i - j) <= window) o += w[size_t(j)] / sum * v[size_t(j * kw + (h / group) * head_dim + c)];
            brute[size_t(i * qw + h * head_dim + c)] = float(o);
          }
        }
    EXPECT_LT(enc_max_diff(ref, brute), 1e-6f) << "window " << window;
    for (const char* off : {"0", "1"}) {
      ScopedEnv env("BRISK_NO_BLOCKED_ATTENTION", off);
      std::vector<float> out(q.size(), -7.0f);
      a.out = enc_mat(out, rows, qw);
      ASSERT_TRUE(be->attention_dense(a));
      EXPECT_LT(enc_max_diff(out, ref), 2e-5f) << n_head << "/" << n_head_kv << " x " << head_dim << ", window "
                                               << window << ", BRISK_NO_BLOCKED_ATTENTION=" << off;
    }
  }
}

// GeGLU with the exact (erf) GELU, as ModernBERT's MLP: the CPU kernel against the reference.
TEST(EncoderOps, GatedGeluErfMatchesReference) {
  auto be = make_cpu_backend(2);
  const int64_t rows = 7, cols = 45;
  std::vector<float> g = enc_randn(size_t(rows * cols), 51, 2.0f), u = enc_randn(size_t(rows * cols), 52);
  std::vector<float> ref(g.size()), out(g.size());
  GatedActArgs a{.out = enc_mat(ref, rows, cols), .gate = enc_mat(g, rows, cols), .up = enc_mat(u, rows, cols),
                 .act = Activation::gelu_erf};
  ref::gated_act(a);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double x = g[size_t(i)];
    EXPECT_NEAR(ref[size_t(i)], 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))) * u[size_t(i)], 1e-5);
  }
  a.out = enc_mat(out, rows, cols);
  be->gated_act(a);
  EXPECT_LT(enc_max_diff(out, ref), 1e-5f);
}

TEST(EncoderOps, FloatGemmMatchesTheGemvPath) {
  auto be = make_cpu_backend(2);
  for (QuantType wt : {QuantType::F32, QuantType::F16, QuantType::BF16}) {
    for (auto [n_tok, n_out, n_in] : {std::tuple{9, 17, 240}, std::tuple{16, 32, 64}, std::tuple{37, 100, 1000},
                                      std::tuple{300, 64, 256}}) {
      std::vector<float> x = enc_randn(size_t(n_tok * n_in), 21), wf = enc_randn(size_t(n_out * n_in), 22, 0.1f);
      const size_t rb = quant_row_bytes(wt, uint64_t(n_in)).value();
      std::vector<uint8_t> w(rb * size_t(n_out));
      for (int64_t r = 0; r < n_out; ++r) cpu::row_from_f32(wt, wf.data() + r * n_in, w.data() + size_t(r) * rb, n_in);
      std::vector<float> bias = enc_randn(size_t(n_out), 23);
      const Weight wv{.type = wt, .n_in = n_in, .n_out = n_out, .row_bytes = rb, .data = w.data()};
      std::vector<float> fast(size_t(n_tok * n_out)), slow(fast.size()), ref(fast.size());
      {
        ScopedEnv env("BRISK_NO_FLOAT_GEMM", "0");
        be->matmul({.out = enc_mat(fast, n_tok, n_out), .x = enc_mat(x, n_tok, n_in), .w = wv, .bias = bias.data()});
      }
      {
        ScopedEnv env("BRISK_NO_FLOAT_GEMM", "1");
        be->matmul({.out = enc_mat(slow, n_tok, n_out), .x = enc_mat(x, n_tok, n_in), .w = wv, .bias = bias.data()});
      }
      ref::matmul({.out = enc_mat(ref, n_tok, n_out), .x = enc_mat(x, n_tok, n_in), .w = wv, .bias = bias.data()});
      const float tol = 2e-5f * std::sqrt(float(n_in));
      EXPECT_LT(enc_max_diff(fast, slow), tol) << quant_type_info(wt).name << " " << n_tok << "x" << n_out << "x" << n_in;
      EXPECT_LT(enc_max_diff(fast, ref), tol) << quant_type_info(wt).name << " " << n_tok << "x" << n_out << "x" << n_in;
    }
  }
}

// A backend that implements only what it must: the encoder ops keep their defaults.
class BareBackend final : public Backend {
 public:
  std::string name() const override { return "bare"; }
  int n_threads() const override { return 1; }
  void* alloc(size_t) override { return nullptr; }
  void free(void*) override {}
  void matmul(const MatmulArgs&) override {}
  void rms_norm(const RmsNormArgs&) override {}
  void rope(const RopeArgs&) override {}
  void kv_store(const KvStoreArgs&) override {}
  void attention(const AttentionArgs&) override {}
  void gated_act(const GatedActArgs&) override {}
  void add(const AddArgs&) override {}
  void embedding(const EmbeddingArgs&) override {}
  void get_rows(const GetRowsArgs&) override {}
  void moe(const MoeArgs&) override {}
  void softcap(const SoftcapArgs&) override {}
};

TEST(EncoderOps, MissingOpsSayWhichOpAndBackend) {
  BareBackend be;
  try {
    be.layer_norm({});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op layer_norm is not supported on the bare backend"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(be.unary({}), Error);
  EXPECT_THROW(be.im2col({}), Error);
  EXPECT_THROW(be.attention_weights({}), Error);
  EXPECT_FALSE(be.attention_dense({}));  // the caller falls back to kv_store + attention
}

}  // namespace
}  // namespace brisk
