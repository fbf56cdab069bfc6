// The CUDA backend's mixture-of-experts op (cuda_backend_impl.h): routing on the device, the
// experts' matmuls per (token, slot) pair for decode, grouped by expert for larger batches
// (on the device for graph steps, read back for prefill), and the weighted combine.
#include "backend/cuda/cuda_backend_impl.h"

namespace brisk::cuda {

// A shared expert of the routed experts' shapes and formats joins the decode launches as expert
// n_expert, a slot every token takes (moe_tables appends it to the address tables): the MoE
// layer then costs the four launches of the routed experts alone, instead of those plus the
// shared MLP's three, its gate's sigmoid and the add.
bool CudaBackend::moe_shared_supported(const MoeArgs& a) const {
  if (flags().no_cuda_moe_shared || !a.shared_gate || !a.shared_up || !a.shared_down || !a.gate || !a.up || !a.down)
    return false;
  const auto same = [](const Weight& s, const Weight& e) {
    return s.type == e.type && s.n_in == e.n_in && s.n_out == e.n_out;
  };
  return a.x.rows <= kGemvMaxTokens && a.n_expert >= 1 && a.n_expert < cuda::kMoeMaxExperts && a.n_used >= 1 &&
         a.n_used < cuda::kMoeMaxUsed && same(*a.shared_gate, a.gate[0]) && same(*a.shared_up, a.up[0]) &&
         same(*a.shared_down, a.down[0]) &&
         (!a.shared_logit.data || (a.shared_logit.rows == a.x.rows && a.shared_logit.cols == 1));
}

// Mixture of experts: routing, the expert matmuls of each (token, slot) pair, the gated
// activation and the weighted sum all run on the device (cuda::launch_moe_*), so a step
// never waits on the host for the experts a token chose. Activations go through each
// weight format's vec_dot_type as in matmul(); the CPU backend's roundings throughout.
void CudaBackend::moe(const MoeArgs& a) {
  const int64_t n_tok = a.x.rows, n_embd = a.x.cols;
  BRISK_CHECK(a.gate && a.up && a.down && a.n_expert > 0 && a.n_used > 0 && a.n_used <= a.n_expert, "moe: ",
              a.n_used, " of ", a.n_expert, " experts, or expert weights missing");
  BRISK_CHECK(a.n_expert <= cuda::kMoeMaxExperts && a.n_used <= cuda::kMoeMaxUsed, "moe: ", a.n_used, " of ",
              a.n_expert, " experts (CUDA takes at most ", cuda::kMoeMaxUsed, " of ", cuda::kMoeMaxExperts, ")");
  check_mat(a.x, n_tok, n_embd, "moe", "x");
  check_mat(a.logits, n_tok, a.n_expert, "moe", "logits");
  check_mat(a.out, n_tok, n_embd, "moe", "out");
  BRISK_CHECK(a.out.data != a.x.data, "moe: out must not alias x");
  const bool with_shared = a.shared_gate != nullptr;
  BRISK_CHECK(!with_shared || moe_shared_supported(a), "moe: a shared expert the CUDA backend cannot run with the "
              "routed ones (moe_shared_supported)");
  const MoeTables& tb = moe_tables(a);
  if (n_tok == 0) return;
  if (n_tok > kGemvMaxTokens && !flags().no_cuda_moe_grouped) {
    if (flags().no_cuda_moe_items || n_tok * int64_t(a.n_used) > 65535) return moe_grouped(a);
    // Up to a graph step's tokens no expert gets more than 64 rows: grouped on the device.
    if (n_tok <= kGraphMaxTokens && !flags().no_cuda_moe_device_group) return moe_grouped_device(a);
    return moe_grouped_items(a);
  }
  forget_quant();
  // With a shared expert: one more slot a token and one more expert in the tables (b).
  MoeArgs b = a;
  b.n_used = a.n_used + (with_shared ? 1 : 0);
  b.n_expert = a.n_expert + (with_shared ? 1 : 0);
  const int64_t n_ff = tb.n_ff, nk = n_tok * int64_t(b.n_used);
  BRISK_CHECK(n_tok <= 65535, "moe: ", n_tok, " tokens in one step (CUDA takes at most 65535)");
  auto* route = static_cast<uint8_t*>(scratch(moe_route_, size_t(nk) * 8, "moe"));
  auto* ids = reinterpret_cast<int32_t*>(route);
  auto* wts = reinterpret_cast<float*>(route + size_t(nk) * 4);
  auto* gu = static_cast<float*>(scratch(moe_gu_, sizeof(float) * size_t(nk) * size_t(2 * n_ff), "moe"));
  auto* dn = static_cast<float*>(scratch(moe_down_, sizeof(float) * size_t(nk) * size_t(n_embd), "moe"));
  const Mat g{.data = gu, .rows = nk, .cols = n_ff};
  const Mat u{.data = gu + size_t(nk) * size_t(n_ff), .rows = nk, .cols = n_ff};
  const Mat d{.data = dn, .rows = nk, .cols = n_embd};
  LaunchKey& k = key_;
  k.add(uint64_t(12));
  k.add(a.out);
  k.add(a.x);
  k.add(a.logits);
  k.add(tb.gate);
  k.add(route);
  k.add(gu);
  k.add(dn);
  k.add(uint64_t(b.n_used) << 32 | uint64_t(a.n_expert) << 1 | uint64_t(a.norm_topk));
  k.add(uint64_t(a.act));
  const bool fused = !flags().no_cuda_moe_fused;
  const float* esc = expert_scale(a);
  k.add(esc);
  const cuda::MoeSharedSlot shared_slot{.logit = a.shared_logit.data,
                                        .stride = a.shared_logit.data ? a.shared_logit.row_stride() : 1};
  k.add(shared_slot.logit);
  // The routing, with the gate's quantized input in the same launch where it can.
  const cuda::ActRound x_round = cuda::act_round_for(format_traits(tb.gate_host_type).vec_dot_type);
  MoeInput xin;
  if (fused && cuda::weight_takes_quantized_act(tb.gate_type) && quant_fits(x_round, n_embd)) {
    xin.xq = quant_scratch(moe_xq_, size_t(n_tok) * size_t(n_embd), "moe");
    k.add(xin.xq.q);
    const Mat logits = a.logits, x = a.x;
    const int ne = a.n_expert, nu = a.n_used;
    const bool norm = a.norm_topk;
    const cuda::QuantAct q = xin.xq;
    enqueue("moe (route + activation quantization)", [=](cudaStream_t s) {
      return cuda::launch_moe_route(logits, ne, nu, norm, ids, wts, s, x_round, &q, &x, esc,
                                    with_shared ? &shared_slot : nullptr);
    });
  } else {
    enqueue_moe_route(a, ids, wts);
    xin = moe_input(a.x, tb.gate_host_type, tb.gate_type, moe_xq_, "moe");
  }
  // gate / up of every pair on its token's row of x (one launch when they share the input),
  // then the activation, then down.
  const bool same_input = tb.up_type == tb.gate_type && tb.up_host_type == tb.gate_host_type;
  if (fused && same_input) {
    moe_matmul(tb.gate, tb.gate_type, n_embd, n_ff, b, ids, nk, false, xin, g, tb.up, &u);
  } else {
    moe_matmul(tb.gate, tb.gate_type, n_embd, n_ff, b, ids, nk, false, xin, g);
    const MoeInput xup = same_input ? xin : moe_input(a.x, tb.up_host_type, tb.up_type, moe_xq2_, "moe");
    moe_matmul(tb.up, tb.up_type, n_embd, n_ff, b, ids, nk, false, xup, u);
  }
  const MoeInput hin = moe_act_input(g, u, a.act, tb, fused);
  const Mat out = a.out;
  if (fused) {  // down and the weighted sum in one launch
    const cuda::MoeMatmulArgs m = moe_matmul_args(tb.down, tb.down_type, n_ff, n_embd, b, ids, nk, true, hin, d);
    enqueue("moe (expert matmul + combine)",
            [m, wts, out](cudaStream_t s) { return cuda::launch_moe_matmul_combine(m, wts, out, s); });
  } else {
    moe_matmul(tb.down, tb.down_type, n_ff, n_embd, b, ids, nk, true, hin, d);
    const int nu = b.n_used;
    enqueue("moe (combine)", [=](cudaStream_t s) { return cuda::launch_moe_combine(out, dn, ids, wts, nu, s); });
  }
  forget_quant();
}

void CudaBackend::enqueue_moe_route(const MoeArgs& a, int32_t* ids, float* wts) {
  const Mat logits = a.logits;
  const int ne = a.n_expert, nu = a.n_used;
  const bool norm = a.norm_topk;
  const float* esc = expert_scale(a);
  key_.add(esc);
  const bool with_shared = a.shared_gate != nullptr;
  const cuda::MoeSharedSlot slot{.logit = a.shared_logit.data,
                                 .stride = a.shared_logit.data ? a.shared_logit.row_stride() : 1};
  key_.add(slot.logit);
  enqueue("moe (route)", [=](cudaStream_t s) {
    return cuda::launch_moe_route(logits, ne, nu, norm, ids, wts, s, cuda::ActRound::none, nullptr, nullptr, esc,
                                  with_shared ? &slot : nullptr);
  });
}

const float* CudaBackend::expert_scale(const MoeArgs& a) {
  return a.expert_scale ? device_floats(a.expert_scale, a.n_expert, "moe expert scale") : nullptr;
}

void CudaBackend::moe_grouped_items(const MoeArgs& a) {
  const auto& tb = moe_tables(a);
  const int64_t n_tok = a.x.rows, n_embd = a.x.cols, n_ff = tb.n_ff;
  const int64_t nk = n_tok * int64_t(a.n_used);
  const int32_t ne = a.n_expert;
  forget_quant();
  auto* route = static_cast<uint8_t*>(scratch(moe_route_, size_t(nk) * 8, "moe"));
  auto* ids = reinterpret_cast<int32_t*>(route);
  auto* wts = reinterpret_cast<float*>(route + size_t(nk) * 4);
  enqueue_moe_route(a, ids, wts);
  std::vector<int32_t> host_ids(static_cast<size_t>(nk));
  copy(host_ids.data(), ids, sizeof(int32_t) * host_ids.size());
  // Rows in expert order: start[e] .. start[e + 1]; a pair without an expert (routing of NaN
  // logits) has no row and adds nothing.
  std::vector<int64_t> start(size_t(ne) + 1, 0);
  for (const int32_t e : host_ids)
    if (e >= 0 && e < ne) ++start[size_t(e) + 1];
  for (int32_t e = 0; e < ne; ++e) start[size_t(e) + 1] += start[size_t(e)];
  const int64_t n_rows = start[size_t(ne)];
  // Device tables: [row -> token | pair -> row | items (expert, first row, rows)].
  std::vector<int32_t> tab(size_t(n_rows) + size_t(nk));
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < nk; ++i) {
    const int32_t e = host_ids[size_t(i)];
    int32_t row = -1;
    if (e >= 0 && e < ne) {
      row = int32_t(fill[size_t(e)]++);
      tab[size_t(row)] = int32_t(i / a.n_used);
    }
    tab[size_t(n_rows + i)] = row;
  }
  // A prompt's experts (more tokens than a graph step) take the tensor-core launches where
  // their formats and shapes allow; steps of up to kGraphMaxTokens keep the grouped GEMV,
  // whose bits equal the device-grouped step's (moe_grouped_device).
  const bool mma = !flags().no_cuda_moe_mma && n_tok > kGraphMaxTokens &&
                   cuda::moe_items_mma_fits(tb.gate_type, n_embd, n_embd) &&
                   cuda::moe_items_mma_fits(tb.up_type, n_embd, n_embd) &&
                   cuda::moe_items_mma_fits(tb.down_type, n_ff, n_ff);
  const int64_t item_rows = mma ? cuda::kMoeMmaRows : cuda::kMoeItemRows;
  int64_t n_items = 0;
  std::vector<int32_t> large;  // experts for the GEMM
  for (int32_t e = 0; e < ne; ++e) {
    const int64_t m = start[size_t(e) + 1] - start[size_t(e)];
    if (m > kMoeItemMaxRows) {
      large.push_back(e);
      continue;
    }
    for (int64_t r = 0; r < m; r += item_rows) {
      tab.push_back(e);
      tab.push_back(int32_t(start[size_t(e)] + r));
      tab.push_back(int32_t(std::min<int64_t>(item_rows, m - r)));
      ++n_items;
    }
  }
  auto* dtab = static_cast<int32_t*>(scratch(moe_items_, sizeof(int32_t) * tab.size(), "moe"));
  copy(dtab, tab.data(), sizeof(int32_t) * tab.size());
  const int32_t* row_tok = dtab;
  const int32_t* pair_row = dtab + n_rows;
  const int32_t* items = dtab + n_rows + nk;
  const Mat out = a.out;
  if (n_rows == 0) {
    enqueue("moe (zero)", [out](cudaStream_t s) {
      return cudaMemset2DAsync(out.data, sizeof(float) * size_t(out.row_stride()), 0,
                               sizeof(float) * size_t(out.cols), size_t(out.rows), s);
    });
    return;
  }
  // [n_rows, n_embd] gathered inputs and down outputs, [n_rows, n_ff] gate / up outputs.
  auto* xd = static_cast<float*>(scratch(moe_down_, sizeof(float) * size_t(n_rows) * size_t(2 * n_embd), "moe"));
  auto* gu = static_cast<float*>(scratch(moe_gu_, sizeof(float) * size_t(n_rows) * size_t(2 * n_ff), "moe"));
  const Mat xs{.data = xd, .rows = n_rows, .cols = n_embd};
  const Mat dm{.data = xd + size_t(n_rows) * size_t(n_embd), .rows = n_rows, .cols = n_embd};
  const Mat g{.data = gu, .rows = n_rows, .cols = n_ff};
  const Mat u{.data = gu + size_t(n_rows) * size_t(n_ff), .rows = n_rows, .cols = n_ff};
  auto rows_of = [](const Mat& m, int64_t r0, int64_t n) {
    return Mat{.data = m.data + size_t(r0) * size_t(m.row_stride()), .rows = n, .cols = m.cols};
  };
  get_rows({.out = xs, .x = a.x, .rows = row_tok});
  forget_quant();
  // gate / up: the grouped launch, then the GEMMs of the large experts.
  if (n_items > 0 && mma) {
    moe_items_mma(a, tb.gate, tb.gate_type, xs, g, tb.up_type == tb.gate_type ? tb.up : nullptr, &u, items, n_items);
    if (tb.up_type != tb.gate_type) moe_items_mma(a, tb.up, tb.up_type, xs, u, nullptr, nullptr, items, n_items);
    for (const int32_t e : large) {
      const int64_t r0 = start[size_t(e)], m = start[size_t(e) + 1] - r0;
      matmul({.out = rows_of(g, r0, m), .x = rows_of(xs, r0, m), .w = a.gate[e]});
      matmul({.out = rows_of(u, r0, m), .x = rows_of(xs, r0, m), .w = a.up[e]});
    }
    gated_act({.out = g, .gate = g, .up = u, .act = a.act});
    moe_items_mma(a, tb.down, tb.down_type, g, dm, nullptr, nullptr, items, n_items);
  } else if (n_items > 0) {
    moe_items_gate_up(a, tb, xs, g, u, items, n_items, nullptr);
    // The large experts' gate / up on the tensor cores, on their runs of rows.
    for (const int32_t e : large) {
      const int64_t r0 = start[size_t(e)], m = start[size_t(e) + 1] - r0;
      matmul({.out = rows_of(g, r0, m), .x = rows_of(xs, r0, m), .w = a.gate[e]});
      matmul({.out = rows_of(u, r0, m), .x = rows_of(xs, r0, m), .w = a.up[e]});
    }
    forget_quant();
    const MoeInput hin = moe_act_input(g, u, a.act, tb, true);
    moe_items_launch(a, tb.down, tb.down_type, hin, dm, nullptr, nullptr, n_ff, n_embd, items, n_items, nullptr);
  } else {
    for (const int32_t e : large) {
      const int64_t r0 = start[size_t(e)], m = start[size_t(e) + 1] - r0;
      matmul({.out = rows_of(g, r0, m), .x = rows_of(xs, r0, m), .w = a.gate[e]});
      matmul({.out = rows_of(u, r0, m), .x = rows_of(xs, r0, m), .w = a.up[e]});
    }
    gated_act({.out = g, .gate = g, .up = u, .act = a.act});
  }
  forget_quant();
  for (const int32_t e : large) {
    const int64_t r0 = start[size_t(e)], m = start[size_t(e) + 1] - r0;
    matmul({.out = rows_of(dm, r0, m), .x = rows_of(g, r0, m), .w = a.down[e]});
  }
  forget_quant();
  const int nu = a.n_used;
  const float* dd = dm.data;
  enqueue("moe (combine)",
          [=](cudaStream_t s) { return cuda::launch_moe_combine(out, dd, ids, wts, nu, s, pair_row); });
}

