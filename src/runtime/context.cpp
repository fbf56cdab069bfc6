// The Context implementation: a backend (thread pool), the KV cache, the activation arena for
// n_batch tokens, and decode(): validate the whole batch first (so an error leaves the state
// unchanged), grow the KV cache if needed, then run the model's forward on chunks of at most
// n_batch tokens (the cache prepares each chunk's blocks) and collect the logits that were asked
// for. The cache's per-layer layout (widths, sliding windows, shared caches) is the model's.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/flags.h"
#include "core/log.h"
#include "models/forward.h"
#include "runtime/encoder_state.h"
#include "runtime/engine_parts.h"
#include "runtime/kv_cache.h"
#include "runtime/loaded_model.h"
#include "runtime/recurrent_state.h"
#include "runtime/tp_context.h"

namespace brisk {

namespace {

class ModelContext final : public Context {
 public:
  // backend: the backend to run on, or nullptr for one made from options.device.
  // mtp: run the model's multi-token-prediction block (ArchModel::mtp) instead of the model.
  // tp: this context's rank of a tensor-parallel group (runtime/tp_context.h; model is then
  // the rank's shard), or a group of one.
  ModelContext(std::shared_ptr<const LoadedModel> model, const ContextOptions& options,
               std::unique_ptr<Backend> backend, bool mtp = false, TpRank tp = {})
      : model_(std::move(model)), opt_(options), cfg_(config_of(*model_, mtp)), mtp_(mtp), tp_(tp),
        backend_(std::move(backend)) {
    BRISK_CHECK(opt_.n_seq_max >= 1 && opt_.n_seq_max <= 1024, "n_seq_max ", opt_.n_seq_max,
                " out of range [1, 1024]");
    BRISK_CHECK(opt_.n_batch >= 1, "n_batch must be at least 1");
    BRISK_CHECK(opt_.encoder_windows >= 1 && opt_.encoder_windows <= 64, "encoder_windows ", opt_.encoder_windows,
                " outside [1, 64]");
    BRISK_CHECK(opt_.n_ctx >= 1, "n_ctx must be at least 1");
    BRISK_CHECK(opt_.kv_block_size >= 16 && opt_.kv_block_size <= (1 << 16) &&
                    (opt_.kv_block_size & (opt_.kv_block_size - 1)) == 0,
                "kv_block_size ", opt_.kv_block_size, " is not a power of two in [16, 65536]");
    opt_.n_ctx = std::min(opt_.n_ctx, cfg_.n_ctx_train);
    opt_.n_batch = std::min(opt_.n_batch, opt_.n_ctx * opt_.n_seq_max);
    if (opt_.kv_type == QuantType::Q8_0)
      for (int il = 0; il < cfg_.n_layer; ++il)
        BRISK_CHECK(cfg_.head_dim_of(il) % 32 == 0, "q8_0 KV cache needs head_dim a multiple of 32, model has ",
                    cfg_.head_dim_of(il), il > 0 ? str_cat(" (layer ", il, ")") : std::string());
    BRISK_CHECK(opt_.state_snapshot_interval >= 0 && opt_.state_snapshots >= 0 && opt_.state_snapshots <= 64,
                "state_snapshot_interval ", opt_.state_snapshot_interval, " / state_snapshots ", opt_.state_snapshots,
                " out of range");
    if (!backend_) backend_ = make_backend(opt_.device, opt_.n_threads);
    arch_ = &model_->arch_for(*backend_);
    if (mtp_) arch_ = arch_->mtp().arch;
    BRISK_CHECK(arch_ != nullptr, "model ", cfg_.arch, ": the multi-token-prediction block is missing for this backend");
    // What each layer keeps per sequence, as the model declares it.
    layer_states_ = arch_->layer_states();
    if (layer_states_.empty()) layer_states_.assign(size_t(cfg_.n_layer), LayerState{});
    BRISK_CHECK(int32_t(layer_states_.size()) == cfg_.n_layer, "model declares state for ", layer_states_.size(),
                " layers, it has ", cfg_.n_layer);
    std::vector<std::vector<int64_t>> recurrent;
    bool any_recurrent = false;
    for (const LayerState& l : layer_states_) {
      recurrent.push_back(l.recurrent);
      any_recurrent = any_recurrent || !l.recurrent.empty();
    }
    if (!any_recurrent) opt_.state_snapshots = 0;
    opt_.n_threads = backend_->n_threads();
    opt_.device = backend_->name();  // what "auto" chose
    kv_options_ = kv_cache_options();
    plan_device_memory();
    kv_ = std::make_unique<KvCache>(*backend_, kv_options_);
    if (any_recurrent)
      state_ = std::make_unique<RecurrentState>(*backend_, RecurrentStateOptions{.layers = recurrent,
                                                                                 .n_seq = opt_.n_seq_max,
                                                                                 .snapshots_per_seq = opt_.state_snapshots,
                                                                                 .checkpoints = opt_.state_checkpoints});
    plan_arena();
    if (arch_->encoder())
      enc_ = std::make_unique<EncoderState>(*backend_, *arch_, cfg_,
                                            EncoderStateOptions{.n_seq = opt_.n_seq_max, .n_win_max = opt_.encoder_windows,
                                                                .n_tok_max = opt_.n_batch, .kv_type = opt_.kv_type,
                                                                .block_size = opt_.kv_block_size});
  }

