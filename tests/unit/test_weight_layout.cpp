// Weights are laid out per backend (Backend::weight_layout, LoadedModel::arch_for): whichever
// context binds a model first, a backend that reads the stored layouts never sees another
// backend's repacked layout, one that asks for the repacked layouts gets them, and every
// layout gives the same logits.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kernels/cpu/dot.h"
#include "models/random_model.h"
#include "quant/repack.h"
#include "runtime/engine_parts.h"
#include "runtime/engine_api.h"
#include "temp_files.h"

namespace brisk {
namespace {

// The CPU backend, answering weight_layout as asked (the CPU's layouts, or the stored ones)
// and recording the formats of the weights its matmuls and lookups are given.
class RecordingBackend final : public Backend {
 public:
  // matmul_seen (optional): the formats of the matmuls' weights alone.
  RecordingBackend(bool repack, std::set<QuantType>* seen, std::set<QuantType>* matmul_seen = nullptr)
      : cpu_(make_cpu_backend(2)), repack_(repack), seen_(seen), matmul_seen_(matmul_seen) {}

  std::optional<QuantType> weight_layout(QuantType stored) const override {
    return repack_ ? cpu_->weight_layout(stored) : std::nullopt;
  }
  std::string name() const override { return cpu_->name(); }
  int n_threads() const override { return cpu_->n_threads(); }
  void* alloc(size_t bytes) override { return cpu_->alloc(bytes); }
  void free(void* p) override { cpu_->free(p); }
  void matmul(const MatmulArgs& a) override {
    record_matmul(a.w.type);
    cpu_->matmul(a);
  }
  void matmuls(const MatmulArgs* list, int n) override {
    for (int i = 0; i < n; ++i) record_matmul(list[i].w.type);
    cpu_->matmuls(list, n);
  }
  void rms_norm(const RmsNormArgs& a) override { cpu_->rms_norm(a); }
  void rope(const RopeArgs& a) override { cpu_->rope(a); }
  void kv_store(const KvStoreArgs& a) override { cpu_->kv_store(a); }
  void attention(const AttentionArgs& a) override { cpu_->attention(a); }
  void gated_act(const GatedActArgs& a) override { cpu_->gated_act(a); }
  void add(const AddArgs& a) override { cpu_->add(a); }
  void embedding(const EmbeddingArgs& a) override {
    seen_->insert(a.table.type);
    cpu_->embedding(a);
  }
  void get_rows(const GetRowsArgs& a) override { cpu_->get_rows(a); }
  void moe(const MoeArgs& a) override { cpu_->moe(a); }
  void softcap(const SoftcapArgs& a) override { cpu_->softcap(a); }
  void scale(const ScaleArgs& a) override { cpu_->scale(a); }
  bool wants_tiled_k(QuantType type, int32_t head_dim, int32_t group) const override {
    return cpu_->wants_tiled_k(type, head_dim, group);
  }

 private:
  std::unique_ptr<Backend> cpu_;
  bool repack_;
  std::set<QuantType>* seen_;
  std::set<QuantType>* matmul_seen_;

