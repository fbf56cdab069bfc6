// The CPU backend: host memory and the kernels of kernels/cpu/ run on a ThreadPool
// (BRISK_REF_OPS=1 runs the scalar references of kernels/cpu/ref.h instead). Each op
// checks its shapes (cheap, and a mismatch is a bug in a model file, reported by name), then
// hands every worker its share of rows. Scratch space (quantized activations, attention
// accumulators) grows to the largest request and is then reused, so steady-state decode
// steps allocate nothing.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "backend/backend.h"
#include "backend/tp_comm.h"
#include "backend/cpu/op_profile.h"
#include "backend/op_checks.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/large_alloc.h"
#include "quant/format.h"
#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/kernel_sets.h"
#include "kernels/cpu/ref.h"
#include "core/thread_pool.h"
#include "kernels/cpu/encoder_ops.h"
#include "kernels/cpu/ops.h"

namespace brisk {

namespace {

// Parts worth running for `work` multiply-adds (or elements): below ~32k per part the
// wake-up of another thread costs more than it saves.
int parts_for(double work) {
  constexpr double kGrain = 32768.0;
  return work < kGrain ? 1 : int(std::min(work / kGrain, 1024.0));
}

void check_mat(const Mat& m, int64_t rows, int64_t cols, const char* op, const char* what) {
  BRISK_CHECK(m.data != nullptr && m.rows == rows && m.cols == cols && m.row_stride() >= cols,
              op, ": ", what, " is [", m.rows, ", ", m.cols, "], expected [", rows, ", ", cols, "]");
}

void check_state(const StateView& s, int64_t slot_floats, const char* op) {
  BRISK_CHECK(s.data != nullptr && s.n_slots > 0 && s.slot_floats == slot_floats, op, ": state slots of ",
              s.slot_floats, " floats, expected ", slot_floats);
}

void check_kv(const KvView& v, const char* op) {
  BRISK_CHECK(v.data != nullptr && v.table != nullptr && v.block_size >= 16 && (v.block_size & (v.block_size - 1)) == 0 &&
                  v.table_stride * int64_t(v.block_size) >= v.capacity,
              op, ": KV cache view has no block table or a bad block size ", v.block_size);
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads)
      : pool_(n_threads),
        ref_(flags().ref_ops),
        avx2_(kernels::cpu_ops_level() != IsaLevel::scalar),
        avx512_(kernels::cpu_ops_level() == IsaLevel::avx512),
        profile_(flags().profile) {}
  ~CpuBackend() override {
    for (void* p : allocations_) large_free(p);
  }

  std::string name() const override { return "cpu"; }
  int n_threads() const override { return pool_.size(); }

  void* alloc(size_t bytes) override {
    // KV caches and activation arenas: huge pages when large (core/large_alloc.h).
    void* p = large_alloc(bytes);
    BRISK_CHECK(p != nullptr, "cpu backend: out of memory allocating ", bytes, " bytes");
    std::memset(p, 0, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    allocations_.insert(p);
    return p;
  }

  void free(void* p) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (allocations_.erase(p)) large_free(p);
  }

  void matmul(const MatmulArgs& a) override {
    check_mat(a.x, a.x.rows, a.w.n_in, "matmul", "x");
    check_mat(a.out, a.x.rows, a.w.n_out, "matmul", "out");
    BRISK_CHECK(a.out.data != a.x.data, "matmul: out must not alias x (rows are read while others are written)");
    if (ref_) return ref::matmul(a);
    run_matmuls(&a, 1);
  }