// Steps of 9..64 tokens (graph steps, e.g. a server's batched decode): moe_grouped_items'
// launches with the grouping done on the device (cuda::launch_moe_group), so the step needs
// no routing read back and runs as one graph. Every expert has at most 64 rows here, so all
// take the grouped launches, as on the host path; each row gets the same bits.
void CudaBackend::moe_grouped_device(const MoeArgs& a) {
  const auto& tb = moe_tables(a);
  const int64_t n_tok = a.x.rows, n_embd = a.x.cols, n_ff = tb.n_ff;
  const int64_t nk = n_tok * int64_t(a.n_used);
  const int32_t ne = a.n_expert;
  forget_quant();
  auto* route = static_cast<uint8_t*>(scratch(moe_route_, size_t(nk) * 8, "moe"));
  auto* ids = reinterpret_cast<int32_t*>(route);
  auto* wts = reinterpret_cast<float*>(route + size_t(nk) * 4);
  const int64_t max_items = cuda::moe_group_max_items(nk, ne);
  auto* dtab = static_cast<int32_t*>(scratch(moe_items_, sizeof(int32_t) * size_t(2 * nk + 3 * max_items + 1), "moe"));
  int32_t* row_tok = dtab;
  int32_t* pair_row = dtab + nk;
  int32_t* items = dtab + 2 * nk;
  int32_t* n_items = items + 3 * max_items;
  auto* xd = static_cast<float*>(scratch(moe_down_, sizeof(float) * size_t(nk) * size_t(2 * n_embd), "moe"));
  auto* gu = static_cast<float*>(scratch(moe_gu_, sizeof(float) * size_t(nk) * size_t(2 * n_ff), "moe"));
  const Mat xs{.data = xd, .rows = nk, .cols = n_embd};
  const Mat dm{.data = xd + size_t(nk) * size_t(n_embd), .rows = nk, .cols = n_embd};
  const Mat g{.data = gu, .rows = nk, .cols = n_ff};
  const Mat u{.data = gu + size_t(nk) * size_t(n_ff), .rows = nk, .cols = n_ff};
  LaunchKey& k = key_;
  k.add(uint64_t(13));
  k.add(a.out);
  k.add(a.x);
  k.add(a.logits);
  k.add(tb.gate);
  k.add(route);
  k.add(dtab);
  k.add(xd);
  k.add(gu);
  k.add(uint64_t(a.n_used) << 32 | uint64_t(a.n_expert) << 1 | uint64_t(a.norm_topk));
  k.add(uint64_t(a.act));
  enqueue_moe_route(a, ids, wts);
  const int nu = a.n_used;
  enqueue("moe (grouping)", [=](cudaStream_t s) {
    return cuda::launch_moe_group(ids, nk, nu, ne, row_tok, pair_row, items, n_items, s);
  });
  const Mat x = a.x;
  enqueue("moe (gather)", [=](cudaStream_t s) {
    return cuda::launch_get_rows(GetRowsArgs{.out = xs, .x = x, .rows = row_tok}, s);
  });
  moe_items_gate_up(a, tb, xs, g, u, items, max_items, n_items);
  const MoeInput hin = moe_act_input(g, u, a.act, tb, true);
  moe_items_launch(a, tb.down, tb.down_type, hin, dm, nullptr, nullptr, n_ff, n_embd, items, max_items, n_items);
  const Mat out = a.out;
  const float* dd = dm.data;
  enqueue("moe (combine)",
          [=](cudaStream_t s) { return cuda::launch_moe_combine(out, dd, ids, wts, nu, s, pair_row); });
  forget_quant();
}

