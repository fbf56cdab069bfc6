// Internal: the scalar row functions of every format (defined per family in src/quant/*.cpp),
// used by format.cpp's trait table and by the CPU kernels as their reference/fallback.
// Row functions take n = number of elements (a multiple of the block size).
#pragma once
#include <cstdint>

namespace brisk::quant {

#define BRISK_DEQ(name) void dequantize_row_##name(const void* src, float* dst, int64_t n)
#define BRISK_QREF(name) void quantize_row_##name##_ref(const float* src, void* dst, int64_t n)
#define BRISK_DOT(name) void vec_dot_##name(int64_t n, float* out, const void* w, const void* a)

// float_formats.cpp
BRISK_DEQ(f32); BRISK_DEQ(f16); BRISK_DEQ(bf16);
BRISK_QREF(f32); BRISK_QREF(f16); BRISK_QREF(bf16);
BRISK_DOT(f32_f32); BRISK_DOT(f16_f16); BRISK_DOT(bf16_bf16);

// legacy.cpp: 32-element blocks with one scale (and a min for the _1 variants)
BRISK_DEQ(q4_0); BRISK_DEQ(q4_1); BRISK_DEQ(q5_0); BRISK_DEQ(q5_1); BRISK_DEQ(q8_0); BRISK_DEQ(q8_1);
BRISK_QREF(q4_0); BRISK_QREF(q4_1); BRISK_QREF(q5_0); BRISK_QREF(q5_1); BRISK_QREF(q8_0); BRISK_QREF(q8_1);
BRISK_DOT(q4_0_q8_0); BRISK_DOT(q4_1_q8_1); BRISK_DOT(q5_0_q8_0); BRISK_DOT(q5_1_q8_1);
BRISK_DOT(q8_0_q8_0); BRISK_DOT(q8_1_q8_1);

// kquants.cpp (dequantize, dot products) and kquants_quantize.cpp (reference quantizers)
BRISK_DEQ(q2_k); BRISK_DEQ(q3_k); BRISK_DEQ(q4_k); BRISK_DEQ(q5_k); BRISK_DEQ(q6_k); BRISK_DEQ(q8_k);
BRISK_QREF(q4_k); BRISK_QREF(q5_k); BRISK_QREF(q6_k); BRISK_QREF(q8_k);
BRISK_DOT(q2_k_q8_k); BRISK_DOT(q3_k_q8_k); BRISK_DOT(q4_k_q8_k); BRISK_DOT(q5_k_q8_k);
BRISK_DOT(q6_k_q8_k); BRISK_DOT(q8_k_q8_k);

// iquants.cpp: lattice (grid) codebooks and the non-linear 4-bit formats
BRISK_DEQ(iq2_xxs); BRISK_DEQ(iq2_xs); BRISK_DEQ(iq2_s); BRISK_DEQ(iq3_xxs); BRISK_DEQ(iq3_s);
BRISK_DEQ(iq1_s); BRISK_DEQ(iq1_m); BRISK_DEQ(iq4_nl); BRISK_DEQ(iq4_xs);
BRISK_DOT(iq2_xxs_q8_k); BRISK_DOT(iq2_xs_q8_k); BRISK_DOT(iq2_s_q8_k); BRISK_DOT(iq3_xxs_q8_k);
BRISK_DOT(iq3_s_q8_k); BRISK_DOT(iq1_s_q8_k); BRISK_DOT(iq1_m_q8_k); BRISK_DOT(iq4_nl_q8_0);
BRISK_DOT(iq4_xs_q8_k);

// repack.cpp: the repacked row layouts of Q4_0 / Q5_0 / Q8_0 (whole rows only)
BRISK_DEQ(q4_0_r16); BRISK_DEQ(q5_0_r16); BRISK_DEQ(q8_0_r16);
BRISK_QREF(q4_0_r16); BRISK_QREF(q5_0_r16); BRISK_QREF(q8_0_r16);
BRISK_DOT(q4_0_r16_q8_0); BRISK_DOT(q5_0_r16_q8_0); BRISK_DOT(q8_0_r16_q8_0);

// ternary.cpp
BRISK_DEQ(tq1_0); BRISK_DEQ(tq2_0);
BRISK_QREF(tq1_0); BRISK_QREF(tq2_0);
BRISK_DOT(tq1_0_q8_k); BRISK_DOT(tq2_0_q8_k);

// mxfp4.cpp
BRISK_DEQ(mxfp4); BRISK_QREF(mxfp4); BRISK_DOT(mxfp4_q8_0);

#undef BRISK_DEQ
#undef BRISK_QREF
#undef BRISK_DOT

}  // namespace brisk::quant
