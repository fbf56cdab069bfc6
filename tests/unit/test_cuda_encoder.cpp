// The CUDA backend's encoder ops (layer_norm, unary GELU, im2col, attention_weights,
// attention_dense) against the scalar references on random inputs of several widths, with the
// dense attention's kill switch; and Whisper on the GPU: the shared random-weight fixture's
// logits against transformers and its greedy ids with and without CUDA graphs (decode steps
// replayed as the previous step's graph). Skips without a CUDA build or a GPU.
//
// Tolerances: the references sum in double, the kernels in float in other orders, so outputs
// agree to a few float roundings of sums of O(1) terms: 1e-5 absolute + relative for the
// element-wise ops and LayerNorm, 1e-4 for attention over up to 300 positions (an indexing or
// masking error is of the order of the values themselves).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "paged_kv.h"
#include "random_values.h"
#include "scoped_env.h"
#include "backend/backend.h"
#include "core/error.h"
#include "kernels/cpu/encoder_ops.h"
#include "kernels/cpu/ops.h"
#include "media/audio.h"
#include "media/log_mel.h"
#include "model_fixtures.h"
#include "runtime/engine_api.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_devices.h"
#include "runtime/engine_parts.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaEncoder, Ops) { GTEST_SKIP() << "CUDA backend not built"; }
#else

std::unique_ptr<Backend> encoder_gpu() {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) return nullptr;
  return make_cuda_backend(0);
}

#define REQUIRE_ENCODER_GPU(be) \
  auto be = encoder_gpu();      \
  if (!be) GTEST_SKIP() << "no CUDA device"

// Device buffers of host vectors, freed with the holder.
struct EncDevice {
  Backend& be;
  std::vector<void*> held;
  explicit EncDevice(Backend& b) : be(b) {}
  ~EncDevice() {
    for (void* p : held) be.free(p);
  }
  EncDevice(const EncDevice&) = delete;
  EncDevice& operator=(const EncDevice&) = delete;
  template <typename T>
  T* put(const std::vector<T>& h) {
    auto* d = static_cast<T*>(be.alloc(sizeof(T) * std::max<size_t>(h.size(), 1)));
    held.push_back(d);
    if (!h.empty()) be.copy(d, h.data(), sizeof(T) * h.size());
    return d;
  }
  Mat mat(const std::vector<float>& h, int64_t rows, int64_t cols) {
    return Mat{.data = put(h), .rows = rows, .cols = cols};
  }
  std::vector<float> get(const Mat& m) {
    std::vector<float> h(size_t(m.rows * m.row_stride()));
    be.copy(h.data(), m.data, sizeof(float) * h.size());
    return h;
  }
};

Mat enc_host(std::vector<float>& v, int64_t rows, int64_t cols) { return Mat{.data = v.data(), .rows = rows, .cols = cols}; }

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << what << " at " << i;
}

