// The CUDA backend's op entry points other than matmul and MoE (cuda_backend_impl.h): each checks
// its arguments, resolves host arrays and constants to device memory, adds its arguments to the
// step's launch key and queues its launch, fused with the launch queued before it where the
// kernels allow (rope + KV store + attention, residual add + RMS norm); and sampling.
#include "backend/cuda/cuda_backend_impl.h"

namespace brisk::cuda {

bool CudaBackend::argmax_rows(const Mat& x, int32_t* ids) {
  BRISK_CHECK(x.data != nullptr && x.rows >= 0 && x.cols > 0 && x.row_stride() >= x.cols && ids != nullptr,
              "argmax_rows: bad logits [", x.rows, ", ", x.cols, "]");
  if (x.rows == 0) return true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    BRISK_CHECK(is_device(x.data) && is_device(x.row(x.rows - 1) + x.cols - 1), "argmax_rows: logits are not ",
                "device memory of this backend");
  }
  auto* dev = static_cast<int32_t*>(scratch(argmax_, sizeof(int32_t) * size_t(x.rows), "argmax_rows"));
  enqueue("argmax_rows", [x, dev](cudaStream_t s) { return cuda::launch_argmax_rows(x, dev, s); });
  copy(ids, dev, sizeof(int32_t) * size_t(x.rows));
  return true;
}

bool CudaBackend::sample_rows(const Mat& x, const DeviceSampleSpec* specs, const DeviceSampleEdit* edits, int32_t n_edits,
               int32_t* ids) {
  BRISK_CHECK(x.data != nullptr && x.rows >= 0 && x.cols > 0 && x.row_stride() >= x.cols && x.cols < INT32_MAX,
              "sample_rows: bad logits [", x.rows, ", ", x.cols, "]");
  if (flags().no_device_sampling) return false;
  if (x.rows == 0) return true;
  BRISK_CHECK(specs != nullptr && ids != nullptr && n_edits >= 0 && (n_edits == 0 || edits != nullptr),
              "sample_rows: missing specs, edits or ids");
  for (int64_t r = 0; r < x.rows; ++r) {
    const DeviceSampleSpec& sp = specs[r];
    const bool greedy = !(sp.temperature > 0.0f) || !std::isfinite(1.0f / sp.temperature);
    BRISK_CHECK(greedy || (sp.top_k >= 1 && sp.top_k <= kDeviceSampleMaxTopK), "sample_rows: top_k ", sp.top_k,
                " outside 1..", kDeviceSampleMaxTopK);
    BRISK_CHECK(sp.edit_offset >= 0 && sp.n_edits >= 0 && int64_t(sp.edit_offset) + sp.n_edits <= n_edits,
                "sample_rows: row ", r, " edits outside the ", n_edits, " given");
    BRISK_CHECK(sp.u >= 0.0 && sp.u < 1.0, "sample_rows: draw ", sp.u, " outside [0, 1)");
    for (int32_t e = 0; e < sp.n_edits; ++e)
      BRISK_CHECK(edits[sp.edit_offset + e].token >= 0 && edits[sp.edit_offset + e].token < x.cols,
                  "sample_rows: edit token ", edits[sp.edit_offset + e].token, " outside the vocabulary");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    BRISK_CHECK(is_device(x.data) && is_device(x.row(x.rows - 1) + x.cols - 1), "sample_rows: logits are not ",
                "device memory of this backend");
  }
  // One buffer: ids, specs, edits, then the working rows.
  const size_t ids_bytes = align_up(sizeof(int32_t) * size_t(x.rows));
  const size_t spec_bytes = align_up(sizeof(DeviceSampleSpec) * size_t(x.rows));
  const size_t edit_bytes = align_up(sizeof(DeviceSampleEdit) * size_t(n_edits));
  const size_t work_bytes = sizeof(float) * size_t(x.rows) * size_t(x.cols);
  auto* base = static_cast<uint8_t*>(scratch(sample_, ids_bytes + spec_bytes + edit_bytes + work_bytes, "sample_rows"));
  auto* dev_ids = reinterpret_cast<int32_t*>(base);
  auto* dev_specs = reinterpret_cast<DeviceSampleSpec*>(base + ids_bytes);
  auto* dev_edits = reinterpret_cast<DeviceSampleEdit*>(base + ids_bytes + spec_bytes);
  auto* work = reinterpret_cast<float*>(base + ids_bytes + spec_bytes + edit_bytes);
  copy(dev_specs, specs, sizeof(DeviceSampleSpec) * size_t(x.rows));
  if (n_edits > 0) copy(dev_edits, edits, sizeof(DeviceSampleEdit) * size_t(n_edits));
  enqueue("sample_rows", [x, dev_specs, dev_edits, work, dev_ids](cudaStream_t s) {
    return cuda::launch_sample_rows(x, dev_specs, dev_edits, work, dev_ids, s);
  });
  copy(ids, dev_ids, sizeof(int32_t) * size_t(x.rows));
  return true;
}