  // Matmuls sharing x and the activation format (and, in prefill, the GEMM's packing of it): x
  // is quantized (and packed) once and each thread runs its share of every matmul's rows in one
  // parallel region, so the small q/k/v matmuls cost no barrier of their own. Otherwise one by
  // one. BRISK_NO_SHARED_PREFILL_INPUT: prefill matmuls one by one, each quantizing x itself.
  void matmuls(const MatmulArgs* list, int n) override {
    bool fused = !ref_ && n > 1 && (list[0].x.rows <= 8 || !flags().no_shared_prefill_input);
    for (int i = 1; i < n && fused; ++i) fused = cpu::matmul_shares_input(list[0], list[i]);
    if (!fused) {
      for (int i = 0; i < n; ++i) matmul(list[i]);
      return;
    }
    for (int i = 0; i < n; ++i) {
      check_mat(list[i].x, list[i].x.rows, list[i].w.n_in, "matmul", "x");
      check_mat(list[i].out, list[i].x.rows, list[i].w.n_out, "matmul", "out");
    }
    run_matmuls(list, n);
  }

  void rms_norm(const RmsNormArgs& a) override {
    OpProfile::Scope prof(profile_, "rms_norm");
    const int64_t group = a.group > 0 ? a.group : a.x.cols;
    BRISK_CHECK(group > 0 && a.x.cols % group == 0, "rms_norm: ", a.x.cols,
                " columns are not a multiple of group ", group);
    check_mat(a.out, a.x.rows, a.x.cols, "rms_norm", "out");
    if (ref_) return ref::rms_norm(a);
    pool_.run([&](int ith, int nth) { cpu::rms_norm_rows(a, ith, nth); },
              parts_for(double(a.x.rows) * double(a.x.cols) * 4.0));
  }

  void rope(const RopeArgs& a) override {
    OpProfile::Scope prof(profile_, "rope");
    BRISK_CHECK(a.table && a.table->n_rot <= a.head_dim && a.table->n_rot % 2 == 0 &&
                    a.table->inv_freq.size() == size_t(a.table->n_rot / 2) && a.table->n_rot <= 1024,
                "rope: bad rotary table for head_dim ", a.head_dim);
    check_mat(a.x, a.x.rows, int64_t(a.n_head) * a.head_dim, "rope", "x");
    if (ref_) return ref::rope(a);
    pool_.run([&](int ith, int nth) { cpu::rope_rows(a, ith, nth); },
              parts_for(double(a.x.rows) * double(a.x.cols) * 8.0));
  }

  void kv_store(const KvStoreArgs& a) override {
    OpProfile::Scope prof(profile_, "kv_store");
    check_mat(a.k, a.k.rows, a.k_cache.width, "kv_store", "k");
    check_mat(a.v, a.k.rows, a.v_cache.width, "kv_store", "v");
    check_kv(a.k_cache, "kv_store");
    check_kv(a.v_cache, "kv_store");
    if (ref_) return ref::kv_store(a);
    pool_.run([&](int ith, int nth) { cpu::kv_store_rows(a, ith, nth); },
              parts_for(double(a.k.rows) * double(a.k.cols) * 8.0));
  }

  // F16 K caches are tiled where the AVX-512 attention runs (its score pass reads a head's 16
  // positions of one dim as one vector).
  // Q4_0 / Q5_0 / Q8_0 matmul weights in the layouts of this CPU's decode kernels
  // (kernels::cpu_weight_layout; BRISK_NO_REPACK and BRISK_REF_OPS keep the stored ones).
  std::optional<QuantType> weight_layout(QuantType stored) const override { return kernels::cpu_weight_layout(stored); }

  bool wants_tiled_k(QuantType type, int32_t head_dim, int32_t group) const override {
    return type == QuantType::F16 && avx512_ && cpu::attention_avx512_supports(head_dim, group) &&
           !flags().no_attn_tiles;
  }

