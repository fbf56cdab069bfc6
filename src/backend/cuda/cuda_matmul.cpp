// The CUDA backend's matmuls (cuda_backend_impl.h): decode-sized batches on the GEMV kernels,
// their activations quantized or rounded once per input (inside the producing launch where it
// is the one queued last) and matmuls of one input merged into one launch; larger batches on
// the tensor-core GEMM (cuBLAS BF16).
#include "backend/cuda/cuda_backend_impl.h"

namespace brisk::cuda {

void CudaBackend::gemm_bf16(const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k, int64_t ldo) {
  settle_epilogue();
  flush("gemm");
  cuda::blas_gemm_bf16(blas_, x, w, out, m, n, k, ldo, "gemm");
}

void CudaBackend::matmul(const MatmulArgs& a) {
  check_mat(a.x, a.x.rows, a.w.n_in, "matmul", "x");
  check_mat(a.out, a.x.rows, a.w.n_out, "matmul", "out");
  MatmulArgs d = a;
  d.w = device_weight(a.w, "matmul");
  d.bias = a.bias ? device_floats(a.bias, a.w.n_out, "matmul bias") : nullptr;
  const bool wc = weight_constant(a.w);
  if (a.x.rows == 0) return;
  if (overlaps(a.out, bstate_x_)) bstate_valid_ = false;  // the output rewrites a converted input
  if (use_gemm(a)) {
    gemm(a, d);
    return;
  }
  // Activations go through the (original) weight format's vec_dot_type, as on the CPU:
  // quantized to int8 for the dp4a kernels, else rounded to floats.
  const cuda::ActRound round = cuda::act_round_for(format_traits(a.w.type).vec_dot_type);
  const size_t n = size_t(a.x.rows) * size_t(a.w.n_in);
  LaunchKey& k = key_;
  k.add(uint64_t(1));
  k.add(d.out);
  k.add(d.x);
  k.add(d.w);
  k.add(d.bias);
  k.add(uint64_t(wc));
  k.add(uint64_t(round));
  if (cuda::weight_takes_quantized_act(d.w.type)) {
    BRISK_CHECK(round == cuda::ActRound::q8_0 || round == cuda::ActRound::q8_k, "matmul: ",
                quant_type_info(a.w.type).name, " weights need Q8 activations");
    cuda::QuantAct xq;
    if (qstate_.valid && qstate_.kind == round && same_mat(qstate_.x, a.x)) {
      xq = qstate_.q;  // the previous matmul's input, unchanged since
      k.add(uint64_t(100));
    } else {
      xq = quant_scratch(qact_, n, "matmul");
      k.add(xq.q);
      // Quantize inside the producer of x when it is the launch queued last.
      if (!fuse_into_producer(a.x, round, xq)) {
        enqueue("matmul (activation quantization)", [d, xq, round](cudaStream_t s) {
          return cuda::launch_quantize_activations(round, xq, d.x, s);
        });
        k.add(uint64_t(103));
      }
      qstate_ = QuantState{.x = a.x, .kind = round, .q = xq, .valid = true};
    }
    producer_.kind = 0;
    enqueue_gemv(d, &xq, wc);
    if (overlaps(a.out, qstate_.x)) qstate_.valid = false;
    if (overlaps(a.out, fstate_.x)) fstate_.valid = false;
    return;
  }
  if (round != cuda::ActRound::none) {
    MatmulArgs dr = d;
    if (fstate_.valid && fstate_.kind == round && same_mat(fstate_.x, a.x)) {
      dr.x = fstate_.xr;  // the previous matmul's rounded input, unchanged since
      k.add(uint64_t(104));
    } else {
      auto* xr = static_cast<float*>(scratch(act_, sizeof(float) * n, "matmul"));
      dr.x = Mat{.data = xr, .rows = a.x.rows, .cols = a.w.n_in};
      k.add(xr);
      // Round inside the producer of x when it is the launch queued last (F16 / BF16).
      const bool fused = (round == cuda::ActRound::f16 || round == cuda::ActRound::bf16) &&
                         fuse_into_producer(a.x, round, cuda::QuantAct{.q = nullptr, .d = xr});
      if (!fused)
        enqueue("matmul (activation rounding)", [d, dr, round](cudaStream_t s) {
          return cuda::launch_round_activations(round, dr.x.data, d.x, s);
        });
      fstate_ = RoundState{.x = a.x, .kind = round, .xr = dr.x, .valid = true};
    }
    enqueue_gemv(dr, nullptr, wc);
  } else if (reinterpret_cast<uintptr_t>(a.x.data) % 16 != 0 || a.x.row_stride() % 4 != 0) {
    // The float kernel loads activations 16 bytes at a time: make them a dense copy.
    fstate_.valid = false;  // act_ is overwritten
    auto* xc = static_cast<float*>(scratch(act_, sizeof(float) * n, "matmul"));
    MatmulArgs dc = d;
    dc.x = Mat{.data = xc, .rows = a.x.rows, .cols = a.w.n_in};
    k.add(xc);
    enqueue("matmul", [d, dc, wc](cudaStream_t s) {
      const cudaError_t e =
          cudaMemcpy2DAsync(dc.x.data, sizeof(float) * size_t(dc.x.cols), d.x.data, sizeof(float) * size_t(d.x.row_stride()),
                            sizeof(float) * size_t(dc.x.cols), size_t(dc.x.rows), cudaMemcpyDeviceToDevice, s);
      return e != cudaSuccess ? e : cuda::launch_matmul(dc, nullptr, s, wc);
    });
  } else {
    enqueue_gemv(d, nullptr, wc);
  }
  producer_.kind = 0;
  if (overlaps(a.out, qstate_.x)) qstate_.valid = false;
  if (overlaps(a.out, fstate_.x)) fstate_.valid = false;
}

// Matmuls on the tensor cores (queued like the kernels, so graphs capture them): more than
// kGemvMaxTokens rows for every weight format. Up to kGemvMaxTokens rows of quantized weights
// stay on the few-token GEMV, whose rows equal one-token decoding bit for bit (a speculative
// verify step must). BF16 weights from kDenseGemmMinTokens rows take the GEMM: the float GEMV
// does every token's FMAs on the CUDA cores (Llama-3.1-8B BF16, 8 sequences on an H100: 379
// tok/s on the few-token GEMV, 1,040 on the GEMM), so their verify rows are not bit-exact
// (docs/speculative.md). F32 weights (a MoE router as llama.cpp's files keep it, test fixtures)
// take cuBLAS's F32 GEMM past kGemvMaxTokens rows: the GEMV would read the matrix once per
// token (Qwen3.6-35B-A3B's routers on a 512-token prompt: a quarter of the prefill on an H100).
bool CudaBackend::use_gemm(const MatmulArgs& a) const {
  if (blas_ == nullptr || a.x.rows > 65535) return false;
  if (a.w.type == QuantType::F32)
    return a.x.rows > kGemvMaxTokens && a.w.row_bytes == sizeof(float) * size_t(a.w.n_in) && a.x.row_stride() >= a.w.n_in;
  // (The BF16 decoding of weights and activations takes rows of whole 8-element pieces; others
  // stay on the GEMV, which takes float rows of any length.)
  if (a.w.n_in % 8 != 0) return false;
  if (a.x.rows > kGemvMaxTokens) return true;
  return a.w.type == QuantType::BF16 && a.x.rows >= kDenseGemmMinTokens;
}

// Rows of W per GEMM of a matrix of n rows of k elements decoded to BF16: as few pieces as the
// scratch of kGemmScratchElems takes, of equal size rounded up to 128 rows (each piece's output
// columns start 512-byte aligned: cuBLAS takes slow kernels for unaligned pieces).
namespace {
int64_t gemm_chunk_rows(int64_t n, int64_t k) {
  const int64_t cap = std::min<int64_t>(65535, kGemmScratchElems / k);
  if (n <= cap) return n;
  const int64_t cap128 = std::max<int64_t>(128, cap / 128 * 128);
  const int64_t pieces = (n + cap128 - 1) / cap128;
  const int64_t even = (n + pieces - 1) / pieces;
  return std::min(cap128, (even + 127) / 128 * 128);
}
}  // namespace

void CudaBackend::gemm_f32(const MatmulArgs& d) {
  const int64_t m = d.x.rows, k = d.w.n_in, n = d.w.n_out, ldx = d.x.row_stride(), ldo = d.out.row_stride();
  const float* x = d.x.data;
  const auto* w = static_cast<const float*>(d.w.data);
  float* out = d.out.data;
  BRISK_CHECK(!cuda::weight_repacked(QuantType::F32), "matmul: F32 weights in a device layout");
  cuda::Blas* blas = blas_;
  key_.add(uint64_t(9));
  key_.add(out);
  key_.add(w);
  key_.add(x);
  key_.add(uint64_t(m));
  enqueue("matmul (F32 GEMM)", [blas, x, ldx, w, out, m, n, k, ldo](cudaStream_t) {
    cuda::blas_gemm_f32(blas, x, ldx, w, out, m, n, k, ldo, "matmul");
    return cudaGetLastError();
  });
  if (d.bias) {
    const Mat o = d.out;
    const float* bias = d.bias;
    enqueue("matmul (bias)", [o, bias](cudaStream_t s) { return cuda::launch_add_bias(o, bias, s); });
  }
}

// Matmuls of one input on the tensor cores: several GEMMs of one shape (an encoder's q / k / v)
// as one batched cuBLAS launch, whose grid fills the device where each alone is a few waves of
// tiles. Each output is the GEMM's own (the same tiles, K order and FP32 sums per element as one
// launch per weight: cuBLAS picks its kernel by shape, so the bits may differ from the separate
// launches in the last place). BRISK_NO_CUDA_GEMM_BATCH: one launch per weight.
void CudaBackend::matmuls(const MatmulArgs* list, int n) {
  if (!gemm_batch_ok(list, n)) {
    for (int i = 0; i < n; ++i) matmul(list[i]);
    return;
  }
  const MatmulArgs& a0 = list[0];
  const int64_t m = a0.x.rows, k = a0.w.n_in, nout = a0.w.n_out, ldo = a0.out.row_stride();
  for (int i = 0; i < n; ++i) {
    check_mat(list[i].x, m, k, "matmul", "x");
    check_mat(list[i].out, m, nout, "matmul", "out");
    if (overlaps(list[i].out, bstate_x_)) bstate_valid_ = false;
  }
  std::vector<uintptr_t> ptrs;  // x, w, out of every part: the device arrays' contents
  MatmulArgs d0 = a0;
  d0.w = device_weight(a0.w, "matmul");
  uint16_t* xb = gemm_input(a0, d0.x);
  for (int i = 0; i < n; ++i) ptrs.push_back(reinterpret_cast<uintptr_t>(xb));
  for (int i = 0; i < n; ++i) ptrs.push_back(reinterpret_cast<uintptr_t>(device_weight(list[i].w, "matmul").data));
  for (int i = 0; i < n; ++i) ptrs.push_back(reinterpret_cast<uintptr_t>(list[i].out.data));
  void** dev = nullptr;
  if (auto it = gemm_batch_ptrs_.find(ptrs); it != gemm_batch_ptrs_.end()) {
    dev = it->second;
  } else {
    use_device();
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(void*) * ptrs.size()), "matmul", "cudaMalloc");
    retired_.push_back(dev);  // freed with the backend
    cuda_check(cudaMemcpy(dev, ptrs.data(), sizeof(void*) * ptrs.size(), cudaMemcpyHostToDevice), "matmul", "cudaMemcpy");
    gemm_batch_ptrs_.emplace(ptrs, dev);
  }
  cuda::Blas* blas = blas_;
  key_.add(uint64_t(113));
  key_.add(dev);
  key_.add(uint64_t(m));
  enqueue("matmul (GEMM, batched)", [blas, dev, m, nout, k, ldo, n](cudaStream_t) {
    cuda::blas_gemm_bf16_batched(blas, dev, dev + n, dev + 2 * n, m, nout, k, ldo, n, "matmul");
    return cudaGetLastError();
  });
  producer_.kind = 0;
  for (int i = 0; i < n; ++i) {
    if (overlaps(list[i].out, qstate_.x)) qstate_.valid = false;
    if (overlaps(list[i].out, fstate_.x)) fstate_.valid = false;
  }
}