  // What each layer's cache holds (the model says), tiled where the backend's attention wants.
  // BRISK_NO_KV_WINDOW keeps every position of sliding-window layers.
  KvCacheOptions kv_cache_options() const {
    KvCacheOptions o{.n_seq = opt_.n_seq_max, .n_ctx = opt_.n_ctx, .type = opt_.kv_type,
                     .block_size = opt_.kv_block_size, .max_step = opt_.n_batch};
    const std::vector<LayerKvNeeds> needs = arch_->kv_layers(cfg_);
    BRISK_CHECK(int32_t(needs.size()) == cfg_.n_layer, "model declares the caches of ", needs.size(), " layers, it has ",
                cfg_.n_layer);
    for (size_t il = 0; il < needs.size(); ++il) {
      const LayerKvNeeds& n = needs[il];
      o.layers.push_back({.width = n.n_head_kv * n.head_dim, .window = flags().no_kv_window ? 0 : n.window,
                          .source = n.source,
                          .tiled_k = backend_->wants_tiled_k(opt_.kv_type, n.head_dim,
                                                             cfg_.n_head / std::max(1, n.n_head_kv)),
                          .kv = layer_states_[il].kv});
    }
    o.n_layer = cfg_.n_layer;
    return o;
  }

  ~ModelContext() override {
    enc_.reset();
    for (void* p : arena_allocs_) backend_->free(p);
    backend_->free(arena_.logits);
  }

  // The config the context runs: the model's, or its MTP block's.
  static const ModelConfig& config_of(const LoadedModel& m, bool mtp) {
    if (!mtp) return m.config();
    BRISK_CHECK(m.mtp_config_ != nullptr, "model ", m.info().name.empty() ? m.config().arch : m.info().name,
                " (", m.config().arch, ") has no multi-token-prediction layers (HF mtp.* / GGUF nextn tensors)");
    return *m.mtp_config_;
  }

