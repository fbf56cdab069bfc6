// Kernel selection (ISA x format, with kill switches) and the row loops of the decode GEMV.
#include "kernels/cpu/dot.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"
#include "kernels/cpu/dot_isa.h"
#include "quant/repack.h"
#include "quant/types.h"

namespace brisk::kernels {
namespace {

// The per-format kill switch of a weight format's SIMD kernels (nullptr: none).
bool Flags::*format_kill_switch(QuantType t) {
  switch (t) {
    case QuantType::F32: return &Flags::no_simd_dot_f32;
    case QuantType::F16: return &Flags::no_simd_dot_f16;
    case QuantType::BF16: return &Flags::no_simd_dot_bf16;
    case QuantType::Q8_0: return &Flags::no_simd_dot_q8_0;
    case QuantType::Q4_0:
    case QuantType::Q4_0_R16: return &Flags::no_simd_dot_q4_0;
    case QuantType::Q4_1: return &Flags::no_simd_dot_q4_1;
    case QuantType::Q5_0:
    case QuantType::Q5_0_R16: return &Flags::no_simd_dot_q5_0;
    case QuantType::Q5_1: return &Flags::no_simd_dot_q5_1;
    case QuantType::Q4_K: return &Flags::no_simd_dot_q4_k;
    case QuantType::Q5_K: return &Flags::no_simd_dot_q5_k;
    case QuantType::Q6_K: return &Flags::no_simd_dot_q6_k;
    case QuantType::IQ4_NL: return &Flags::no_simd_dot_iq4_nl;
    case QuantType::IQ4_XS: return &Flags::no_simd_dot_iq4_xs;
    case QuantType::MXFP4: return &Flags::no_simd_dot_mxfp4;
    case QuantType::Q2_K: return &Flags::no_simd_dot_q2_k;
    case QuantType::Q3_K: return &Flags::no_simd_dot_q3_k;
    case QuantType::TQ2_0: return &Flags::no_simd_dot_tq2_0;
    case QuantType::TQ1_0: return &Flags::no_simd_dot_tq1_0;
    case QuantType::IQ2_XXS: return &Flags::no_simd_dot_iq2_xxs;
    case QuantType::IQ2_XS: return &Flags::no_simd_dot_iq2_xs;
    case QuantType::IQ2_S: return &Flags::no_simd_dot_iq2_s;
    case QuantType::IQ3_XXS: return &Flags::no_simd_dot_iq3_xxs;
    case QuantType::IQ3_S: return &Flags::no_simd_dot_iq3_s;
    case QuantType::IQ1_S: return &Flags::no_simd_dot_iq1_s;
    case QuantType::IQ1_M: return &Flags::no_simd_dot_iq1_m;
    default: return nullptr;
  }
}

bool isa_usable(Isa isa, const CpuFeatures& cf) { return cpu_has_level(cf, isa_level(isa)); }

// The SIMD builds, best first.
constexpr Isa kSimdIsas[] = {Isa::avx512, Isa::avx2_vnni, Isa::avx2};

}  // namespace

IsaLevel isa_level(Isa isa) {
  switch (isa) {
    case Isa::scalar: return IsaLevel::scalar;
    case Isa::avx2: return IsaLevel::avx2;
    case Isa::avx2_vnni: return IsaLevel::avx2_vnni;
    case Isa::avx512: return IsaLevel::avx512;
  }
  return IsaLevel::scalar;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx2_vnni: return "avx2-vnni";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

VecDotFn vec_dot_variant(QuantType t, Isa isa) {
  if (!isa_usable(isa, cpu_features_detected())) return nullptr;
  switch (isa) {
    case Isa::scalar: return format_traits(t).vec_dot;
    case Isa::avx2: return avx2::vec_dot_kernel(t);
    case Isa::avx2_vnni: return avx2_vnni::vec_dot_kernel(t);
    case Isa::avx512: return avx512::vec_dot_kernel(t);
  }
  return nullptr;
}

QuantizeRowFn quantize_activation_variant(QuantType t, Isa isa) {
  if (!isa_usable(isa, cpu_features_detected())) return nullptr;
  switch (isa) {
    case Isa::scalar: return format_traits(t).quantize_row_ref;
    case Isa::avx2: return avx2::quantize_kernel(t);
    case Isa::avx2_vnni: return avx2_vnni::quantize_kernel(t);
    case Isa::avx512: return avx512::quantize_kernel(t);
  }
  return nullptr;
}

Isa dot_isa(QuantType t) {
  const Flags& fl = flags();
  bool Flags::*kill = format_kill_switch(t);
  if (!fl.no_simd && !(kill && fl.*kill)) {
    const CpuFeatures cf = cpu_features();  // detected features masked by the kill switches
    for (Isa isa : kSimdIsas)
      if (isa_usable(isa, cf) && vec_dot_variant(t, isa)) return isa;
  }
  return Isa::scalar;
}

VecDotFn select_vec_dot(QuantType t) {
  const FormatTraits& f = format_traits(t);
  BRISK_CHECK(f.vec_dot, "no dot product for weight format ", quant_type_info(t).name);
  const Isa isa = dot_isa(t);
  return isa == Isa::scalar ? f.vec_dot : vec_dot_variant(t, isa);
}

QuantizeRowFn select_quantize_activation(QuantType t) {
  const FormatTraits& f = format_traits(t);
  BRISK_CHECK(f.quantize_row_ref, "format ", quant_type_info(t).name, " is not an activation format");
  const Flags& fl = flags();
  if (!fl.no_simd && !fl.no_simd_quantize_act) {
    const CpuFeatures cf = cpu_features();
    for (Isa isa : kSimdIsas) {
      if (!isa_usable(isa, cf)) continue;
      if (QuantizeRowFn fn = quantize_activation_variant(t, isa)) return fn;
    }
  }
  return f.quantize_row_ref;
}

QuantType activation_type(QuantType weight_type) { return format_traits(weight_type).vec_dot_type; }

size_t activation_row_bytes(QuantType weight_type, int64_t k) {
  BRISK_CHECK(k >= 0, "negative row length ", k);
  auto bytes = quant_row_bytes(activation_type(weight_type), uint64_t(k));
  BRISK_CHECK(bytes, "row length ", k, " is not a multiple of the ",
              quant_type_info(activation_type(weight_type)).name, " block size");
  return size_t(*bytes);
}

namespace {
constexpr size_t kRowPrefetchBytes = kWeightPrefetchBytes;

// True when the selected kernel of this format is the AVX-512 build's 512-bit one.
bool isa_is_avx512_wide(QuantType t) {
  return dot_isa(t) == Isa::avx512 && avx512::wide_q32_kernel(t) != nullptr;
}

void check_gemv_shape(QuantType wt, size_t row_bytes, int64_t n_rows, int64_t k) {
  BRISK_CHECK(n_rows >= 0 && k >= 0, "gemv: negative shape (", n_rows, " x ", k, ")");
  auto need = quant_row_bytes(wt, uint64_t(k));
  BRISK_CHECK(need, "gemv: row length ", k, " is not a multiple of the ", quant_type_info(wt).name,
              " block size");
  BRISK_CHECK(row_bytes >= *need, "gemv: row stride ", row_bytes, " bytes is less than a ",
              quant_type_info(wt).name, " row of ", k, " elements (", *need, " bytes)");
  (void)activation_row_bytes(wt, k);
}
}  // namespace

std::optional<QuantType> cpu_weight_layout(QuantType stored) {
  if (flags().no_repack || flags().ref_ops) return std::nullopt;
  const std::optional<QuantType> r = quant::repacked_type(stored);
  if (!r || !isa_is_avx512_wide(*r)) return std::nullopt;
  return r;
}

void gemv_rows(QuantType wt, const void* w, size_t row_bytes, int64_t n_rows, int64_t k,
               const void* x_quant, float* y) {
  gemv_rows_multi({.weight_type = wt, .w = w, .row_bytes = row_bytes, .n_rows = n_rows, .k = k, .x_quant = x_quant,
                   .x_stride = 0, .n_tokens = 1, .y = y, .y_stride = n_rows});
}

void gemv_rows_multi(const GemvMultiParams& p) {
  check_gemv_shape(p.weight_type, p.row_bytes, p.n_rows, p.k);
  BRISK_CHECK(p.n_tokens >= 1 && p.n_tokens <= 8, "gemv: ", p.n_tokens, " tokens (1..8 supported)");
  BRISK_CHECK(p.n_tokens == 1 || p.x_stride >= activation_row_bytes(p.weight_type, p.k),
              "gemv: activation stride ", p.x_stride, " is less than one quantized row");
  BRISK_CHECK(p.n_tokens == 1 || p.y_stride >= p.n_rows, "gemv: output stride ", p.y_stride,
              " is less than the ", p.n_rows, " rows");
  const VecDotFn dot = select_vec_dot(p.weight_type);
  const Isa isa = dot_isa(p.weight_type);  // the ISA of `dot`
  const auto* wb = static_cast<const uint8_t*>(p.w);
  const auto* xb = static_cast<const uint8_t*>(p.x_quant);
  // A multi-token kernel of the same ISA decodes each weight block once for all tokens.
  VecDotMultiFn multi = nullptr;
  if (p.n_tokens > 1) {
    if (isa == Isa::avx512) multi = avx512::vec_dot_multi_kernel(p.weight_type, p.n_tokens);
    if (isa == Isa::avx2_vnni) multi = avx2_vnni::vec_dot_multi_kernel(p.weight_type, p.n_tokens);
    if (isa == Isa::avx2) multi = avx2::vec_dot_multi_kernel(p.weight_type, p.n_tokens);
  }
  // 512-bit kernels with the activations prepared once for all rows (Q8_0, Q4_0, Q5_0).
  if (isa == Isa::avx512 && avx512::wide_q32_kernel(p.weight_type) && avx512::wide_q32_gemv(p, kRowPrefetchBytes))
    return;
  // Software prefetch kRowPrefetchBytes ahead of the row being computed, one line at a time,
  // so that DRAM requests are in flight while a row is decoded (the hardware prefetchers of
  // these machines alone left half the bandwidth unused on a streaming GEMV).
  const uint8_t* const w_end = wb + size_t(p.n_rows) * p.row_bytes;
  const uint8_t* pf = wb;
  // The K-quant kernels of the SIMD builds prefetch inside their block loops themselves.
  const bool self_prefetch = isa != Isa::scalar &&
                             (p.weight_type == QuantType::Q4_K || p.weight_type == QuantType::Q5_K ||
                              p.weight_type == QuantType::Q6_K);
  if (self_prefetch) {  // they fetch kRowPrefetchBytes ahead: start the stream with that stretch
    const uint8_t* head = std::min(w_end, wb + kRowPrefetchBytes);
    for (const uint8_t* q = wb; q < head; q += 64) __builtin_prefetch(q, 0, 2);
    // The 512-bit K-quant kernels inlined in one loop over the rows.
    if (isa == Isa::avx512 && avx512::wide_kquant_gemv(p)) return;
  }
  auto prefetch_through = [&](const uint8_t* row_end) {
    if (self_prefetch) return;
    const uint8_t* target = std::min(w_end, row_end + kRowPrefetchBytes);
    for (; pf < target; pf += 64) __builtin_prefetch(pf, 0, 2);
  };
  if (multi) {
    for (int64_t r = 0; r < p.n_rows; ++r) {
      prefetch_through(wb + size_t(r + 1) * p.row_bytes);
      multi(p.k, &p.y[r], size_t(p.y_stride), wb + size_t(r) * p.row_bytes, xb, p.x_stride);
    }
    return;
  }
  for (int64_t r = 0; r < p.n_rows; ++r) {
    prefetch_through(wb + size_t(r + 1) * p.row_bytes);
    const uint8_t* row = wb + size_t(r) * p.row_bytes;
    for (int t = 0; t < p.n_tokens; ++t)
      dot(p.k, &p.y[t * p.y_stride + r], row, xb + size_t(t) * p.x_stride);
  }
}

uint64_t new_activation_epoch() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

PreparedActivationKey& prepared_activation_key() {
  thread_local PreparedActivationKey key;
  return key;
}

uint8_t* prepared_activation_buffer(size_t bytes) {
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  thread_local std::vector<Line> buf;
  if (buf.size() * sizeof(Line) < bytes) buf.resize((bytes + sizeof(Line) - 1) / sizeof(Line));
  return buf.data()->bytes;
}

}  // namespace brisk::kernels