// Whether matmuls() may batch `list`: eager launches (no graph step), 2..8 BF16 weights of one
// shape without biases on the tensor-core GEMM, one input, outputs of one row stride apart from
// one another and from the input.
bool CudaBackend::gemm_batch_ok(const MatmulArgs* list, int n) const {
  if (flags().no_cuda_gemm_batch || n < 2 || n > 8 || !cuda::blas_has_batched(blas_) || (in_step_ && !step_eager_))
    return false;
  const MatmulArgs& a0 = list[0];
  for (int i = 0; i < n; ++i) {
    const MatmulArgs& a = list[i];
    if (a.w.type != QuantType::BF16 || cuda::weight_repacked(QuantType::BF16) || a.bias || !use_gemm(a) ||
        !same_mat(a.x, a0.x) || a.w.n_in != a0.w.n_in || a.w.n_out != a0.w.n_out || a.x.rows == 0 ||
        a.out.row_stride() != a0.out.row_stride() || a.out.rows != a.x.rows || a.out.cols != a.w.n_out ||
        overlaps(a.out, a.x) || a.w.row_bytes != sizeof(uint16_t) * size_t(a.w.n_in))
      return false;
    for (int j = 0; j < i; ++j)
      if (overlaps(a.out, list[j].out)) return false;
  }
  return true;
}