  void decode(const std::vector<BatchToken>& batch) override {
    std::vector<Sampler*> row_samplers = std::move(next_samplers_);  // this batch's only
    next_samplers_.clear();
    const float* hidden_in = next_hidden_in_;  // this batch's only
    next_hidden_in_ = nullptr;
    validate(batch);
    if (batch.empty()) return;
    BRISK_CHECK(!mtp_ || hidden_in != nullptr, "decode: the MTP block needs the hidden-state rows of its tokens "
                "(set_next_hidden_in)");
    const size_t n_embd = size_t(cfg_.n_embd);
    if (keep_hidden_) hidden_.assign(batch.size() * n_embd, 0.0f);
    int32_t max_len = 0;
    std::vector<int32_t> new_len(size_t(opt_.n_seq_max));
    for (int32_t s = 0; s < opt_.n_seq_max; ++s) new_len[size_t(s)] = kv_->length(s);
    for (const BatchToken& t : batch) new_len[size_t(t.seq)] = t.pos + 1;
    for (int32_t n : new_len) max_len = std::max(max_len, n);
    kv_->reserve(max_len);
    if (enc_) enc_->prepare();
    BRISK_CHECK(!(enc_ && enc_->probe_pending()) || int32_t(batch.size()) <= opt_.n_batch, "decode: a batch with a "
                "cross-attention probe must fit one forward (", batch.size(), " tokens, n_batch ", opt_.n_batch, ")");

    int32_t n_want = 0;
    for (const BatchToken& t : batch) n_want += t.want_logits ? 1 : 0;
    BRISK_CHECK(row_samplers.empty() || int32_t(row_samplers.size()) == n_want, "decode: ", row_samplers.size(),
                " device samplers for ", n_want, " wanted rows");
    const bool ids_only = device_greedy_ || device_sampler_ || !row_samplers.empty();
    if (n_want > 0 && !ids_only) logits_.assign(size_t(n_want) * size_t(cfg_.n_vocab), 0.0f);
    if (n_want > 0 && ids_only) device_ids_.assign(size_t(n_want), -1);
    int32_t logits_done = 0;

    const std::vector<size_t> cuts = snapshot_cuts(batch);
    size_t next_cut = 0;
    for (size_t start = 0, end = 0; start < batch.size(); start = end) {
      end = std::min(batch.size(), start + size_t(opt_.n_batch));
      while (next_cut < cuts.size() && cuts[next_cut] <= start) ++next_cut;
      if (next_cut < cuts.size()) end = std::min(end, cuts[next_cut]);
      const int32_t n = int32_t(end - start);
      int32_t n_out = 0;
      for (int32_t i = 0; i < n; ++i) {
        const BatchToken& t = batch[start + size_t(i)];
        ids_[size_t(i)] = t.token;
        pos_[size_t(i)] = t.pos;
        seq_[size_t(i)] = t.seq;
        if (t.want_logits) out_rows_[size_t(n_out++)] = i;
      }
      ensure_logits_rows(n_out);
      // Blocks for this chunk's positions (copy-on-write; windowed layers first release what
      // the chunk no longer attends to), tables on the device.
      std::vector<int32_t> chunk_len(size_t(opt_.n_seq_max));
      for (int32_t s = 0; s < opt_.n_seq_max; ++s) chunk_len[size_t(s)] = kv_->length(s);
      for (int32_t i = 0; i < n; ++i) chunk_len[size_t(seq_[size_t(i)])] = pos_[size_t(i)] + 1;
      kv_->prepare(chunk_len);
      if (hidden_in) backend_->copy(arena_.embd_in, hidden_in + start * n_embd, sizeof(float) * size_t(n) * n_embd);
      const bool both_ways = cfg_.bidirectional == "all";
      if (both_ways) plan_bidirectional(n);
      const ForwardBatch fb{.n_tok = n, .ids = ids_.data(), .pos = pos_.data(), .seq = seq_.data(),
                            .n_out = n_out, .out_rows = out_rows_.data(),
                            .embd_in = hidden_in ? arena_.embd_in : nullptr, .want_hidden = keep_hidden_,
                            .seq_last = both_ways ? seq_last_.data() : nullptr,
                            .window_first = both_ways ? window_first_.data() : nullptr,
                            .window_last = both_ways ? window_last_.data() : nullptr,
                            .bidir_window = cfg_.sliding_window};
      const CrossAttentionProbe* probe = enc_ ? enc_->take_probe(n) : nullptr;
      if (probe) probe_n_tok_ = n;
      const Forward f{.backend = *backend_, .cfg = cfg_, .batch = fb, .arena = arena_,
                      .k_cache = kv_->k(), .v_cache = kv_->v(), .tap = tap_ ? &tap_fn_ : nullptr,
                      .cross_k = enc_ ? &enc_->cross_k() : nullptr, .cross_v = enc_ ? &enc_->cross_v() : nullptr,
                      .cross_pos = enc_ ? enc_->cross_pos() : nullptr, .cross_probe = probe,
                      .state = state_ ? &state_->views() : nullptr, .tp = tp_.world > 1 ? &tp_ : nullptr};
      const StepInputs in{.n_tok = n, .ids = ids_.data(), .pos = pos_.data(), .seq = seq_.data(), .n_out = n_out,
                          .out_rows = out_rows_.data()};
      // A step shaped like the previous one (same sequences, output rows and KV capacity: the
      // same ops on the same buffers) may replay the backend's previous step on the new ids
      // and positions instead of issuing the forward's ops again.
      const bool same = !tap_ && !probe && !both_ways && step_shape_matches(n, n_out);
      if (!(same && backend_->replay_step(in))) {
        backend_->begin_step(in);
        arch_->forward(f);
        backend_->end_step();
        remember_step_shape(n, n_out);
        if (probe) shape_valid_ = false;
      }
      backend_->synchronize();
      if (keep_hidden_) backend_->copy(hidden_.data() + start * n_embd, arena_.hidden, sizeof(float) * size_t(n) * n_embd);
      for (int32_t i = 0; i < n; ++i) {
        const BatchToken& t = batch[start + size_t(i)];
        kv_->set_length(t.seq, std::max(kv_->length(t.seq), t.pos + 1));
      }
      take_snapshots(batch, start, end);
      if (n_out > 0 && (device_sampler_ || !row_samplers.empty())) {
        const Mat rows{.data = arena_.logits, .rows = n_out, .cols = cfg_.n_vocab};
        std::vector<DeviceSampleSpec> specs(static_cast<size_t>(n_out));
        sample_edits_.clear();
        for (int32_t j = 0; j < n_out; ++j) {
          Sampler* smp = row_samplers.empty() ? device_sampler_ : row_samplers[size_t(logits_done + j)];
          smp->device_spec(&specs[size_t(j)], &sample_edits_);
        }
        BRISK_CHECK(backend_->sample_rows(rows, specs.data(), sample_edits_.data(), int32_t(sample_edits_.size()),
                                          device_ids_.data() + logits_done),
                    "decode: device sampling failed");
        logits_done += n_out;
      } else if (n_out > 0 && device_greedy_) {
        const Mat rows{.data = arena_.logits, .rows = n_out, .cols = cfg_.n_vocab};
        BRISK_CHECK(backend_->argmax_rows(rows, device_ids_.data() + logits_done), "decode: device greedy pick failed");
        logits_done += n_out;
      } else if (n_out > 0) {
        backend_->copy(logits_.data() + size_t(logits_done) * size_t(cfg_.n_vocab), arena_.logits,
                       sizeof(float) * size_t(n_out) * size_t(cfg_.n_vocab));
        logits_done += n_out;
      }
    }
    if (n_want > 0) {
      n_logits_ = n_want;
      logits_are_ids_ = ids_only;
    }
    n_hidden_ = keep_hidden_ ? int32_t(batch.size()) : 0;
  }