void CudaBackend::rms_norm(const RmsNormArgs& a) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  BRISK_CHECK(group > 0 && a.x.cols % group == 0, "rms_norm: ", a.x.cols, " columns are not a multiple of group ",
              group);
  check_mat(a.out, a.x.rows, a.x.cols, "rms_norm", "out");
  RmsNormArgs d = a;
  d.weight = a.weight ? device_floats(a.weight, group, "rms_norm weight") : nullptr;
  key_.add(uint64_t(2));
  key_.add(d.out);
  key_.add(d.x);
  key_.add(d.weight);
  key_.add(uint64_t(d.group));
  key_.add(d.eps);
  const bool deferred = in_step_ && !step_eager_;
  // The residual add queued just before, producing x: one launch for both.
  const bool after_add = deferred && group == a.x.cols && producer_.kind == 4 &&
                         producer_.index + 1 == launches_.size() && same_mat(producer_.add.out, a.x);
  const Producer prev = producer_;
  forget_quant();
  if (after_add) {
    const AddArgs pa = prev.add;
    unsigned* bar = norm_barrier();
    const bool wc = constant_floats(d.weight);
    launches_[prev.index] = [pa, d, bar, wc](cudaStream_t s) {
      return cuda::launch_add_rms_norm(&pa, d, cuda::ActRound::none, nullptr, s, bar, wc);
    };
    key_.add(uint64_t(105));
    producer_ = Producer{.kind = 3, .norm = d, .gated = {}, .add = pa, .index = prev.index, .out = d.out};
    return;
  }
  const bool wc = constant_floats(d.weight);
  // Norms over head groups right after one another (a layer's q / k / v norms), each reading
  // nothing another writes: one launch for all.
  // A norm over several heads starts such a launch; one over a single head (an explicit group,
  // a layer with one KV head) joins one (alone, it stays a whole-row producer for a matmul).
  const bool parts = deferred && !flags().no_cuda_norm_merge && cuda::rms_norm_parts_supported(d);
  if (parts && (group < a.x.cols || a.group > 0) && prev.kind == 9 && prev.index + 1 == launches_.size() &&
      prev.n_norms < cuda::kMaxNormParts && prev.norms[0].group == d.group) {
    bool independent = true;
    for (int i = 0; i < prev.n_norms; ++i) {
      const RmsNormArgs& o = prev.norms[size_t(i)];
      independent = independent && !overlaps(d.x, o.out) && !overlaps(d.out, o.x) && !overlaps(d.out, o.out);
    }
    if (independent) {
      Producer pr = prev;
      pr.norms[size_t(pr.n_norms)] = d;
      pr.norms_wc[size_t(pr.n_norms)] = wc;
      ++pr.n_norms;
      launches_[pr.index] = [ns = pr.norms, wcs = pr.norms_wc, n = pr.n_norms](cudaStream_t s) {
        return cuda::launch_rms_norm_parts(ns.data(), wcs.data(), n, s);
      };
      names_[pr.index] = "rms_norm (head groups of several tensors)";
      key_.add(uint64_t(112));
      producer_ = pr;
      return;
    }
  }
  unsigned* bar = norm_barrier();
  enqueue("rms_norm", [d, bar, wc](cudaStream_t s) { return cuda::launch_rms_norm(d, s, bar, wc); });
  if (deferred && group == a.x.cols)
    producer_ = Producer{.kind = 1, .norm = d, .gated = {}, .add = {}, .index = launches_.size() - 1, .out = d.out};
  if (parts && group < a.x.cols) {
    Producer& pr = start_producer(9, d.out);
    pr.norms[0] = d;
    pr.norms_wc[0] = wc;
    pr.n_norms = 1;
  }
}