// The GEMM's BF16 input rows of a.x (dx: its device view) in gemm_x_: rounded by the waiting
// unary, attention or LayerNorm that wrote them (epi_), kept from the previous matmul of the same
// input, or converted by a launch of their own.
uint16_t* CudaBackend::gemm_input(const MatmulArgs& a, const Mat& dx) {
  const int64_t m = a.x.rows, k = a.w.n_in;
  auto* xb = static_cast<uint16_t*>(scratch(gemm_x_, sizeof(uint16_t) * size_t(m) * size_t(k), "matmul"));
  const Mat x = dx;
  // The unary or LayerNorm that wrote x, waiting (epi_): rounds x to BF16 in the same launch.
  if (epi_.kind == 2 && same_mat(epi_.act.out, a.x)) {
    cuda::BiasActArgs e = epi_.act;
    e.xb = xb;
    e.write_out = !epi_.act_out_dead;  // the caller reads out only through this matmul
    epi_.kind = 0;
    enqueue(e.bias ? "unary (+ bias, BF16 activations)" : "unary (+ BF16 activations)",
            [e](cudaStream_t s) { return cuda::launch_bias_act(e, s); });
    bstate_x_ = a.x, bstate_buf_ = xb, bstate_valid_ = true;
  } else if (epi_.kind == 4 && same_mat(epi_.attn.out, a.x)) {
    const AttentionDenseArgs at = epi_.attn;
    const int64_t max_len = epi_.attn_max_len;
    const cuda::DenseAttentionOut extra{.xb = xb, .write_out = !epi_.attn_out_dead};
    epi_.kind = 0;
    enqueue(extra.write_out ? "attention_dense (tensor cores, + BF16 activations)"
                            : "attention_dense (tensor cores, BF16 activations only)",
            [at, max_len, extra](cudaStream_t s) { return cuda::launch_attention_dense_tc(at, max_len, s, extra); });
    bstate_x_ = a.x, bstate_buf_ = xb, bstate_valid_ = true;
  } else if (epi_.kind == 3 && epi_.has_ln && same_mat(epi_.norm.ln.out, a.x)) {
    cuda::EncoderNormArgs e = epi_.norm;
    e.xb = xb;
    epi_.kind = 0;
    enqueue(e.has_add ? "add + layer_norm (+ BF16 activations)" : "layer_norm (+ BF16 activations)",
            [e](cudaStream_t s) { return cuda::launch_encoder_norm(e, s); });
    bstate_x_ = a.x, bstate_buf_ = xb, bstate_valid_ = true;
  }
  // Consecutive matmuls of one input (q / k / v, gate / up) convert it once.
  if (!(bstate_valid_ && same_mat(bstate_x_, a.x) && bstate_buf_ == xb)) {
    enqueue("matmul (BF16 activations)", [x, xb](cudaStream_t s) { return cuda::launch_act_to_bf16(x, xb, s); });
    bstate_x_ = a.x;
    bstate_buf_ = xb;
    bstate_valid_ = true;
  }
  return xb;
}