  bool set_keep_hidden(bool on) override {
    if (on && !arena_.hidden) arena_.hidden = arena_alloc(cfg_.n_embd);
    keep_hidden_ = on;
    shape_valid_ = false;
    return true;
  }

  const float* hidden(int32_t i) const override {
    if (!keep_hidden_) return nullptr;
    BRISK_CHECK(i >= 0 && i < n_hidden_, "hidden(", i, "): the last batch had ", n_hidden_, " tokens");
    return hidden_.data() + size_t(i) * size_t(cfg_.n_embd);
  }

  void set_next_hidden_in(const float* rows) override {
    BRISK_CHECK(mtp_, "set_next_hidden_in: this context runs the model, not its multi-token-prediction block");
    next_hidden_in_ = rows;
  }

  // The previous step's shape (replay_step): token count, output rows, each token's sequence
  // and the KV capacity (which sizes the attention's work split).
  bool step_shape_matches(int32_t n, int32_t n_out) const {
    return shape_valid_ && n == shape_n_tok_ && n_out == shape_n_out_ && kv_->capacity() == shape_capacity_ &&
           keep_hidden_ == shape_hidden_ &&
           std::equal(seq_.begin(), seq_.begin() + n, shape_seq_.begin(), shape_seq_.end()) &&
           std::equal(out_rows_.begin(), out_rows_.begin() + n_out, shape_out_rows_.begin(), shape_out_rows_.end());
  }
  void remember_step_shape(int32_t n, int32_t n_out) {
    shape_valid_ = !tap_;
    shape_n_tok_ = n;
    shape_n_out_ = n_out;
    shape_capacity_ = kv_->capacity();
    shape_hidden_ = keep_hidden_;
    shape_seq_.assign(seq_.begin(), seq_.begin() + n);
    shape_out_rows_.assign(out_rows_.begin(), out_rows_.begin() + n_out);
  }

  bool set_device_greedy(bool on) override {
    int32_t none = 0;
    device_greedy_ = on && backend_->argmax_rows(Mat{.data = arena_.logits, .rows = 0, .cols = cfg_.n_vocab}, &none);
    return device_greedy_;
  }

  bool set_device_sampler(Sampler* sampler) override {
    device_sampler_ = nullptr;
    if (!sampler || !sampler->device_supported()) return false;
    int32_t none = 0;
    if (!backend_->sample_rows(Mat{.data = arena_.logits, .rows = 0, .cols = cfg_.n_vocab}, nullptr, nullptr, 0, &none))
      return false;
    device_sampler_ = sampler;
    return true;
  }

  bool set_next_device_samplers(std::vector<Sampler*> rows) override {
    next_samplers_.clear();
    if (rows.empty()) return false;
    for (Sampler* s : rows)
      if (!s || !s->device_supported()) return false;
    int32_t none = 0;
    if (!backend_->sample_rows(Mat{.data = arena_.logits, .rows = 0, .cols = cfg_.n_vocab}, nullptr, nullptr, 0, &none))
      return false;
    next_samplers_ = std::move(rows);
    return true;
  }

  const int32_t* device_ids() const override {
    return logits_are_ids_ && n_logits_ > 0 ? device_ids_.data() : nullptr;
  }

  const float* logits(int32_t i) const override {
    BRISK_CHECK(i >= 0 && i < n_logits_, "logits(", i, "): the last batch with logits had ", n_logits_,
                " such tokens");
    BRISK_CHECK(!logits_are_ids_, "logits(", i, "): the last batch picked its ids on the device (no logits copied)");
    return logits_.data() + size_t(i) * size_t(cfg_.n_vocab);
  }

  int32_t n_vocab() const override { return cfg_.n_vocab; }

  int32_t seq_length(int32_t seq) const override {
    check_seq(seq, "seq_length");
    return kv_->length(seq);
  }

  void seq_truncate(int32_t seq, int32_t n_keep) override {
    check_seq(seq, "seq_truncate");
    BRISK_CHECK(n_keep >= 0, "seq_truncate: negative length ", n_keep);
    if (state_) state_->truncate(seq, n_keep, kv_->length(seq));  // throws (nothing changed) when not restorable
    kv_->truncate(seq, n_keep);
  }