void CudaBackend::rope(const RopeArgs& a) {
  BRISK_CHECK(a.table && a.table->n_rot <= a.head_dim && a.table->n_rot % 2 == 0 &&
                  a.table->inv_freq.size() == size_t(a.table->n_rot / 2),
              "rope: bad rotary table for head_dim ", a.head_dim);
  check_mat(a.x, a.x.rows, int64_t(a.n_head) * a.head_dim, "rope", "x");
  const float* inv = a.table->n_rot > 0
                         ? device_floats(a.table->inv_freq.data(), a.table->n_rot / 2, "rope table")
                         : nullptr;
  RopeArgs d = a;
  d.pos = stage(a.pos, a.x.rows, "rope pos");
  key_.add(uint64_t(3));
  key_.add(d.x);
  key_.add(d.pos);
  key_.add(uint64_t(d.n_head));
  key_.add(uint64_t(d.head_dim));
  key_.add(inv);
  key_.add(uint64_t(a.table->n_rot));
  key_.add(a.table->attn_factor);
  key_.add(uint64_t(a.table->neox));
  // The table is read on the host at launch: keep a copy of its scalars.
  const RopeTable table{.n_rot = a.table->n_rot, .inv_freq = {}, .attn_factor = a.table->attn_factor,
                        .neox = a.table->neox};
  const bool deferred = in_step_ && !step_eager_;
  const Producer prev = producer_;
  forget_quant();
  // The rope of q queued just before with the same positions and table: one launch for both.
  if (deferred && prev.kind == 5 && prev.index + 1 == launches_.size() && prev.rope.pos == d.pos &&
      prev.rope_inv == inv && prev.rope.head_dim == d.head_dim && prev.rope.x.rows == d.x.rows &&
      prev.rope_table.n_rot == table.n_rot && prev.rope_table.attn_factor == table.attn_factor &&
      prev.rope_table.neox == table.neox && !overlaps(prev.rope.x, d.x)) {
    const RopeArgs rq = prev.rope;
    launches_[prev.index] = [rq, d, inv, table](cudaStream_t s) {
      RopeArgs q2 = rq, k2 = d;
      q2.table = &table;
      k2.table = &table;
      return cuda::launch_rope_qk_store(&q2, k2, nullptr, inv, s);
    };
    key_.add(uint64_t(107));
    producer_ = Producer{.kind = 6, .norm = {}, .gated = {}, .add = {}, .index = prev.index, .out = d.x,
                         .rope = d, .rope_q = rq, .rope_inv = inv, .rope_table = table};
    return;
  }
  enqueue("rope", [d, inv, table](cudaStream_t s) {
    RopeArgs r = d;
    r.table = &table;
    return cuda::launch_rope(r, inv, s);
  });
  if (deferred)
    producer_ = Producer{.kind = 5, .norm = {}, .gated = {}, .add = {}, .index = launches_.size() - 1, .out = d.x,
                         .rope = d, .rope_q = {}, .rope_inv = inv, .rope_table = table};
}