void CudaBackend::gemm(const MatmulArgs& a, const MatmulArgs& d) {
  if (d.w.type == QuantType::F32) {
    gemm_f32(d);
    producer_.kind = 0;
    if (overlaps(a.out, qstate_.x)) qstate_.valid = false;
    if (overlaps(a.out, fstate_.x)) fstate_.valid = false;
    return;
  }
  const int64_t m = a.x.rows, k = d.w.n_in, n = d.w.n_out;
  uint16_t* xb = gemm_input(a, d.x);
  const bool direct = d.w.type == QuantType::BF16;
  const int64_t chunk = direct ? n : gemm_chunk_rows(n, k);
  uint16_t* wb = direct ? nullptr
                        : static_cast<uint16_t*>(scratch(gemm_w_, sizeof(uint16_t) * size_t(chunk) * size_t(k), "matmul"));
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t r1 = std::min(n, r0 + chunk);
    const uint16_t* w = static_cast<const uint16_t*>(d.w.data) + (direct ? size_t(r0) * size_t(k) : 0);
    if (!direct) {
      const Weight dw = d.w;
      enqueue("matmul (BF16 weights)", [dw, r0, r1, wb](cudaStream_t s) {
        return cuda::launch_weight_to_bf16(dw, r0, r1, wb, s);
      });
      w = wb;
    }
    float* out = d.out.data + r0;
    const int64_t ldo = d.out.row_stride();
    cuda::Blas* blas = blas_;
    key_.add(uint64_t(7));
    key_.add(out);
    key_.add(w);
    key_.add(xb);
    key_.add(uint64_t(m));
    key_.add(uint64_t(r1 - r0));
    // Queued like the kernels (a step's graph captures it); throws on a cuBLAS error.
    enqueue("matmul (GEMM)", [blas, xb, w, out, m, rows = r1 - r0, k, ldo](cudaStream_t) {
      cuda::blas_gemm_bf16(blas, xb, w, out, m, rows, k, ldo, "matmul");
      return cudaGetLastError();
    });
  }
  if (d.bias && epilogue_on()) {
    // The next op may take the bias into its launch (epi_).
    epi_ = Epilogue{.kind = 1, .out = d.out, .bias = d.bias};
  } else if (d.bias) {
    const Mat out = d.out;
    const float* bias = d.bias;
    enqueue("matmul (bias)", [out, bias](cudaStream_t s) { return cuda::launch_add_bias(out, bias, s); });
  }
  producer_.kind = 0;
  if (overlaps(a.out, qstate_.x)) qstate_.valid = false;
  if (overlaps(a.out, fstate_.x)) fstate_.valid = false;
}

