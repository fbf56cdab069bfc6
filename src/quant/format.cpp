// The trait table: for each format its scalar dequantizer, reference quantizer (where the
// format has one), the activation format of its dot product and the scalar dot product.
// Pairings follow ggml: Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4 x Q8_0; Q4_1/Q5_1/Q8_1 x Q8_1;
// K-, IQ- (except IQ4_NL) and TQ-formats x Q8_K; F32/F16/BF16 with themselves.
#include "quant/format.h"

#include <array>

#include "core/error.h"
#include "quant/quant_impl.h"

namespace brisk {
namespace {

using namespace quant;
using Q = QuantType;

constexpr std::array kTraits = {
    FormatTraits{Q::F32, dequantize_row_f32, quantize_row_f32_ref, Q::F32, vec_dot_f32_f32},
    FormatTraits{Q::F16, dequantize_row_f16, quantize_row_f16_ref, Q::F16, vec_dot_f16_f16},
    FormatTraits{Q::BF16, dequantize_row_bf16, quantize_row_bf16_ref, Q::BF16, vec_dot_bf16_bf16},
    FormatTraits{Q::Q4_0, dequantize_row_q4_0, quantize_row_q4_0_ref, Q::Q8_0, vec_dot_q4_0_q8_0},
    FormatTraits{Q::Q4_1, dequantize_row_q4_1, quantize_row_q4_1_ref, Q::Q8_1, vec_dot_q4_1_q8_1},
    FormatTraits{Q::Q5_0, dequantize_row_q5_0, quantize_row_q5_0_ref, Q::Q8_0, vec_dot_q5_0_q8_0},
    FormatTraits{Q::Q5_1, dequantize_row_q5_1, quantize_row_q5_1_ref, Q::Q8_1, vec_dot_q5_1_q8_1},
    FormatTraits{Q::Q8_0, dequantize_row_q8_0, quantize_row_q8_0_ref, Q::Q8_0, vec_dot_q8_0_q8_0},
    FormatTraits{Q::Q8_1, dequantize_row_q8_1, quantize_row_q8_1_ref, Q::Q8_1, vec_dot_q8_1_q8_1},
    FormatTraits{Q::Q2_K, dequantize_row_q2_k, nullptr, Q::Q8_K, vec_dot_q2_k_q8_k},
    FormatTraits{Q::Q3_K, dequantize_row_q3_k, nullptr, Q::Q8_K, vec_dot_q3_k_q8_k},
    FormatTraits{Q::Q4_K, dequantize_row_q4_k, quantize_row_q4_k_ref, Q::Q8_K, vec_dot_q4_k_q8_k},
    FormatTraits{Q::Q5_K, dequantize_row_q5_k, quantize_row_q5_k_ref, Q::Q8_K, vec_dot_q5_k_q8_k},
    FormatTraits{Q::Q6_K, dequantize_row_q6_k, quantize_row_q6_k_ref, Q::Q8_K, vec_dot_q6_k_q8_k},
    FormatTraits{Q::Q8_K, dequantize_row_q8_k, quantize_row_q8_k_ref, Q::Q8_K, vec_dot_q8_k_q8_k},
    FormatTraits{Q::IQ1_S, dequantize_row_iq1_s, nullptr, Q::Q8_K, vec_dot_iq1_s_q8_k},
    FormatTraits{Q::IQ1_M, dequantize_row_iq1_m, nullptr, Q::Q8_K, vec_dot_iq1_m_q8_k},
    FormatTraits{Q::IQ2_XXS, dequantize_row_iq2_xxs, nullptr, Q::Q8_K, vec_dot_iq2_xxs_q8_k},
    FormatTraits{Q::IQ2_XS, dequantize_row_iq2_xs, nullptr, Q::Q8_K, vec_dot_iq2_xs_q8_k},
    FormatTraits{Q::IQ2_S, dequantize_row_iq2_s, nullptr, Q::Q8_K, vec_dot_iq2_s_q8_k},
    FormatTraits{Q::IQ3_XXS, dequantize_row_iq3_xxs, nullptr, Q::Q8_K, vec_dot_iq3_xxs_q8_k},
    FormatTraits{Q::IQ3_S, dequantize_row_iq3_s, nullptr, Q::Q8_K, vec_dot_iq3_s_q8_k},
    FormatTraits{Q::IQ4_NL, dequantize_row_iq4_nl, nullptr, Q::Q8_0, vec_dot_iq4_nl_q8_0},
    FormatTraits{Q::IQ4_XS, dequantize_row_iq4_xs, nullptr, Q::Q8_K, vec_dot_iq4_xs_q8_k},
    FormatTraits{Q::TQ1_0, dequantize_row_tq1_0, quantize_row_tq1_0_ref, Q::Q8_K, vec_dot_tq1_0_q8_k},
    FormatTraits{Q::TQ2_0, dequantize_row_tq2_0, quantize_row_tq2_0_ref, Q::Q8_K, vec_dot_tq2_0_q8_k},
    FormatTraits{Q::MXFP4, dequantize_row_mxfp4, quantize_row_mxfp4_ref, Q::Q8_0, vec_dot_mxfp4_q8_0},
    // in-memory layouts (quant/repack.h): functions of whole rows
    FormatTraits{Q::Q4_0_R16, dequantize_row_q4_0_r16, quantize_row_q4_0_r16_ref, Q::Q8_0, vec_dot_q4_0_r16_q8_0},
    FormatTraits{Q::Q5_0_R16, dequantize_row_q5_0_r16, quantize_row_q5_0_r16_ref, Q::Q8_0, vec_dot_q5_0_r16_q8_0},
    FormatTraits{Q::Q8_0_R16, dequantize_row_q8_0_r16, quantize_row_q8_0_r16_ref, Q::Q8_0, vec_dot_q8_0_r16_q8_0},
};

}  // namespace

const FormatTraits& format_traits(QuantType t) {
  for (const FormatTraits& f : kTraits)
    if (f.type == t) return f;
  const QuantTypeInfo* info = quant_type_info(uint32_t(t));  // file types only: others print "?"
  fail("tensor format ", info ? info->name : std::string_view("?"), " (type id ", uint32_t(t),
       ") has no block-format implementation");
}

}  // namespace brisk