void CudaBackend::kv_store(const KvStoreArgs& a) {
  check_mat(a.k, a.k.rows, a.k_cache.width, "kv_store", "k");
  check_mat(a.v, a.k.rows, a.v_cache.width, "kv_store", "v");
  check_kv(a.k_cache, "kv_store");
  check_kv(a.v_cache, "kv_store");
  check_kv_pair(a.k_cache, a.v_cache, "kv_store");
  KvStoreArgs d = a;
  d.seq = stage(a.seq, a.k.rows, "kv_store seq");
  d.pos = stage(a.pos, a.k.rows, "kv_store pos");
  key_.add(uint64_t(4));
  key_.add(d.k);
  key_.add(d.v);
  key_.add(d.k_cache);
  key_.add(d.v_cache);
  key_.add(d.seq);
  key_.add(d.pos);
  const Producer prev = producer_;
  forget_quant();
  // The rope of k (and q) queued just before, on these positions: one launch for all.
  if (in_step_ && !step_eager_ && (prev.kind == 5 || prev.kind == 6) && prev.index + 1 == launches_.size() &&
      d.k_cache.type != QuantType::Q8_0 &&  // Q8_0 blocks are written whole, by launch_kv_store
      same_mat(prev.rope.x, d.k) && prev.rope.pos == d.pos &&
      int64_t(prev.rope.n_head) * prev.rope.head_dim == d.k_cache.width && !overlaps(d.v, d.k)) {
    const bool has_q = prev.kind == 6;
    const RopeArgs rq = prev.rope_q, rk = prev.rope;
    const float* inv = prev.rope_inv;
    const RopeTable table = prev.rope_table;
    launches_[prev.index] = [has_q, rq, rk, inv, table, d](cudaStream_t s) {
      RopeArgs q2 = rq, k2 = rk;
      q2.table = &table;
      k2.table = &table;
      return cuda::launch_rope_qk_store(has_q ? &q2 : nullptr, k2, &d, inv, s);
    };
    key_.add(uint64_t(108));
    if (has_q)
      producer_ = Producer{.kind = 7, .norm = {}, .gated = {}, .add = {}, .index = prev.index, .out = d.k,
                           .rope = rk, .rope_q = rq, .rope_inv = inv, .rope_table = table, .store = d};
    return;
  }
  enqueue("kv_store", [d](cudaStream_t s) { return cuda::launch_kv_store(d, s); });
}