bool CudaBackend::fuse_into_producer(const Mat& x, cuda::ActRound round, const cuda::QuantAct& xq) {
  const bool fuse = in_step_ && !step_eager_ &&
                    ((producer_.kind >= 1 && producer_.kind <= 3) ||
                     (producer_.kind == 8 && cuda::attention_quant_supported(producer_.attn, round))) &&
                    producer_.index + 1 == launches_.size() && same_mat(producer_.out, x);
  if (!fuse) return false;
  if (producer_.kind == 1) {
    const RmsNormArgs pn = producer_.norm;
    unsigned* bar = norm_barrier();
    const bool wc = constant_floats(pn.weight);
    launches_[producer_.index] = [pn, round, xq, bar, wc](cudaStream_t s) {
      return cuda::launch_rms_norm_quant(pn, round, xq, s, bar, wc);
    };
    key_.add(uint64_t(101));
  } else if (producer_.kind == 3) {
    const RmsNormArgs pn = producer_.norm;
    const AddArgs pa = producer_.add;
    unsigned* bar = norm_barrier();
    const bool wc = constant_floats(pn.weight);
    launches_[producer_.index] = [pa, pn, round, xq, bar, wc](cudaStream_t s) {
      return cuda::launch_add_rms_norm(&pa, pn, round, &xq, s, bar, wc);
    };
    key_.add(uint64_t(106));
  } else if (producer_.kind == 8) {
    const AttentionArgs pd = producer_.attn;
    const cuda::AttentionRope rp = producer_.attn_rope;
    const bool has_rope = producer_.attn_has_rope;
    const cuda::AttentionQuant aq{.kind = round, .q = xq};
    launches_[producer_.index] = [pd, rp, has_rope, aq](cudaStream_t s) {
      return cuda::launch_attention_rope(pd, has_rope ? &rp : nullptr, nullptr, nullptr, s, &aq);
    };
    names_[producer_.index] = has_rope ? "attention (+ rope, KV store, activation rounding)"
                                       : "attention (+ activation rounding)";
    key_.add(uint64_t(111));
  } else {
    const GatedActArgs pg = producer_.gated;
    launches_[producer_.index] = [pg, round, xq](cudaStream_t s) {
      return cuda::launch_gated_act_quant(pg, round, xq, s);
    };
    key_.add(uint64_t(102));
  }
  key_.add(uint64_t(round));
  return true;
}