  void record_matmul(QuantType t) {
    seen_->insert(t);
    if (matmul_seen_) matmul_seen_->insert(t);
  }
};

bool any_repacked(const std::set<QuantType>& types) {
  for (QuantType t : types)
    if (quant::is_repacked(t)) return true;
  return false;
}

class WeightLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernels::cpu_weight_layout(QuantType::Q8_0))
      GTEST_SKIP() << "this CPU reads Q8_0 weights in their stored layout (no repacked kernel here)";
    path_ = (testing::process_temp_dir() / "weight_layout_q8_0.gguf").string();
    RandomModelParams p = random_model_preset("tiny");
    p.type = QuantType::Q8_0;
    p.n_embd = 512;  // rows of whole 16-block groups as well as the partial groups of n_ff
    p.n_ff = 320;
    p.head_dim = 128;
    random_model_write(p, path_);
  }

  // Logits of a short prompt on `backend`, and the formats its matmuls saw.
  std::vector<float> run(const std::shared_ptr<Model>& model, bool repack, std::set<QuantType>* seen,
                         std::unique_ptr<Context>* keep = nullptr) {
    auto ctx = context_create_on(model, {.n_ctx = 64, .n_seq_max = 1, .n_batch = 16},
                                 std::make_unique<RecordingBackend>(repack, seen));
    std::vector<BatchToken> batch;
    for (int32_t i = 0; i < 9; ++i) batch.push_back({.token = (i * 37 + 5) % 1024, .pos = i, .seq = 0, .want_logits = i == 8});
    ctx->decode(batch);
    std::vector<float> logits(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
    ctx->decode({{.token = 3, .pos = 9, .seq = 0, .want_logits = true}});  // a decode step too
    logits.insert(logits.end(), ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
    if (keep) *keep = std::move(ctx);
    return logits;
  }

  std::string path_;
};

// The CPU binds first (its layouts written over the loaded bytes); a backend of stored layouts
// after it gets converted copies, and the first context's weights stay as they were.
TEST_F(WeightLayout, StoredLayoutAfterRepackedOne) {
  auto model = Model::load({.path = path_});
  std::set<QuantType> cpu_seen, stored_seen, cpu_again;
  std::unique_ptr<Context> first;
  const std::vector<float> a = run(model, true, &cpu_seen, &first);
  EXPECT_TRUE(cpu_seen.count(QuantType::Q8_0_R16)) << "the CPU backend was not given its layout";
  const std::vector<float> b = run(model, false, &stored_seen);
  EXPECT_FALSE(any_repacked(stored_seen)) << "a backend of stored layouts was given a repacked weight";
  EXPECT_TRUE(stored_seen.count(QuantType::Q8_0));
  EXPECT_EQ(a, b);
  const std::vector<float> c = run(model, true, &cpu_again);  // the bytes the first context uses
  EXPECT_EQ(a, c);
  EXPECT_TRUE(cpu_again.count(QuantType::Q8_0_R16));
}

// The reverse order: the stored layouts bind first, the CPU's repacked layouts come as copies.
TEST_F(WeightLayout, RepackedLayoutAfterStoredOne) {
  auto model = Model::load({.path = path_});
  std::set<QuantType> stored_seen, cpu_seen;
  std::unique_ptr<Context> first;
  const std::vector<float> b = run(model, false, &stored_seen, &first);
  EXPECT_FALSE(any_repacked(stored_seen));
  const std::vector<float> a = run(model, true, &cpu_seen);
  EXPECT_TRUE(cpu_seen.count(QuantType::Q8_0_R16));
  EXPECT_EQ(a, b);
}

// Every matmul of a model with per-layer embeddings (Gemma 4 "E" shapes, the projection of the
// hidden state into them included) reads the CPU's repacked layout; only the lookups of the
// per-layer embedding table keep the stored one.
TEST_F(WeightLayout, PerLayerEmbeddingProjectionIsRepacked) {
  RandomModelParams p = random_model_preset("gemma4-e2b");
  p.type = QuantType::Q8_0;
  p.n_vocab = 1024;
  p.n_embd = 512;
  p.n_layer = 7;  // full attention at layer 4; the last 2 share the caches of earlier sliding ones
  p.n_ff = 512;
  p.head_dim = 64;
  p.head_dim_full = 128;
  p.n_kv_shared_layers = 2;
  p.n_embd_per_layer = 64;
  const std::string path = (testing::process_temp_dir() / "weight_layout_ple_q8_0.gguf").string();
  random_model_write(p, path);
  auto model = Model::load({.path = path});
  std::set<QuantType> seen, matmuls;
  auto ctx = context_create_on(model, {.n_ctx = 64, .n_seq_max = 1, .n_batch = 16},
                               std::make_unique<RecordingBackend>(true, &seen, &matmuls));
  ctx->decode({{.token = 5, .pos = 0, .seq = 0, .want_logits = true}});
  EXPECT_TRUE(matmuls.count(QuantType::Q8_0_R16));
  EXPECT_FALSE(matmuls.count(QuantType::Q8_0)) << "a matmul read the stored Q8_0 layout";
}

// A memory-mapped file is never rewritten: every backend gets the stored layouts.
TEST_F(WeightLayout, MappedWeightsKeepTheirLayout) {
  auto model = Model::load({.path = path_, .use_mmap = true});
  std::set<QuantType> seen;
  run(model, true, &seen);
  EXPECT_FALSE(any_repacked(seen));
}

}  // namespace
}  // namespace brisk