  void seq_copy(int32_t src, int32_t dst, int32_t n) override {
    check_seq(src, "seq_copy");
    check_seq(dst, "seq_copy");
    BRISK_CHECK(n >= 0 && n <= kv_->length(src), "seq_copy: ", n, " positions but sequence ", src, " holds ",
                kv_->length(src));
    if (src == dst) return seq_truncate(dst, n);
    if (state_) state_->copy(src, dst, n, kv_->length(src));
    kv_->copy(src, dst, n);
    if (enc_) enc_->copy(src, dst);
  }

  EncoderShape encoder_shape() const override {
    if (!enc_) return {};
    const EncoderSpec& s = enc_->spec();
    return {.n_frames = s.n_frames, .n_features = s.n_features, .n_pos = s.n_pos};
  }

  void encode(const std::vector<EncoderInput>& inputs) override {
    BRISK_CHECK(enc_ != nullptr, "encode: model '", cfg_.arch, "' has no encoder");
    // The encoder's ops may grow the backend's scratch buffers that the previous decode step's
    // graph reads: the next step is issued op by op (its graph found again by its key).
    shape_valid_ = false;
    enc_->encode(inputs, tap_ ? &tap_fn_ : nullptr);
  }

  void set_cross_attention_probe(std::vector<std::pair<int32_t, int32_t>> heads) override {
    BRISK_CHECK(enc_ != nullptr, "cross-attention probe: model '", cfg_.arch, "' has no encoder");
    enc_->set_probe(std::move(heads));
  }

  const float* cross_attention_probe(int32_t i) const override {
    return enc_ ? enc_->probe_result(i, probe_n_tok_) : nullptr;
  }

  int32_t seq_restorable(int32_t seq, int32_t n) const override {
    check_seq(seq, "seq_restorable");
    const int32_t len = kv_->length(seq);
    return state_ ? state_->restorable(seq, std::max(0, n), len) : std::max(0, std::min(n, len));
  }

  bool seq_checkpoint(int32_t seq) override {
    check_seq(seq, "seq_checkpoint");
    return !state_ || state_->checkpoint(seq, kv_->length(seq));
  }

  int32_t state_snapshots() const override { return state_ ? state_->n_snapshots() : 0; }

  const ContextOptions& options() const override { return opt_; }

  void set_tap(TapFn tap) override {
    tap_ = std::move(tap);
    tap_fn_ = [this](const std::string& name, int layer, const Mat& m) {
      // Rows are compacted (and brought to host memory) through the backend.
      if (m.row_stride() == m.cols && backend_->name() == "cpu") {
        tap_(name, layer, m.data, m.rows, m.cols);
        return;
      }
      std::vector<float> dense(size_t(m.rows * m.cols));
      for (int64_t r = 0; r < m.rows; ++r)
        backend_->copy(dense.data() + size_t(r * m.cols), m.row(r), sizeof(float) * size_t(m.cols));
      tap_(name, layer, dense.data(), m.rows, m.cols);
    };
  }

 private:
  // Snapshots of recurrent state: each sequence of the batch is snapshotted at the last multiple
  // of the interval its tokens reach, so a forward must end there. Returns the batch indices
  // where a forward ends for that (sorted; the end of a sequence's run needs no cut).
  std::vector<size_t> snapshot_cuts(const std::vector<BatchToken>& batch) const {
    std::vector<size_t> cuts;
    const int32_t every = opt_.state_snapshot_interval;
    if (!state_ || every <= 0 || opt_.state_snapshots == 0) return cuts;
    std::vector<int32_t> last(size_t(opt_.n_seq_max), -1);  // boundary position per sequence
    for (const BatchToken& t : batch)
      if ((t.pos + 1) % every == 0) last[size_t(t.seq)] = t.pos + 1;
    for (size_t i = 0; i < batch.size(); ++i) {
      const BatchToken& t = batch[i];
      if (t.pos + 1 != last[size_t(t.seq)]) continue;
      bool more = false;  // later tokens of the same sequence in this batch
      for (size_t j = i + 1; j < batch.size() && !more; ++j) more = batch[j].seq == t.seq;
      if (more) cuts.push_back(i + 1);
    }
    return cuts;
  }

  // After the forward of batch[start, end): snapshots of the sequences whose length is now a
  // multiple of the interval; the one of a sequence with several tokens in the batch (a prompt,
  // or a chunk of one) is pinned (RecurrentState's retention keeps it).
  void take_snapshots(const std::vector<BatchToken>& batch, size_t start, size_t end) {
    const int32_t every = opt_.state_snapshot_interval;
    if (!state_ || every <= 0 || opt_.state_snapshots == 0) return;
    std::vector<int32_t> count(size_t(opt_.n_seq_max), 0);
    for (const BatchToken& t : batch) ++count[size_t(t.seq)];
    std::vector<bool> done(size_t(opt_.n_seq_max), false);
    for (size_t i = start; i < end; ++i) {
      const int32_t s = batch[i].seq, len = kv_->length(s);
      if (done[size_t(s)] || len % every != 0 || batch[i].pos + 1 != len) continue;
      done[size_t(s)] = true;
      state_->snapshot(s, len, count[size_t(s)] > 1);
    }
  }