  void attention(const AttentionArgs& a) override {
    OpProfile::Scope prof(profile_, a.q.rows > 8 ? "attention(prefill)" : "attention");
    BRISK_CHECK(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0, "attention: ", a.n_head,
                " heads are not a multiple of ", a.n_head_kv, " KV heads");
    check_mat(a.q, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention", "q");
    check_mat(a.out, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention", "out");
    BRISK_CHECK(a.k_cache.width == int64_t(a.n_head_kv) * a.head_dim &&
                    a.v_cache.width == a.k_cache.width,
                "attention: KV cache width does not match the heads");
    check_kv(a.k_cache, "attention");
    check_kv(a.v_cache, "attention");
    if (ref_) return ref::attention(a);
    // AVX-512 kernel, else AVX2, unless BRISK_NO_SIMD / BRISK_NO_AVX512 / BRISK_NO_AVX2
    // (cpu_features() applies the switches).
    const bool use512 = avx512_ && cpu::attention_avx512_supports(a.head_dim, a.n_head / a.n_head_kv);
    const bool use256 = avx2_ && a.head_dim % 8 == 0;
    const int64_t per = use512 ? cpu::attention_avx512_scratch_floats(a.n_head / a.n_head_kv, a.head_dim)
                               : cpu::attention_scratch_floats(a.head_dim);
    float* buf = static_cast<float*>(scratch(attn_scratch_, sizeof(float) * size_t(per * pool_.size())));
    if (use512) {
      const int parts = cpu::attention_avx512_split_parts(a, pool_.size());
      if (parts > 1) {
        float* partials = static_cast<float*>(
            scratch(attn_partial_, sizeof(float) * size_t(parts * cpu::attention_split_partial_floats(a))));
        pool_.run([&](int ith, int nth) { cpu::attention_split_avx512(a, buf + per * ith, partials, ith, nth); },
                  parts);
        cpu::attention_merge_split(a, partials, parts);
        return;
      }
    }
    double work = 0.0;  // (token, head, position) triples times head_dim
    for (int64_t t = 0; t < a.q.rows; ++t) work += double(a.pos[t] + 1);
    work *= double(a.n_head) * double(a.head_dim) * 2.0;
    pool_.run([&](int ith, int nth) {
      if (use512) cpu::attention_rows_avx512(a, buf + per * ith, ith, nth);
      else if (use256) cpu::attention_rows_avx2(a, buf + per * ith, ith, nth);
      else cpu::attention_rows(a, buf + per * ith, ith, nth);
    }, parts_for(work));
  }

  void gated_act(const GatedActArgs& a) override {
    OpProfile::Scope prof(profile_, "gated_act");
    check_mat(a.up, a.gate.rows, a.gate.cols, "gated_act", "up");
    check_mat(a.out, a.gate.rows, a.gate.cols, "gated_act", "out");
    if (ref_) return ref::gated_act(a);
    pool_.run([&](int ith, int nth) {
      if (avx512_) cpu::gated_act_rows_avx512(a, ith, nth);
      else cpu::gated_act_rows(a, ith, nth);
    },
              parts_for(double(a.gate.rows) * double(a.gate.cols) * 16.0));
  }

  void add(const AddArgs& a) override {
    OpProfile::Scope prof(profile_, "add");
    check_mat(a.b, a.a.rows, a.a.cols, "add", "b");
    check_mat(a.out, a.a.rows, a.a.cols, "add", "out");
    if (ref_) return ref::add(a);
    pool_.run([&](int ith, int nth) { cpu::add_rows(a, ith, nth); }, parts_for(double(a.a.rows) * double(a.a.cols)));
  }

  void embedding(const EmbeddingArgs& a) override {
    OpProfile::Scope prof(profile_, "embedding");
    check_mat(a.out, a.out.rows, a.table.n_in, "embedding", "out");
    if (ref_) return ref::embedding(a);
    pool_.run([&](int ith, int nth) { cpu::embedding_rows(a, ith, nth); },
              parts_for(double(a.out.rows) * double(a.table.n_in) * 4.0));
  }

  void get_rows(const GetRowsArgs& a) override {
    OpProfile::Scope prof(profile_, "get_rows");
    check_mat(a.out, a.out.rows, a.x.cols, "get_rows", "out");
    pool_.run([&](int ith, int nth) { cpu::get_rows_rows(a, ith, nth); }, parts_for(double(a.out.rows) * double(a.x.cols)));
  }

  // Routes every token, then runs each expert once over the tokens that chose it (gathered
  // rows, ordinary matmuls on scratch) and scatters the weighted results into out.
  void moe(const MoeArgs& a) override {
    OpProfile::Scope prof(profile_, "moe");
    const int64_t n_tok = a.x.rows;
    BRISK_CHECK(a.gate && a.up && a.down && a.n_expert > 0 && a.n_used > 0 && a.n_used <= a.n_expert,
                "moe: ", a.n_used, " of ", a.n_expert, " experts, or expert weights missing");
    check_mat(a.logits, n_tok, a.n_expert, "moe", "logits");
    check_mat(a.out, n_tok, a.x.cols, "moe", "out");
    BRISK_CHECK(a.out.data != a.x.data, "moe: out must not alias x");
    const int64_t n_ff = a.gate[0].n_out;
    for (int32_t e = 0; e < a.n_expert; ++e) {
      BRISK_CHECK(a.gate[e].n_in == a.x.cols && a.up[e].n_in == a.x.cols && a.gate[e].n_out == n_ff &&
                      a.up[e].n_out == n_ff && a.down[e].n_in == n_ff && a.down[e].n_out == a.x.cols,
                  "moe: expert ", e, " weights do not match [", n_ff, ", ", a.x.cols, "]");
    }
    if (ref_) return ref::moe(a);
    const size_t nk = size_t(n_tok) * size_t(a.n_used);
    auto* ids = static_cast<int32_t*>(scratch(moe_ids_, nk * sizeof(int32_t)));
    auto* wts = static_cast<float*>(scratch(moe_w_, nk * sizeof(float)));
    pool_.run([&](int ith, int nth) { cpu::moe_route_rows(a, ids, wts, ith, nth); },
              parts_for(double(n_tok) * double(a.n_expert) * double(a.n_used) * 4.0));
    // Scratch: gathered x [n_tok, n_embd], gate/up [n_tok, n_ff], expert out [n_tok, n_embd],
    // and the (token, weight) list of the expert.
    const size_t fl = sizeof(float);
    auto* xs = static_cast<float*>(scratch(moe_x_, size_t(n_tok) * size_t(a.x.cols) * fl));
    auto* gs = static_cast<float*>(scratch(moe_g_, size_t(n_tok) * size_t(n_ff) * fl));
    auto* us = static_cast<float*>(scratch(moe_u_, size_t(n_tok) * size_t(n_ff) * fl));
    auto* ds = static_cast<float*>(scratch(moe_d_, size_t(n_tok) * size_t(a.x.cols) * fl));
    auto* tok = static_cast<int32_t*>(scratch(moe_tok_, size_t(n_tok) * sizeof(int32_t)));
    auto* tw = static_cast<float*>(scratch(moe_tw_, size_t(n_tok) * fl));
    for (int64_t t = 0; t < n_tok; ++t) std::fill(a.out.row(t), a.out.row(t) + a.x.cols, 0.0f);
    for (int32_t e = 0; e < a.n_expert; ++e) {
      int64_t m = 0;
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int32_t k = 0; k < a.n_used; ++k) {
          if (ids[size_t(t) * size_t(a.n_used) + size_t(k)] != e) continue;
          tok[m] = int32_t(t);
          tw[m] = wts[size_t(t) * size_t(a.n_used) + size_t(k)];
          std::copy(a.x.row(t), a.x.row(t) + a.x.cols, xs + m * a.x.cols);
          ++m;
        }
      }
      if (m == 0) continue;
      const Mat xm{.data = xs, .rows = m, .cols = a.x.cols};
      const Mat gm{.data = gs, .rows = m, .cols = n_ff};
      const Mat um{.data = us, .rows = m, .cols = n_ff};
      const Mat dm{.data = ds, .rows = m, .cols = a.x.cols};
      matmul({.out = gm, .x = xm, .w = a.gate[e]});
      matmul({.out = um, .x = xm, .w = a.up[e]});
      gated_act({.out = gm, .gate = gm, .up = um, .act = a.act});
      matmul({.out = dm, .x = gm, .w = a.down[e]});
      for (int64_t j = 0; j < m; ++j) {
        float* o = a.out.row(tok[j]);
        const float* d = dm.row(j);
        for (int64_t i = 0; i < a.x.cols; ++i) o[i] += tw[j] * d[i];
      }
    }
  }