void CudaBackend::moe_grouped(const MoeArgs& a) {
  const int64_t n_tok = a.x.rows, n_embd = a.x.cols, n_ff = a.gate[0].n_out;
  const int64_t nk = n_tok * int64_t(a.n_used);
  forget_quant();
  auto* route = static_cast<uint8_t*>(scratch(moe_route_, size_t(nk) * 16, "moe"));
  auto* ids = reinterpret_cast<int32_t*>(route);
  auto* wts = reinterpret_cast<float*>(route + size_t(nk) * 4);
  auto* sorted_tok = reinterpret_cast<int32_t*>(route + size_t(nk) * 8);   // pairs grouped by expert: token
  auto* sorted_pair = reinterpret_cast<int32_t*>(route + size_t(nk) * 12); // and pair index
  enqueue_moe_route(a, ids, wts);
  const int32_t ne = a.n_expert;
  std::vector<int32_t> host_ids(static_cast<size_t>(nk));
  copy(host_ids.data(), ids, sizeof(int32_t) * host_ids.size());
  // A pair without an expert (routing of NaN logits) adds nothing, as on the per-pair path.
  std::vector<int64_t> start(size_t(ne) + 1, 0);
  for (const int32_t e : host_ids)
    if (e >= 0 && e < ne) ++start[size_t(e) + 1];
  for (int32_t e = 0; e < ne; ++e) start[size_t(e) + 1] += start[size_t(e)];
  std::vector<int32_t> order(size_t(nk) * 2);  // [tokens | pairs], grouped by expert, pairs in order
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < nk; ++i) {
    const int32_t e = host_ids[size_t(i)];
    if (e < 0 || e >= ne) continue;
    const int64_t at = fill[size_t(e)]++;
    order[size_t(at)] = int32_t(i / a.n_used);
    order[size_t(nk + at)] = int32_t(i);
  }
  copy(sorted_tok, order.data(), sizeof(int32_t) * order.size());
  auto* xs = static_cast<float*>(scratch(moe_down_, sizeof(float) * size_t(n_tok) * size_t(2 * n_embd), "moe"));
  auto* gu = static_cast<float*>(scratch(moe_gu_, sizeof(float) * size_t(n_tok) * size_t(2 * n_ff), "moe"));
  const Mat out = a.out;
  enqueue("moe (zero)", [out](cudaStream_t s) {
    return cudaMemset2DAsync(out.data, sizeof(float) * size_t(out.row_stride()), 0, sizeof(float) * size_t(out.cols),
                             size_t(out.rows), s);
  });
  for (int32_t e = 0; e < ne; ++e) {
    const int64_t m = start[size_t(e) + 1] - start[size_t(e)];
    if (m == 0) continue;
    const Mat xm{.data = xs, .rows = m, .cols = n_embd};
    const Mat dm{.data = xs + size_t(n_tok) * size_t(n_embd), .rows = m, .cols = n_embd};
    const Mat gm{.data = gu, .rows = m, .cols = n_ff};
    const Mat um{.data = gu + size_t(n_tok) * size_t(n_ff), .rows = m, .cols = n_ff};
    get_rows({.out = xm, .x = a.x, .rows = sorted_tok + start[size_t(e)]});
    matmul({.out = gm, .x = xm, .w = a.gate[e]});
    matmul({.out = um, .x = xm, .w = a.up[e]});
    gated_act({.out = gm, .gate = gm, .up = um, .act = a.act});
    matmul({.out = dm, .x = gm, .w = a.down[e]});
    const int32_t* tok = sorted_tok + start[size_t(e)];
    const int32_t* pair = sorted_pair + start[size_t(e)];
    const float* dd = dm.data;
    enqueue("moe (scatter-add)",
            [=](cudaStream_t s) { return cuda::launch_moe_scatter_add(out, dd, m, tok, pair, wts, s); });
    forget_quant();
  }
}