void CudaBackend::attention(const AttentionArgs& a) {
  BRISK_CHECK(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0, "attention: ", a.n_head,
              " heads are not a multiple of ", a.n_head_kv, " KV heads");
  BRISK_CHECK(a.head_dim > 0 && a.head_dim <= 512, "attention: head_dim ", a.head_dim,
              " outside [1, 512] on CUDA");
  BRISK_CHECK(a.q.rows <= 65535, "attention: ", a.q.rows, " tokens in one call (at most 65535 on CUDA)");
  BRISK_CHECK(a.first == nullptr || a.window == 0, "attention: a bidirectional forward's first positions come with "
              "window 0 (the window is in them), not ", a.window);
  check_mat(a.q, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention", "q");
  check_mat(a.out, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention", "out");
  BRISK_CHECK(a.k_cache.width == int64_t(a.n_head_kv) * a.head_dim && a.v_cache.width == a.k_cache.width,
              "attention: KV cache width does not match the heads");
  check_kv(a.k_cache, "attention");
  check_kv(a.v_cache, "attention");
  check_kv_pair(a.k_cache, a.v_cache, "attention");
  BRISK_CHECK(a.k_cache.type != QuantType::Q8_0 || a.head_dim % 32 == 0, "attention: head_dim ", a.head_dim,
              " with a q8_0 KV cache (CUDA needs a multiple of 32: heads start on whole blocks)");
  AttentionArgs d = a;
  const bool flash = use_flash_prefill(a);
  d.seq = stage(a.seq, a.q.rows, "attention seq");
  d.pos = stage(a.pos, a.q.rows, "attention pos");
  if (a.first) {
    // Bidirectional forwards (an embedding model's decoder): token t reads [first[t], pos[t]].
    bool host;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      host = !is_device(a.first) && !is_device(a.pos);
    }
    if (host)
      for (int64_t t = 0; t < a.q.rows; ++t)
        BRISK_CHECK(a.first[t] >= 0 && a.first[t] <= a.pos[t], "attention: token ", t, " attends to positions [",
                    a.first[t], ", ", a.pos[t], "]");
    d.first = stage(a.first, a.q.rows, "attention first");
  }
  if (flash) {
    forget_quant();
    enqueue("attention (prefill)", [d](cudaStream_t s) { return cuda::launch_prefill_attention(d, s); });
    return;
  }
  const size_t sf = cuda::attention_scratch_floats(d);
  float* part = sf ? static_cast<float*>(scratch(attn_, sizeof(float) * sf, "attention")) : nullptr;
  const size_t nc = cuda::attention_counter_ints(d);
  int* cnt = nc ? static_cast<int*>(scratch(attn_cnt_, sizeof(int) * nc, "attention")) : nullptr;
  key_.add(uint64_t(5));
  key_.add(d.out);
  key_.add(d.q);
  key_.add(d.k_cache);
  key_.add(d.v_cache);
  key_.add(d.seq);
  key_.add(d.pos);
  key_.add(uint64_t(d.n_head));
  key_.add(uint64_t(d.n_head_kv));
  key_.add(uint64_t(d.head_dim));
  key_.add(d.scale);
  key_.add(uint64_t(d.window));
  key_.add(d.softcap);
  key_.add(d.first);
  key_.add(part);
  key_.add(cnt);
  const Producer prev = producer_;
  forget_quant();
  // The ropes of q and k and the KV store queued just before: inside the attention launch.
  if (in_step_ && !step_eager_ && !flags().no_cuda_attn_rope && prev.kind == 7 &&
      prev.index + 1 == launches_.size() && (part == nullptr || cnt != nullptr) &&
      same_mat(prev.rope_q.x, d.q) && prev.rope_q.n_head == d.n_head && prev.rope.n_head == d.n_head_kv &&
      prev.rope.head_dim == d.head_dim && prev.rope_q.head_dim == d.head_dim && prev.store.pos == d.pos &&
      prev.store.seq == d.seq && same_kv(prev.store.k_cache, d.k_cache) && same_kv(prev.store.v_cache, d.v_cache) &&
      prev.store.k.cols == d.k_cache.width && prev.store.v.cols == d.v_cache.width &&
      !overlaps(d.out, d.q) && !overlaps(d.out, prev.store.k) && !overlaps(d.out, prev.store.v) &&
      !overlaps(d.q, prev.store.k) && !overlaps(d.q, prev.store.v) && !overlaps(prev.store.k, prev.store.v) &&
      cuda::attention_rope_supported(d, prev.rope_table.n_rot)) {
    const cuda::AttentionRope rp{.k = prev.store.k.data, .k_stride = prev.store.k.row_stride(),
                                 .v = prev.store.v.data, .v_stride = prev.store.v.row_stride(),
                                 .inv_freq = prev.rope_inv, .n_rot = prev.rope_table.n_rot,
                                 .attn_factor = prev.rope_table.attn_factor, .neox = prev.rope_table.neox};
    launches_[prev.index] = [d, rp, part, cnt](cudaStream_t s) {
      return cuda::launch_attention_rope(d, &rp, part, cnt, s);
    };
    names_[prev.index] = "attention (+ rope, KV store)";
    key_.add(uint64_t(110));
    attention_producer(d, &rp, prev.index);
    return;
  }
  enqueue("attention", [d, part, cnt](cudaStream_t s) { return cuda::launch_attention(d, part, cnt, s); });
  attention_producer(d, nullptr, launches_.size() - 1);
}

void CudaBackend::attention_producer(const AttentionArgs& d, const cuda::AttentionRope* rp, size_t index) {
  if (!in_step_ || step_eager_ || !cuda::attention_quant_supported(d, cuda::ActRound::q8_0)) return;
  Producer pr;
  pr.kind = 8;
  pr.index = index;
  pr.out = d.out;
  pr.attn = d;
  if (rp) pr.attn_rope = *rp;
  pr.attn_has_rope = rp != nullptr;
  producer_ = pr;
}

void CudaBackend::gated_act(const GatedActArgs& a) {
  check_mat(a.up, a.gate.rows, a.gate.cols, "gated_act", "up");
  check_mat(a.out, a.gate.rows, a.gate.cols, "gated_act", "out");
  key_.add(uint64_t(6));
  key_.add(a.out);
  key_.add(a.gate);
  key_.add(a.up);
  key_.add(uint64_t(a.act));
  forget_quant();
  enqueue("gated_act", [a](cudaStream_t s) { return cuda::launch_gated_act(a, s); });
  if (in_step_ && !step_eager_)
    producer_ = Producer{.kind = 2, .norm = {}, .gated = a, .add = {}, .index = launches_.size() - 1, .out = a.out};
}

void CudaBackend::add(const AddArgs& a) {
  check_mat(a.b, a.a.rows, a.a.cols, "add", "b");
  check_mat(a.out, a.a.rows, a.a.cols, "add", "out");
  key_.add(uint64_t(7));
  key_.add(a.out);
  key_.add(a.a);
  key_.add(a.b);
  const GemvGroup g = gemv_;
  forget_quant();
  if (defer_add(a)) return;
  // The residual add of a decode matmul's output queued just before: in its epilogue.
  if (in_step_ && !step_eager_ && !flags().no_cuda_gemv_add && g.valid && g.n == 1 &&
      g.index + 1 == launches_.size()) {
    const MatmulArgs m = g.a[0];
    const bool is_a = same_mat(a.a, m.out), is_b = same_mat(a.b, m.out);
    const Mat res = is_b ? a.a : a.b;
    if ((is_a || is_b) && !overlaps(res, m.out) && !overlaps(a.out, m.x) && !overlaps(res, m.x) &&
        (same_mat(a.out, res) || !overlaps(a.out, res)) && (same_mat(a.out, m.out) || !overlaps(a.out, m.out))) {
      const cuda::QuantAct q = g.xq;
      const bool has_xq = g.has_xq, wc = g.wc;
      const Mat sum = a.out;
      launches_[g.index] = [m, q, has_xq, wc, res, sum](cudaStream_t s) {
        return cuda::launch_matmul_add(m, has_xq ? &q : nullptr, res, sum, s, wc);
      };
      names_[g.index] = "matmul (+ residual add)";
      key_.add(uint64_t(109));
      return;
    }
  }
  enqueue("add", [a](cudaStream_t s) { return cuda::launch_add(a, s); });
  if (in_step_ && !step_eager_)
    producer_ = Producer{.kind = 4, .norm = {}, .gated = {}, .add = a, .index = launches_.size() - 1, .out = a.out};
}

void CudaBackend::softcap(const SoftcapArgs& a) {
  BRISK_CHECK(a.cap > 0.0f, "softcap: cap must be > 0");
  key_.add(uint64_t(8));
  key_.add(a.x);
  key_.add(a.cap);
  forget_quant();
  enqueue("softcap", [a](cudaStream_t s) { return cuda::launch_softcap(a, s); });
}

void CudaBackend::scale(const ScaleArgs& a) {
  check_mat(a.out, a.x.rows, a.x.cols, "scale", "out");
  key_.add(uint64_t(14));
  key_.add(a.out);
  key_.add(a.x);
  key_.add(a.scale);
  forget_quant();
  enqueue("scale", [a](cudaStream_t s) { return cuda::launch_scale(a, s); });
}

void CudaBackend::embedding(const EmbeddingArgs& a) {
  check_mat(a.out, a.out.rows, a.table.n_in, "embedding", "out");
  BRISK_CHECK(a.table.n_in % 8 == 0, "embedding: table rows of ", a.table.n_in,
              " elements (need a multiple of 8 on CUDA)");
  EmbeddingArgs d = a;
  d.table = device_weight(a.table, "embedding");
  d.ids = stage(a.ids, a.out.rows, "embedding ids");
  key_.add(uint64_t(9));
  key_.add(d.out);
  key_.add(d.table);
  key_.add(d.ids);
  key_.add(d.scale);
  forget_quant();
  enqueue("embedding", [d](cudaStream_t s) { return cuda::launch_embedding(d, s); });
}

void CudaBackend::get_rows(const GetRowsArgs& a) {
  check_mat(a.out, a.out.rows, a.x.cols, "get_rows", "out");
  GetRowsArgs d = a;
  d.rows = stage(a.rows, a.out.rows, "get_rows rows");
  key_.add(uint64_t(10));
  key_.add(d.out);
  key_.add(d.x);
  key_.add(d.rows);
  forget_quant();
  enqueue("get_rows", [d](cudaStream_t s) { return cuda::launch_get_rows(d, s); });
}

// The tensor-core kernel sums in another order than the split kernel, so the choice depends on
// the step's shape only: a step of at most kGraphMaxTokens tokens takes the split kernel whether
// it is captured as a graph or runs launch by launch (BRISK_NO_CUDA_GRAPHS, or a step made eager
// by a changed host array), so that both give the same bits. (It once took the tensor cores
// whenever the step ran launch by launch: a 9-token Gemma 4 prompt with 64-wide full heads gave
// other logits without graphs than with them.)
bool CudaBackend::use_flash_prefill(const AttentionArgs& a) {
  if (flags().no_cuda_flash_prefill || a.first || a.q.rows <= kGemvMaxTokens || (in_step_ && a.q.rows <= kGraphMaxTokens) ||
      !cuda::prefill_attention_supported(a) || a.seq == nullptr || a.pos == nullptr)
    return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (is_device(a.seq) || is_device(a.pos)) return false;
  }
  const int32_t s0 = a.seq[0], p0 = a.pos[0];
  const int64_t n = a.q.rows;
  if (s0 < 0 || s0 >= a.k_cache.n_seq || s0 >= a.v_cache.n_seq || p0 < 0 || p0 + n > a.k_cache.capacity ||
      p0 + n > a.v_cache.capacity)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (a.seq[i] != s0 || a.pos[i] != p0 + i) return false;
  return true;
}