  void scale(const ScaleArgs& a) override {
    OpProfile::Scope prof(profile_, "scale");
    check_mat(a.out, a.x.rows, a.x.cols, "scale", "out");
    if (ref_) return ref::scale(a);
    pool_.run([&](int ith, int nth) { cpu::scale_rows(a, ith, nth); }, parts_for(double(a.x.rows) * double(a.x.cols)));
  }

  // Tensor parallelism across CPU ranks in one process (backend/tp_comm.h).
  void all_reduce(const AllReduceArgs& a) override {
    OpProfile::Scope prof(profile_, "all_reduce");
    BRISK_CHECK(a.tp != nullptr && a.tp->comm != nullptr, "cpu backend: all_reduce without a communicator");
    static_cast<HostComm*>(a.tp->comm)->all_reduce(a.tp->rank, a.x);
  }

  bool moe_expert_scale_supported() const override { return true; }

  void conv_state(const ConvStateArgs& a) override {
    OpProfile::Scope prof(profile_, "conv_state");
    const int64_t n_tok = a.x.rows, C = a.x.cols;
    check_mat(a.out, n_tok, C, "conv_state", "out");
    BRISK_CHECK(a.out.data != a.x.data, "conv_state: out must not alias x");
    BRISK_CHECK(a.weight && a.kernel >= 1 && a.kernel <= 16, "conv_state: kernel ", a.kernel, " out of range [1, 16]");
    check_state(a.state, int64_t(a.kernel - 1) * C, "conv_state");
    if (n_tok == 0) return;
    if (ref_) return ref::conv_state(a);
    cpu::seq_runs_build(a.seq, n_tok, a.state.n_slots, runs_);
    pool_.run([&](int ith, int nth) { cpu::conv_state_rows(a, runs_, ith, nth); },
              parts_for(double(n_tok) * double(C) * double(a.kernel) * 2.0));
  }