  void check_seq(int32_t seq, const char* what) const {
    BRISK_CHECK(seq >= 0 && seq < opt_.n_seq_max, what, ": sequence ", seq, " out of range [0, ",
                opt_.n_seq_max, ")");
  }

  void validate(const std::vector<BatchToken>& batch) const {
    std::vector<int32_t> next(size_t(opt_.n_seq_max));
    for (int32_t s = 0; s < opt_.n_seq_max; ++s) next[size_t(s)] = kv_->length(s);
    for (size_t i = 0; i < batch.size(); ++i) {
      const BatchToken& t = batch[i];
      BRISK_CHECK(t.token >= 0 && t.token < cfg_.n_vocab, "batch token ", i, ": id ", t.token,
                  " out of range [0, ", cfg_.n_vocab, ")");
      BRISK_CHECK(t.seq >= 0 && t.seq < opt_.n_seq_max, "batch token ", i, ": sequence ", t.seq,
                  " out of range [0, ", opt_.n_seq_max, ")");
      BRISK_CHECK(t.pos == next[size_t(t.seq)], "batch token ", i, ": position ", t.pos, " of sequence ",
                  t.seq, " must be its next position ", next[size_t(t.seq)]);
      BRISK_CHECK(t.pos < opt_.n_ctx, "batch token ", i, ": position ", t.pos,
                  " exceeds the context size ", opt_.n_ctx);
      BRISK_CHECK(!enc_ || enc_->holds(t.seq), "batch token ", i, ": sequence ", t.seq,
                  " holds no encoder output (call encode first)");
      ++next[size_t(t.seq)];
    }
    if (cfg_.bidirectional == "all") {
      // Every token sees the whole of its sequence: each one whole in one forward, from position 0.
      BRISK_CHECK(int32_t(batch.size()) <= opt_.n_batch, "decode: a bidirectional model (an embedding model's "
                  "decoder) runs each batch in one forward: ", batch.size(), " tokens, n_batch ", opt_.n_batch);
      for (const BatchToken& t : batch)
        BRISK_CHECK(kv_->length(t.seq) == 0, "decode: sequence ", t.seq, " of a bidirectional model already holds ",
                    kv_->length(t.seq), " positions: inputs run whole, once");
    }
  }

  // ForwardBatch's bidirectional rows of tokens [0, n) of ids_ / pos_ / seq_ (their sequences
  // whole in the batch).
  void plan_bidirectional(int32_t n) {
    std::vector<int32_t> last(size_t(opt_.n_seq_max), 0);
    for (int32_t i = 0; i < n; ++i) last[size_t(seq_[size_t(i)])] = std::max(last[size_t(seq_[size_t(i)])], pos_[size_t(i)]);
    const int32_t half = cfg_.sliding_window / 2;
    seq_last_.resize(size_t(n));
    window_first_.resize(size_t(n));
    window_last_.resize(size_t(n));
    for (int32_t i = 0; i < n; ++i) {
      const int32_t p = pos_[size_t(i)], l = last[size_t(seq_[size_t(i)])];
      seq_last_[size_t(i)] = l;
      window_first_[size_t(i)] = std::max(0, p - half);
      window_last_[size_t(i)] = std::min(l, p + half);
    }
  }