// Keyed by the layer's host Weight array, or with a shared expert by its gate Weight (the same
// layer's tables then hold n_expert + 1 entries, the shared expert last).
const CudaBackend::MoeTables& CudaBackend::moe_tables(const MoeArgs& a) {
  const Weight* key = a.shared_gate ? a.shared_gate : a.gate;
  auto it = moe_tables_.find(key);
  if (it != moe_tables_.end()) return it->second;
  const int64_t n_embd = a.x.cols, n_ff = a.gate[0].n_out;
  MoeTables t;
  t.n_ff = n_ff;
  auto table = [&](const Weight* ws, const Weight* shared, int64_t n_in, int64_t n_out, QuantType& dev_type,
                   QuantType& host_type, const char* what) {
    const int32_t n_tab = a.n_expert + (shared ? 1 : 0);
    std::vector<const void*> ptrs(static_cast<size_t>(n_tab));
    for (int32_t e = 0; e < n_tab; ++e) {
      const Weight& w = e < a.n_expert ? ws[e] : *shared;
      BRISK_CHECK(w.n_in == n_in && w.n_out == n_out && w.type == ws[0].type, "moe: expert ", e, " ", what,
                  " weight is not [", n_out, ", ", n_in, "] ", quant_type_info(ws[0].type).name);
      const Weight d = device_weight(w, "moe");
      if (e == 0) dev_type = d.type;
      BRISK_CHECK(d.type == dev_type, "moe: expert ", e, " ", what, " weight changed format on upload");
      ptrs[size_t(e)] = d.data;
    }
    host_type = ws[0].type;
    const size_t bytes = sizeof(void*) * ptrs.size();
    void* dev = raw_alloc(bytes, "moe");
    upload(dev, ptrs.data(), bytes, "moe");
    return static_cast<const void* const*>(dev);
  };
  t.gate = table(a.gate, a.shared_gate, n_embd, n_ff, t.gate_type, t.gate_host_type, "gate");
  t.up = table(a.up, a.shared_up, n_embd, n_ff, t.up_type, t.up_host_type, "up");
  t.down = table(a.down, a.shared_down, n_ff, n_embd, t.down_type, t.down_host_type, "down");
  return moe_tables_.emplace(key, t).first->second;
}