void CudaBackend::check_kv(const KvView& v, const char* op) const {
  BRISK_CHECK(v.type == QuantType::F16 || v.type == QuantType::BF16 || v.type == QuantType::F32 ||
                  v.type == QuantType::Q8_0,
              op, ": KV cache type ", quant_type_info(v.type).name,
              " is not supported on CUDA (use f16, bf16, f32 or q8_0)");
  BRISK_CHECK(v.data && is_device(v.data), op, ": KV cache is not device memory of this backend");
  BRISK_CHECK(v.row_bytes == size_t(quant_row_bytes(v.type, uint64_t(v.width)).value_or(0)), op,
              ": KV cache row_bytes ", v.row_bytes, " does not match width ", v.width);
  BRISK_CHECK(v.block_size >= 16 && (v.block_size & (v.block_size - 1)) == 0 && v.n_blocks > 0 &&
                  v.table_stride * int64_t(v.block_size) >= v.capacity,
              op, ": KV cache block size ", v.block_size, " or block table does not fit its capacity");
  BRISK_CHECK(is_device(static_cast<const uint8_t*>(v.data) + size_t(v.n_blocks) * size_t(v.block_size) * v.row_bytes - 1),
              op, ": KV cache pool of ", v.n_blocks, " blocks extends past its allocation");
  BRISK_CHECK(v.device_table && is_device(v.device_table) &&
                  is_device(v.device_table + v.n_seq * v.table_stride - 1),
              op, ": KV block table is not device memory of this backend");
}

void CudaBackend::check_kv_pair(const KvView& k, const KvView& v, const char* op) {
  BRISK_CHECK(k.type == v.type && k.width == v.width && k.capacity == v.capacity && k.block_size == v.block_size &&
                  k.device_table == v.device_table && k.table_stride == v.table_stride && k.n_seq == v.n_seq,
              op, ": K and V caches differ in type, shape or block table");
}

}  // namespace brisk::cuda