  // On a device backend: weights + KV cache pool at n_ctx + activations against the free device
  // memory, printed before anything is allocated or uploaded; refuses when it does not fit.
  // On the CPU the same sums are logged at info level (the pool is committed as it is used).
  void plan_device_memory() {
    size_t free_b = 0, total_b = 0;
    const bool device = backend_->memory_info(&free_b, &total_b);
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const double weights = mtp_ ? 0.0 : double(model_->weights_->total_bytes());  // the MTP block shares them
    // The paged pools at their largest (windowed layers: their window) and the block tables.
    const double kv = double(KvCache::plan_bytes(kv_options_));
    const std::string kv_layout = KvCache::plan_summary(kv_options_);
    double state_floats = 0.0;  // recurrent state of one sequence, all layers
    for (const LayerState& l : layer_states_)
      for (int64_t n : l.recurrent) state_floats += double(n);
    // Recurrent state: every sequence's live state and its snapshots.
    const double state_slots = double(1 + opt_.state_snapshots + (opt_.state_checkpoints ? 1 : 0));
    const double state = 4.0 * state_floats * double(opt_.n_seq_max) * state_slots;
    const double rows = double(opt_.n_batch);
    const double n_ff = double(cfg_.max_n_ff()), q_width = double(cfg_.max_q_width());
    const double widest = std::max({n_ff, double(cfg_.n_embd), q_width});
    // Mixture of experts: every (token, expert) pair's rows (gathered input and output, gate and
    // up outputs, as floats, and their quantized copies).
    const double moe = cfg_.n_expert > 0 ? 5.0 * rows * cfg_.n_expert_used * (2.0 * cfg_.n_embd + 2.0 * cfg_.n_ff_exp) : 0.0;
    const double per_layer = 2.0 * double(cfg_.n_layer + 1) * cfg_.n_embd_per_layer;
    // Arena + logits rows + the matmul's activation scratch + a reserve for the runtime.
    double extra = 0.0;
    for (int64_t w : arch_->extra_arena_widths()) extra += double(w);
    const double act = 4.0 * rows * (5.0 * cfg_.n_embd + 2.0 * q_width + 2.0 * cfg_.max_kv_width() + 2.0 * n_ff + per_layer + extra) +
                       4.0 * rows * cfg_.n_vocab + 5.0 * rows * widest + moe + (device ? 256.0 * 1024 * 1024 : 0.0);
    const double need = weights + kv + state + act;
    const std::string state_part =
        state > 0.0 ? str_cat(" + recurrent state ", fmt_gib(state / gib), " GiB (", opt_.n_seq_max, " seq x ",
                              int32_t(state_slots), " slots)")
                    : std::string();
    if (!device) {
      // Nothing is refused on the CPU: the sums are a detail for BRISK_LOG=info (run --verbose).
      if (log_level() <= LogLevel::info)
        log_write(LogLevel::info, str_cat(backend_->name(), " memory: weights ", fmt_gib(weights / gib), " GiB + KV cache up to ",
                                          fmt_gib(kv / gib), " GiB (n_ctx ", opt_.n_ctx, ", ", opt_.n_seq_max, " seq: ",
                                          kv_layout, "; committed as used)", state_part, " + activations ",
                                          fmt_gib(act / gib), " GiB"));
      return;
    }
    const std::string plan =
        str_cat(backend_->name(), " memory plan: weights ", fmt_gib(weights / gib), " GiB + KV cache ", fmt_gib(kv / gib),
                " GiB (n_ctx ", opt_.n_ctx, ", ", opt_.n_seq_max, " seq: ", kv_layout, ")", state_part,
                " + activations ", fmt_gib(act / gib), " = ", fmt_gib(need / gib), " GiB; free ",
                fmt_gib(double(free_b) / gib), " of ", fmt_gib(double(total_b) / gib), " GiB");
    BRISK_CHECK(need <= double(free_b), plan, ": does not fit (lower --ctx or --parallel, use a smaller quant, or --device cpu)");
    if (log_level() <= LogLevel::warn) log_write(LogLevel::info, plan);
  }
  static std::string fmt_gib(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
  }

  float* arena_alloc(int64_t cols) {
    void* p = backend_->alloc(sizeof(float) * size_t(arena_.n_max) * size_t(cols));
    arena_allocs_.push_back(p);
    return static_cast<float*>(p);
  }

  void plan_arena() {
    arena_.n_max = opt_.n_batch;
    arena_.x = arena_alloc(cfg_.n_embd);
    arena_.h = arena_alloc(cfg_.n_embd);
    arena_.t = arena_alloc(cfg_.n_embd);
    arena_.t2 = arena_alloc(cfg_.n_embd);
    arena_.q = arena_alloc(cfg_.max_q_width());
    arena_.k = arena_alloc(cfg_.max_kv_width());
    arena_.v = arena_alloc(cfg_.max_kv_width());
    arena_.attn = arena_alloc(cfg_.max_q_width());
    arena_.gate = arena_alloc(std::max(cfg_.max_n_ff(), cfg_.n_expert));  // also the router logits
    arena_.up = arena_alloc(cfg_.max_n_ff());
    arena_.out = arena_alloc(cfg_.n_embd);
    if (mtp_) arena_.embd_in = arena_alloc(cfg_.n_embd);
    if (cfg_.n_embd_per_layer > 0) {
      arena_.per_layer = arena_alloc(int64_t(cfg_.n_layer) * cfg_.n_embd_per_layer);
      arena_.per_layer_tok = arena_alloc(int64_t(cfg_.n_layer) * cfg_.n_embd_per_layer);
      arena_.per_layer_gate = arena_alloc(cfg_.n_embd_per_layer);
    }
    for (int64_t w : arch_->extra_arena_widths()) {
      BRISK_CHECK(w > 0 && w <= (int64_t(1) << 24), "model asks for an activation buffer of ", w, " columns");
      arena_.extra.push_back(arena_alloc(w));
    }
    ids_.assign(size_t(arena_.n_max), 0);
    pos_.assign(size_t(arena_.n_max), 0);
    seq_.assign(size_t(arena_.n_max), 0);
    out_rows_.assign(size_t(arena_.n_max), 0);
    ensure_logits_rows(1);
  }