CudaBackend::MoeInput CudaBackend::moe_act_input(const Mat& g, const Mat& u, Activation act, const MoeTables& tb, bool fused) {
  const GatedActArgs ga{.out = g, .gate = g, .up = u, .act = act};
  const cuda::ActRound h_round = cuda::act_round_for(format_traits(tb.down_host_type).vec_dot_type);
  if (!(fused && cuda::weight_takes_quantized_act(tb.down_type) && quant_fits(h_round, g.cols))) {
    enqueue("moe (gated activation)", [ga](cudaStream_t s) { return cuda::launch_gated_act(ga, s); });
    return moe_input(g, tb.down_host_type, tb.down_type, moe_hq_, "moe");
  }
  MoeInput hin;
  hin.xq = quant_scratch(moe_hq_, size_t(g.rows) * size_t(g.cols), "moe");
  key_.add(hin.xq.q);
  const cuda::QuantAct q = hin.xq;
  enqueue("moe (gated activation + quantization)",
          [=](cudaStream_t s) { return cuda::launch_gated_act_quant(ga, h_round, q, s); });
  return hin;
}

void CudaBackend::moe_items_launch(const MoeArgs& a, const void* const* w, QuantType type, const MoeInput& in, const Mat& o,
                    const void* const* w2, const Mat* o2, int64_t n_in, int64_t n_out, const int32_t* items,
                    int64_t n_items, const int32_t* n_items_dev) {
  const cuda::MoeMatmulArgs m = moe_matmul_args(w, type, n_in, n_out, a, nullptr, 0, true, in, o, w2, o2);
  enqueue("moe (grouped expert matmul)", [m, items, n_items, n_items_dev](cudaStream_t s) {
    return cuda::launch_moe_items(m, items, n_items, s, n_items_dev);
  });
}