  void l2_norm(const L2NormArgs& a) override {
    OpProfile::Scope prof(profile_, "l2_norm");
    const int64_t group = a.group > 0 ? a.group : a.x.cols;
    BRISK_CHECK(group > 0 && a.x.cols % group == 0, "l2_norm: ", a.x.cols, " columns are not a multiple of group ", group);
    check_mat(a.out, a.x.rows, a.x.cols, "l2_norm", "out");
    if (ref_) return ref::l2_norm(a);
    pool_.run([&](int ith, int nth) { cpu::l2_norm_rows(a, ith, nth); },
              parts_for(double(a.x.rows) * double(a.x.cols) * 4.0));
  }

  void gated_rms_norm(const GatedRmsNormArgs& a) override {
    OpProfile::Scope prof(profile_, "gated_rms_norm");
    const int64_t group = a.group > 0 ? a.group : a.x.cols;
    BRISK_CHECK(a.weight && group > 0 && a.x.cols % group == 0, "gated_rms_norm: ", a.x.cols,
                " columns are not a multiple of group ", group, ", or no weight");
    check_mat(a.z, a.x.rows, a.x.cols, "gated_rms_norm", "z");
    check_mat(a.out, a.x.rows, a.x.cols, "gated_rms_norm", "out");
    if (ref_) return ref::gated_rms_norm(a);
    pool_.run([&](int ith, int nth) { cpu::gated_rms_norm_rows(a, ith, nth); },
              parts_for(double(a.x.rows) * double(a.x.cols) * 16.0));
  }

  void sigmoid_mul(const SigmoidMulArgs& a) override {
    OpProfile::Scope prof(profile_, "sigmoid_mul");
    BRISK_CHECK(a.gate.cols == a.x.cols || a.gate.cols == 1, "sigmoid_mul: gate has ", a.gate.cols,
                " columns for ", a.x.cols);
    check_mat(a.gate, a.x.rows, a.gate.cols, "sigmoid_mul", "gate");
    check_mat(a.out, a.x.rows, a.x.cols, "sigmoid_mul", "out");
    if (ref_) return ref::sigmoid_mul(a);
    pool_.run([&](int ith, int nth) { cpu::sigmoid_mul_rows(a, ith, nth); },
              parts_for(double(a.x.rows) * double(a.x.cols) * 16.0));
  }