  // Logit rows grow on demand (a full prompt batch rarely wants them all); decode steps that
  // stay within the planned rows allocate nothing.
  void ensure_logits_rows(int32_t n) {
    if (n <= arena_.n_logits_max) return;
    backend_->free(arena_.logits);
    arena_.logits = static_cast<float*>(backend_->alloc(sizeof(float) * size_t(n) * size_t(cfg_.n_vocab)));
    arena_.n_logits_max = n;
  }

  std::shared_ptr<const LoadedModel> model_;
  ContextOptions opt_;
  const ModelConfig& cfg_;
  bool mtp_ = false;                 // runs the model's MTP block (create_mtp)
  TpRank tp_;                        // tensor parallelism: this rank of its group
  // Bidirectional forwards (ForwardBatch::seq_last ...): [n_batch] each.
  std::vector<int32_t> seq_last_, window_first_, window_last_;
  bool keep_hidden_ = false;         // set_keep_hidden
  std::vector<float> hidden_;        // [n_hidden, n_embd] the last batch's final-normed rows
  int32_t n_hidden_ = 0;
  const float* next_hidden_in_ = nullptr;  // set_next_hidden_in: [next batch, n_embd], host
  std::unique_ptr<Backend> backend_;
  KvCacheOptions kv_options_;
  std::vector<LayerState> layer_states_;   // [n_layer] as the model declares them
  const ArchModel* arch_ = nullptr;  // the model's forward over weights laid out for backend_
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<RecurrentState> state_;  // layers with recurrent state; nullptr: none
  ForwardArena arena_;
  std::vector<void*> arena_allocs_;
  std::vector<int32_t> ids_, pos_, seq_, out_rows_;
  bool shape_valid_ = false;  // the previous step's shape (step_shape_matches)
  int32_t shape_n_tok_ = 0, shape_n_out_ = 0, shape_capacity_ = 0;
  bool shape_hidden_ = false;
  std::vector<int32_t> shape_seq_, shape_out_rows_;
  std::vector<float> logits_;  // [n_logits, n_vocab]
  int32_t n_logits_ = 0;
  bool device_greedy_ = false;   // set_device_greedy
  Sampler* device_sampler_ = nullptr;  // set_device_sampler
  std::vector<Sampler*> next_samplers_;  // set_next_device_samplers: [wanted rows of the next batch]
  bool logits_are_ids_ = false;  // the last batch with wanted rows kept ids (device_ids_), not logits_
  std::vector<int32_t> device_ids_;  // [n_logits]
  std::vector<DeviceSampleEdit> sample_edits_;  // edits of the rows being sampled on the device
  TapFn tap_;
  brisk::TapFn tap_fn_;
  std::unique_ptr<EncoderState> enc_;  // encoder-decoder models: cross-attention state, encoder arena
  int32_t probe_n_tok_ = 0;            // tokens of the forward that recorded the probe
};

}  // namespace

std::unique_ptr<Context> Context::create(std::shared_ptr<const Model> model, const ContextOptions& options) {
  BRISK_CHECK(model != nullptr, "Context::create: no model");
  auto loaded = std::dynamic_pointer_cast<const LoadedModel>(model);
  BRISK_CHECK(loaded != nullptr, "Context::create: model was not loaded by Model::load");
  if (tp_requested(options)) return tp_context_create(std::move(loaded), options);
  return std::make_unique<ModelContext>(std::move(loaded), options, nullptr);
}

std::unique_ptr<Context> context_create_rank(std::shared_ptr<const LoadedModel> shard, const ContextOptions& options,
                                             std::unique_ptr<Backend> backend, const TpRank& tp) {
  BRISK_CHECK(shard != nullptr && backend != nullptr, "context_create_rank: no model or no backend");
  return std::make_unique<ModelContext>(std::move(shard), options, std::move(backend), false, tp);
}

std::unique_ptr<Context> Context::create_mtp(std::shared_ptr<const Model> model, const ContextOptions& options) {
  BRISK_CHECK(model != nullptr, "Context::create_mtp: no model");
  BRISK_CHECK(!tp_requested(options), "speculative decoding with the multi-token-prediction block does not run "
              "tensor-parallel (--tp / a device list)");
  auto loaded = std::dynamic_pointer_cast<const LoadedModel>(model);
  BRISK_CHECK(loaded != nullptr, "Context::create_mtp: model was not loaded by Model::load");
  return std::make_unique<ModelContext>(std::move(loaded), options, nullptr, true);
}

std::unique_ptr<Context> context_create_on(std::shared_ptr<const Model> model, const ContextOptions& options,
                                           std::unique_ptr<Backend> backend) {
  BRISK_CHECK(model != nullptr && backend != nullptr, "context_create_on: no model or no backend");
  auto loaded = std::dynamic_pointer_cast<const LoadedModel>(model);
  BRISK_CHECK(loaded != nullptr, "context_create_on: model was not loaded by Model::load");
  return std::make_unique<ModelContext>(std::move(loaded), options, std::move(backend));
}

}  // namespace brisk