void CudaBackend::moe_items_mma(const MoeArgs& a, const void* const* w, QuantType type, const Mat& x, const Mat& o,
                                const void* const* w2, const Mat* o2, const int32_t* items, int64_t n_items) {
  const cuda::MoeMatmulArgs m{.w = w, .type = type, .n_in = x.cols, .n_out = o.cols, .n_expert = a.n_expert,
                              .x = x.data, .x_stride = x.row_stride(), .out = o.data, .w2 = w2,
                              .out2 = w2 && o2 ? o2->data : nullptr};
  enqueue("moe (grouped expert matmul, tensor cores)",
          [m, items, n_items](cudaStream_t s) { return cuda::launch_moe_items_mma(m, items, n_items, s); });
}

void CudaBackend::moe_items_gate_up(const MoeArgs& a, const MoeTables& tb, const Mat& xs, const Mat& g, const Mat& u,
                     const int32_t* items, int64_t n_items, const int32_t* n_items_dev) {
  const int64_t n_embd = xs.cols, n_ff = g.cols;
  const MoeInput xin = moe_input(xs, tb.gate_host_type, tb.gate_type, moe_xq_, "moe");
  if (tb.up_type == tb.gate_type && tb.up_host_type == tb.gate_host_type) {
    moe_items_launch(a, tb.gate, tb.gate_type, xin, g, tb.up, &u, n_embd, n_ff, items, n_items, n_items_dev);
    return;
  }
  moe_items_launch(a, tb.gate, tb.gate_type, xin, g, nullptr, nullptr, n_embd, n_ff, items, n_items, n_items_dev);
  const MoeInput xup = moe_input(xs, tb.up_host_type, tb.up_type, moe_xq2_, "moe");
  moe_items_launch(a, tb.up, tb.up_type, xup, u, nullptr, nullptr, n_embd, n_ff, items, n_items, n_items_dev);
}