void CudaBackend::enqueue_gemv(const MatmulArgs& d, const cuda::QuantAct* xq, bool wc) {
  GemvGroup& g = gemv_;
  const bool deferred = in_step_ && !step_eager_;
  if (deferred && g.valid && g.index + 1 == launches_.size() && g.n < cuda::kMaxMatmulParts && g.wc == wc &&
      g.has_xq == (xq != nullptr) && (!xq || (g.xq.q == xq->q && g.xq.d == xq->d)) &&
      cuda::matmuls_share_launch(g.a[0], d) && !flags().no_cuda_gemv_merge) {
    bool clash = overlaps(d.out, d.x);
    for (int i = 0; i < g.n; ++i) clash = clash || overlaps(g.a[i].out, d.out);
    if (!clash) {
      g.a[g.n++] = d;
      const GemvGroup gc = g;
      launches_[g.index] = [gc](cudaStream_t s) {
        return cuda::launch_matmuls(gc.a, gc.n, gc.has_xq ? &gc.xq : nullptr, s, gc.wc);
      };
      key_.add(uint64_t(107));
      return;
    }
  }
  const cuda::QuantAct q = xq ? *xq : cuda::QuantAct{};
  const bool has_xq = xq != nullptr;
  enqueue("matmul", [d, q, has_xq, wc](cudaStream_t s) { return cuda::launch_matmul(d, has_xq ? &q : nullptr, s, wc); });
  g = GemvGroup{};
  g.a[0] = d;
  g.n = 1;
  g.xq = q;
  g.has_xq = has_xq;
  g.wc = wc;
  g.index = launches_.size() - 1;
  g.valid = deferred;
}

}  // namespace brisk::cuda