TEST(CudaEncoder, LayerNormAndGeluMatchReference) {
  REQUIRE_ENCODER_GPU(be);
  // Rows in registers (widths of a multiple of 4 up to 8192) and the three-pass kernel.
  for (const char* regs_off : {"0", "1"})
  for (int64_t cols : {1, 7, 12, 384, 1024, 1281, 2048, 4096, 8192, 8196}) {
    ScopedEnv regs("BRISK_NO_CUDA_ENCODER_NORM_REGS", regs_off);
    const int64_t rows = 19;
    const std::vector<float> x = test::gaussian(size_t(rows * cols), 1, 3.0f);
    std::vector<float> shifted = x;
    for (float& v : shifted) v += 5.0f;  // a large mean: the variance must be centred
    const std::vector<float> w = test::gaussian(size_t(cols), 2), b = test::gaussian(size_t(cols), 3);
    for (int affine = 0; affine < 2; ++affine) {
      EncDevice d(*be);
      const Mat dx = d.mat(shifted, rows, cols);
      const Mat out = d.mat(std::vector<float>(shifted.size()), rows, cols);
      be->layer_norm({.out = out, .x = dx, .weight = affine ? d.put(w) : nullptr, .bias = affine ? d.put(b) : nullptr,
                      .eps = 1e-5f});
      std::vector<float> hx = shifted, want(shifted.size());
      ref::layer_norm({.out = enc_host(want, rows, cols), .x = enc_host(hx, rows, cols),
                       .weight = affine ? w.data() : nullptr, .bias = affine ? b.data() : nullptr, .eps = 1e-5f});
      expect_near_all(d.get(out), want, 1e-5f, str_cat("layer_norm cols ", cols, " affine ", affine, " regs_off ", regs_off));
      // In place.
      be->layer_norm({.out = dx, .x = dx, .weight = affine ? d.put(w) : nullptr, .bias = affine ? d.put(b) : nullptr,
                      .eps = 1e-5f});
      expect_near_all(d.get(dx), want, 1e-5f, str_cat("layer_norm in place cols ", cols, " regs_off ", regs_off));
    }
    for (UnaryOp op : {UnaryOp::gelu_erf, UnaryOp::gelu_tanh}) {
      EncDevice d(*be);
      const Mat dx = d.mat(x, rows, cols);
      be->unary({.out = dx, .x = dx, .op = op});
      std::vector<float> hx = x, want(x.size());
      ref::unary({.out = enc_host(want, rows, cols), .x = enc_host(hx, rows, cols), .op = op});
      expect_near_all(d.get(dx), want, 1e-5f, str_cat("unary ", int(op), " cols ", cols));
    }
  }
}

TEST(CudaEncoder, Im2colMatchesReference) {
  REQUIRE_ENCODER_GPU(be);
  struct Case {
    int32_t n_seq, frames_in, cols, kernel, stride, pad;
  };
  for (const Case c : {Case{1, 20, 5, 3, 1, 1}, Case{3, 17, 4, 3, 2, 1}, Case{2, 9, 3, 5, 2, 0}, Case{1, 4, 2, 1, 1, 0}}) {
    const int64_t frames_out = cpu::im2col_frames_out(c.frames_in, c.kernel, c.stride, c.pad);
    const int64_t rows_in = int64_t(c.n_seq) * c.frames_in, rows_out = int64_t(c.n_seq) * frames_out;
    const int64_t width = int64_t(c.cols) * c.kernel;
    std::vector<float> x = test::gaussian(size_t(rows_in * c.cols), 4);
    EncDevice d(*be);
    const Mat out = d.mat(std::vector<float>(size_t(rows_out * width), 7.0f), rows_out, width);
    const Im2colArgs a{.out = out, .x = d.mat(x, rows_in, c.cols), .frames_in = c.frames_in, .kernel = c.kernel,
                       .stride = c.stride, .pad = c.pad};
    be->im2col(a);
    std::vector<float> want(size_t(rows_out * width));
    Im2colArgs h = a;
    h.out = enc_host(want, rows_out, width);
    h.x = enc_host(x, rows_in, c.cols);
    ref::im2col(h);
    EXPECT_EQ(d.get(out), want) << "n_seq " << c.n_seq << " kernel " << c.kernel << " stride " << c.stride;
  }
}