CudaBackend::MoeInput CudaBackend::moe_input(const Mat& x, QuantType host, QuantType dev, Scratch& buf, const char* op) {
  const cuda::ActRound round = cuda::act_round_for(format_traits(host).vec_dot_type);
  const size_t n = size_t(x.rows) * size_t(x.cols);
  MoeInput in;
  if (cuda::weight_takes_quantized_act(dev)) {
    BRISK_CHECK(round == cuda::ActRound::q8_0 || round == cuda::ActRound::q8_k, op, ": ",
                quant_type_info(host).name, " weights need Q8 activations");
    in.xq = quant_scratch(buf, n, op);
    key_.add(in.xq.q);
    const cuda::QuantAct q = in.xq;
    enqueue("moe (activation quantization)",
            [round, q, x](cudaStream_t s) { return cuda::launch_quantize_activations(round, q, x, s); });
    return in;
  }
  auto* f = static_cast<float*>(scratch(buf, sizeof(float) * n, op));
  key_.add(f);
  const Mat dst{.data = f, .rows = x.rows, .cols = x.cols};
  if (round != cuda::ActRound::none)
    enqueue("moe (activation rounding)",
            [round, f, x](cudaStream_t s) { return cuda::launch_round_activations(round, f, x, s); });
  else
    enqueue("moe (activation copy)", [dst, x](cudaStream_t s) {
      return cudaMemcpy2DAsync(dst.data, sizeof(float) * size_t(dst.cols), x.data, sizeof(float) * size_t(x.row_stride()),
                               sizeof(float) * size_t(dst.cols), size_t(dst.rows), cudaMemcpyDeviceToDevice, s);
    });
  in.x = f;
  in.x_stride = x.cols;
  return in;
}