  void delta_rule(const DeltaRuleArgs& a) override {
    OpProfile::Scope prof(profile_, a.q.rows > 8 ? "delta_rule(prefill)" : "delta_rule");
    const int64_t n_tok = a.q.rows;
    check_delta_rule_shapes(a);
    check_state(a.state, int64_t(a.n_v_head) * a.k_dim * a.v_dim, "delta_rule");
    if (n_tok == 0) return;
    if (ref_) return ref::delta_rule(a);
    cpu::seq_runs_build(a.seq, n_tok, a.state.n_slots, runs_);
    const int64_t per = cpu::delta_rule_scratch_floats(a);
    float* buf = static_cast<float*>(scratch(delta_scratch_, sizeof(float) * size_t(per * pool_.size())));
    const bool chunked = !flags().no_chunked_delta;
    const int64_t items = runs_.n_runs() * a.n_v_head;
    const double work = double(n_tok) * double(a.n_v_head) * double(a.k_dim) * double(a.v_dim) * 4.0;
    pool_.run([&](int ith, int nth) { cpu::delta_rule_rows(a, runs_, buf + per * ith, chunked, ith, nth); },
              int(std::min<double>(double(items), double(parts_for(work)))));
  }

  void softcap(const SoftcapArgs& a) override {
    OpProfile::Scope prof(profile_, "softcap");
    BRISK_CHECK(a.cap > 0.0f && std::isfinite(a.cap), "softcap: cap ", a.cap, " must be positive");
    check_mat(a.x, a.x.rows, a.x.cols, "softcap", "x");
    if (ref_) return ref::softcap(a);
    const bool simd = avx512_ && !flags().no_fast_softcap;
    pool_.run([&](int ith, int nth) { cpu::softcap_rows(a, simd, ith, nth); },
              parts_for(double(a.x.rows) * double(a.x.cols) * 16.0));
  }

  void layer_norm(const LayerNormArgs& a) override {
    OpProfile::Scope prof(profile_, "layer_norm");
    BRISK_CHECK(a.x.cols > 0 && a.eps >= 0.0f, "layer_norm: ", a.x.cols, " columns, eps ", a.eps);
    check_mat(a.out, a.x.rows, a.x.cols, "layer_norm", "out");
    if (ref_) return ref::layer_norm(a);
    pool_.run([&](int ith, int nth) { cpu::layer_norm_rows(a, ith, nth); },
              parts_for(double(a.x.rows) * double(a.x.cols) * 6.0));
  }

  void unary(const UnaryArgs& a) override {
    OpProfile::Scope prof(profile_, "unary");
    check_mat(a.out, a.x.rows, a.x.cols, "unary", "out");
    if (ref_) return ref::unary(a);
    const bool fast = avx512_ && a.op == UnaryOp::gelu_erf && !flags().no_fast_gelu;
    pool_.run([&](int ith, int nth) {
      if (fast) cpu::unary_rows_avx512(a, ith, nth);
      else cpu::unary_rows(a, ith, nth);
    }, parts_for(double(a.x.rows) * double(a.x.cols) * 16.0));
  }

  void im2col(const Im2colArgs& a) override {
    OpProfile::Scope prof(profile_, "im2col");
    BRISK_CHECK(a.kernel >= 1 && a.stride >= 1 && a.pad >= 0 && a.pad < a.kernel && a.frames_in >= 1 &&
                    a.x.rows % a.frames_in == 0,
                "im2col: kernel ", a.kernel, ", stride ", a.stride, ", pad ", a.pad, " over ", a.x.rows,
                " rows of sequences of ", a.frames_in, " frames");
    const int64_t frames_out = cpu::im2col_frames_out(a.frames_in, a.kernel, a.stride, a.pad);
    BRISK_CHECK(frames_out > 0, "im2col: ", a.frames_in, " frames are fewer than the kernel ", a.kernel);
    check_mat(a.out, a.x.rows / a.frames_in * frames_out, a.x.cols * a.kernel, "im2col", "out");
    if (ref_) return ref::im2col(a);
    pool_.run([&](int ith, int nth) { cpu::im2col_rows(a, ith, nth); },
              parts_for(double(a.out.rows) * double(a.out.cols)));
  }