// Probabilities of one query head over a paged cache (scrambled blocks of 16, GQA, F16 / F32 /
// Q8_0 rows), rows padded with zeros past each token's position.
TEST(CudaEncoder, AttentionWeightsMatchReference) {
  REQUIRE_ENCODER_GPU(be);
  const int32_t n_head = 6, n_head_kv = 2, hd = 64, n_seq = 3;
  const int64_t cap = 300, n_pos = 310, width = int64_t(n_head_kv) * hd;
  for (QuantType type : {QuantType::F16, QuantType::F32, QuantType::Q8_0}) {
    testing::HostKv kv = testing::make_host_kv(type, width, cap, n_seq, 16, testing::KvLayout::scrambled);
    const int64_t pool_rows = kv.kc.n_blocks * kv.kc.block_size;
    const std::vector<float> rows = test::gaussian(size_t(pool_rows * width), 5);
    for (int64_t r = 0; r < pool_rows; ++r)
      cpu::row_from_f32(type, rows.data() + r * width, kv.k.data() + size_t(r) * kv.kc.row_bytes, width);
    const std::vector<int32_t> seq = {0, 2, 1, 2}, pos = {299, 0, 150, 37};
    std::vector<float> q = test::gaussian(size_t(seq.size()) * size_t(n_head * hd), 6);
    const int64_t n_tok = int64_t(seq.size());
    EncDevice d(*be);
    KvView dk = kv.kc;
    dk.data = d.put(kv.k);
    dk.table = nullptr;
    dk.device_table = d.put(kv.table);
    for (int32_t head : {0, 3, 5}) {
      const Mat out = d.mat(std::vector<float>(size_t(n_tok * n_pos), 9.0f), n_tok, n_pos);
      const AttentionWeightsArgs a{.out = out, .q = d.mat(q, n_tok, int64_t(n_head) * hd), .k_cache = dk,
                                   .seq = seq.data(), .pos = pos.data(), .head = head, .n_head = n_head,
                                   .n_head_kv = n_head_kv, .head_dim = hd, .scale = 0.125f};
      be->attention_weights(a);
      std::vector<float> want(size_t(n_tok * n_pos));
      AttentionWeightsArgs h = a;
      h.out = enc_host(want, n_tok, n_pos);
      h.q = enc_host(q, n_tok, int64_t(n_head) * hd);
      h.k_cache = kv.kc;
      ref::attention_weights(h);
      expect_near_all(d.get(out), want, 1e-5f, str_cat(quant_type_info(type).name, " head ", head));
    }
  }
}

// Dense bidirectional attention: sequences of several lengths (not multiples of the kernel's
// tiles), GQA, head sizes 64 / 80 / 128 / 200 (each of the kernel's three builds), strided rows;
// the kill switch leaves the op to the caller.
TEST(CudaEncoder, AttentionDenseMatchesReference) {
  REQUIRE_ENCODER_GPU(be);
  struct Case {
    int32_t n_seq, n, n_head, n_head_kv, hd;
  };
  for (const Case c : {Case{1, 100, 4, 4, 64}, Case{3, 37, 4, 2, 64}, Case{2, 33, 2, 1, 80}, Case{1, 65, 3, 3, 128},
                       Case{2, 20, 2, 2, 200}, Case{1, 1, 1, 1, 64}}) {
    const int64_t rows = int64_t(c.n_seq) * c.n, qw = int64_t(c.n_head) * c.hd, kvw = int64_t(c.n_head_kv) * c.hd;
    const int64_t q_stride = qw + 3;  // rows of a wider buffer
    std::vector<float> q = test::gaussian(size_t(rows * q_stride), 7), k = test::gaussian(size_t(rows * kvw), 8, 2.0f),
                       v = test::gaussian(size_t(rows * kvw), 9);
    EncDevice d(*be);
    Mat dq = d.mat(q, rows, qw);
    dq.stride = q_stride;
    const Mat out = d.mat(std::vector<float>(size_t(rows * qw)), rows, qw);
    const float scale = float(1.0 / std::sqrt(double(c.hd)));
    const AttentionDenseArgs a{.out = out, .q = dq, .k = d.mat(k, rows, kvw), .v = d.mat(v, rows, kvw),
                               .n_seq = c.n_seq, .n_head = c.n_head, .n_head_kv = c.n_head_kv, .head_dim = c.hd,
                               .scale = scale};
    ASSERT_TRUE(be->attention_dense(a));
    std::vector<float> want(size_t(rows * qw));
    AttentionDenseArgs h = a;
    h.out = enc_host(want, rows, qw);
    h.q = enc_host(q, rows, qw);
    h.q.stride = q_stride;
    h.k = enc_host(k, rows, kvw);
    h.v = enc_host(v, rows, kvw);
    ref::attention_dense(h);
    expect_near_all(d.get(out), want, 1e-4f, str_cat("n_seq ", c.n_seq, " n ", c.n, " hd ", c.hd));
    ScopedEnv off("BRISK_NO_CUDA_DENSE_ATTENTION", "1");
    EXPECT_FALSE(be->attention_dense(a));
  }
}