void CudaBackend::moe_matmul(const void* const* w, QuantType type, int64_t n_in, int64_t n_out, const MoeArgs& a,
              const int32_t* ids, int64_t n_pairs, bool x_per_pair, const MoeInput& in, const Mat& out,
              const void* const* w2, const Mat* out2) {
  const cuda::MoeMatmulArgs m = moe_matmul_args(w, type, n_in, n_out, a, ids, n_pairs, x_per_pair, in, out, w2, out2);
  enqueue(w2 ? "moe (expert matmuls x2)" : "moe (expert matmul)",
          [m](cudaStream_t s) { return cuda::launch_moe_matmul(m, s); });
}

cuda::MoeMatmulArgs CudaBackend::moe_matmul_args(const void* const* w, QuantType type, int64_t n_in, int64_t n_out,
                                  const MoeArgs& a, const int32_t* ids, int64_t n_pairs, bool x_per_pair,
                                  const MoeInput& in, const Mat& out, const void* const* w2,
                                  const Mat* out2) {
  const int lanes = flags().no_cuda_moe_lanes ? (type == QuantType::Q4_0 || type == QuantType::Q5_0 ? 16 : 32) : 0;
  return cuda::MoeMatmulArgs{.w = w, .type = type, .n_in = n_in, .n_out = n_out, .n_expert = a.n_expert,
                             .ids = ids, .n_pairs = n_pairs, .n_used = a.n_used, .x_per_pair = x_per_pair,
                             .xq = in.xq, .x = in.x, .x_stride = in.x_stride, .out = out.data, .w2 = w2,
                             .out2 = out2 ? out2->data : nullptr, .row_lanes = lanes};
}

}  // namespace brisk::cuda