  bool attention_dense(const AttentionDenseArgs& a) override {
    OpProfile::Scope prof(profile_, "attention_dense");
    BRISK_CHECK(a.n_seq >= 1 && (a.seq_start || a.q.rows % a.n_seq == 0) && a.n_head_kv > 0 &&
                    a.n_head % a.n_head_kv == 0 && a.head_dim > 0 && a.window >= 0,
                "attention_dense: ", a.q.rows, " rows in ", a.n_seq, " sequences, ", a.n_head, " heads over ",
                a.n_head_kv, " KV heads");
    BRISK_CHECK(!a.q_bias && !a.k_bias && !a.v_bias,
                "attention_dense: q / k / v biases are not taken on the cpu backend (attention_dense_bias)");
    if (a.seq_start) {
      BRISK_CHECK(a.seq_start[0] == 0 && a.seq_start[a.n_seq] == a.q.rows, "attention_dense: sequence starts span [",
                  a.seq_start[0], ", ", a.seq_start[a.n_seq], "), the rows are [0, ", a.q.rows, ")");
      for (int32_t s = 0; s < a.n_seq; ++s)
        BRISK_CHECK(a.seq_start[s + 1] > a.seq_start[s], "attention_dense: sequence ", s, " is empty or out of order");
    }
    check_mat(a.q, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention_dense", "q");
    check_mat(a.out, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention_dense", "out");
    check_mat(a.k, a.q.rows, int64_t(a.n_head_kv) * a.head_dim, "attention_dense", "k");
    check_mat(a.v, a.q.rows, int64_t(a.n_head_kv) * a.head_dim, "attention_dense", "v");
    BRISK_CHECK(a.out.data != a.q.data && a.out.data != a.k.data && a.out.data != a.v.data,
                "attention_dense: out must not alias q, k or v");
    if (ref_) {
      ref::attention_dense(a);
      return true;
    }
    const bool fast = avx512_ && a.head_dim % 16 == 0 && !flags().no_blocked_attention;
    const int64_t per = cpu::attention_dense_scratch_floats(a, fast);
    float* buf = static_cast<float*>(scratch(attn_scratch_, sizeof(float) * size_t(per * pool_.size())));
    const int64_t n = a.max_seq_len();
    pool_.run([&](int ith, int nth) {
      if (fast) cpu::attention_dense_rows_avx512(a, buf + per * ith, ith, nth);
      else cpu::attention_dense_rows(a, buf + per * ith, ith, nth);
    }, parts_for(double(a.q.rows) * double(n) * double(a.n_head) * double(a.head_dim) * 2.0));
    return true;
  }

  void attention_weights(const AttentionWeightsArgs& a) override {
    OpProfile::Scope prof(profile_, "attention_weights");
    BRISK_CHECK(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0 && a.head >= 0 && a.head < a.n_head &&
                    a.head_dim > 0,
                "attention_weights: head ", a.head, " of ", a.n_head, " (", a.n_head_kv, " KV heads)");
    check_mat(a.q, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention_weights", "q");
    check_mat(a.out, a.q.rows, a.out.cols, "attention_weights", "out");
    BRISK_CHECK(a.k_cache.width == int64_t(a.n_head_kv) * a.head_dim, "attention_weights: K cache width ",
                a.k_cache.width, " does not match the heads");
    check_kv(a.k_cache, "attention_weights");
    for (int64_t t = 0; t < a.q.rows; ++t)
      BRISK_CHECK(a.pos[t] >= 0 && a.pos[t] < a.out.cols && a.pos[t] < a.k_cache.capacity,
                  "attention_weights: position ", a.pos[t], " outside the ", a.out.cols, " output columns");
    if (ref_) return ref::attention_weights(a);
    float* buf = static_cast<float*>(scratch(attn_scratch_, sizeof(float) * size_t(a.head_dim) * size_t(pool_.size())));
    pool_.run([&](int ith, int nth) { cpu::attention_weights_rows(a, buf + int64_t(a.head_dim) * ith, ith, nth); },
              parts_for(double(a.q.rows) * double(a.out.cols) * double(a.head_dim)));
  }

 private:
  // Matmuls of one input (checked by the caller): list[0].x is quantized once (and packed for
  // the prefill GEMM, which every matmul of the list then reads), then every matmul's rows run
  // in one region.
  void run_matmuls(const MatmulArgs* list, int n) {
    const MatmulArgs& a0 = list[0];
    const size_t rb = cpu::matmul_act_row_bytes(a0.w.type, a0.w.n_in);
    void* act = scratch(act_scratch_, rb * size_t(a0.x.rows));
    const size_t packed_bytes = cpu::matmul_packed_bytes(a0);  // the callers checked that list[i] share it
    void* packed = packed_bytes ? scratch(packed_scratch_, packed_bytes) : nullptr;
    double work = 0.0;
    for (int i = 0; i < n; ++i) work += double(list[i].x.rows) * double(list[i].w.n_in) * double(list[i].w.n_out);
    {
      OpProfile::Scope prof(profile_, "quantize_act");
      pool_.run([&](int ith, int nth) { cpu::matmul_quantize_rows(a0, act, packed, ith, nth); },
                parts_for(double(a0.x.rows) * double(a0.w.n_in) * 4.0));
    }
    double bytes = 0.0;
    if (profile_.on())
      for (int i = 0; i < n; ++i) bytes += double(list[i].w.row_bytes) * double(list[i].w.n_out);
    OpProfile::Scope prof(profile_, profile_.on() ? str_cat(a0.x.rows > 8 ? "matmul(prefill) " : "matmul ",
                                                            quant_type_info(a0.w.type).name, " ", a0.w.n_out, n > 1 ? "+" : "", "x", a0.w.n_in)
                                           : std::string(),
                          bytes);
    const int parts = std::min(parts_for(work), pool_.size());
    const uint64_t epoch = flags().no_prepared_reuse ? 0 : kernels::new_activation_epoch();
    if (cpu::matmul_balanced_split(list, n, packed, parts, claims_)) {
      pool_.run([&](int ith, int nth) {
        cpu::matmul_list_rows_balanced(list, n, act, packed, ith, nth, claims_, epoch);
      }, parts);
      return;
    }
    pool_.run([&](int ith, int nth) {
      cpu::matmul_list_rows(list, n, act, packed, ith, nth, epoch);
    }, parts);
  }

  static void* scratch(std::vector<uint8_t>& buf, size_t bytes) {
    if (buf.size() < bytes) buf.resize(bytes);
    return buf.data();
  }

  ThreadPool pool_;
  cpu::TileClaims claims_;  // the balanced decode split's unclaimed tiles (one region at a time)
  const bool ref_;   // BRISK_REF_OPS: scalar references instead of the kernels
  const bool avx2_;    // AVX2 attention kernel allowed
  const bool avx512_;  // AVX-512 attention kernel allowed
  OpProfile profile_;  // BRISK_PROFILE
  std::mutex mutex_;
  std::unordered_set<void*> allocations_;
  std::vector<uint8_t> act_scratch_;
  std::vector<uint8_t> packed_scratch_;
  std::vector<uint8_t> attn_scratch_;
  std::vector<uint8_t> attn_partial_;  // per-part partial results of the split decode attention
  cpu::SeqRuns runs_;                  // the tokens of each sequence (linear-attention ops)
  std::vector<uint8_t> delta_scratch_;  // per-part chunk buffers of the delta rule
  std::vector<uint8_t> moe_ids_, moe_w_, moe_x_, moe_g_, moe_u_, moe_d_, moe_tok_, moe_tw_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) {
  return std::make_unique<CpuBackend>(n_threads);
}

}  // namespace brisk