// Whisper on the GPU (the shared fixture, F32 weights, F32 caches): the encoder and the logits
// after the forced prefix against transformers, the dense attention against the scratch-cache
// path, and 12 greedy ids of decode steps run as graphs (replayed) equal to launch by launch.
class CudaWhisper : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
    REQUIRE_MODEL("wave2/whisper_tiny_random");
    std::ifstream in(model_dir("wave2/whisper_tiny_random") + "/ref.json");
    ref_ = nlohmann::json::parse(in);
    const media::Audio au = media::audio_decode_file(model_dir("wave2/whisper_tiny_random") + "/input.wav",
                                                     {.sample_rate = 16000});
    const media::LogMel m = media::LogMelExtractor({.n_mels = 128}).compute(au.samples.data(), int64_t(au.samples.size()));
    features_.assign(m.data.begin(), m.data.begin() + 3000 * 128);
    for (const auto& v : ref_["decoder_input_ids"]) prefix_.push_back(v.get<int32_t>());
    model_ = Model::load({.path = model_dir("wave2/whisper_tiny_random") + "/hf"});
  }
  struct Run {
    std::vector<float> last_logits;
    std::vector<int32_t> greedy;
    uint64_t replays = 0;
  };
  Run run(bool graphs, int n_gen) {
    std::unique_ptr<Backend> be = make_cuda_backend(0, graphs);
    const Backend& held = *be;
    auto ctx = context_create_on(model_, {.n_ctx = 64, .n_seq_max = 1, .n_batch = 64, .kv_type = QuantType::F32,
                                          .kv_block_size = 16},
                                 std::move(be));
    ctx->encode({EncoderInput{.seq = 0, .features = features_.data()}});
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prefix_.size(); ++i)
      batch.push_back({.token = prefix_[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == prefix_.size()});
    ctx->decode(batch);
    Run r;
    r.last_logits.assign(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
    int32_t pos = int32_t(prefix_.size());
    for (int i = 0; i < n_gen; ++i) {
      const float* l = ctx->logits(0);
      r.greedy.push_back(int32_t(std::max_element(l, l + ctx->n_vocab()) - l));
      ctx->decode({{.token = r.greedy.back(), .pos = pos++, .seq = 0, .want_logits = true}});
    }
    r.replays = cuda_graph_replays(held);
    return r;
  }
  double diff_to_ref(const std::vector<float>& got) const {
    double m = 0.0;
    const auto& want = ref_["last_logits"];
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
      m = std::max(m, std::fabs(double(got[i]) - want[i].get<double>()));
    return m;
  }
  nlohmann::json ref_;
  std::vector<float> features_;
  std::vector<int32_t> prefix_;
  std::shared_ptr<Model> model_;
};

TEST_F(CudaWhisper, LogitsAndGreedyIdsWithAndWithoutGraphs) {
  std::vector<int32_t> want;
  for (const auto& v : ref_["greedy_continuation"]) want.push_back(v.get<int32_t>());
  const Run graphs = run(true, int(want.size()));
  EXPECT_LT(diff_to_ref(graphs.last_logits), 1e-3);
  EXPECT_EQ(graphs.greedy, want);
  EXPECT_GT(graphs.replays, 0u) << "decode steps did not replay a captured graph";
  const Run eager = run(false, int(want.size()));
  EXPECT_EQ(eager.greedy, graphs.greedy);
  EXPECT_EQ(eager.replays, 0u);
  ScopedEnv off("BRISK_NO_CUDA_DENSE_ATTENTION", "1");
  EXPECT_LT(diff_to_ref(run(true, 0).last_logits), 1e-3);
}

#endif  // BRISK_HAVE_CUDA

}  // namespace
}  // namespace brisk
