// SIMD dot-product kernels and activation quantizers against the scalar references, kernel
// selection under the kill switches, and the GEMV row loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dot_magnitude.h"
#include "random_values.h"
#include "scoped_env.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "quant/format.h"
#include "quant/types.h"

namespace brisk::kernels {
namespace {

const std::vector<QuantType> kSimdFormats = {
    QuantType::F32,  QuantType::F16,  QuantType::BF16, QuantType::Q8_0,   QuantType::Q4_0,
    QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1, QuantType::IQ4_NL, QuantType::Q4_K,
    QuantType::Q5_K, QuantType::Q6_K, QuantType::IQ4_XS, QuantType::MXFP4, QuantType::Q2_K,
    QuantType::Q3_K, QuantType::TQ2_0, QuantType::IQ2_XXS, QuantType::IQ2_XS, QuantType::IQ2_S,
    QuantType::IQ3_XXS, QuantType::IQ3_S, QuantType::IQ1_S, QuantType::IQ1_M, QuantType::TQ1_0};

using test::gaussian;

size_t row_bytes(QuantType t, int64_t n) { return size_t(*quant_row_bytes(t, uint64_t(n))); }

// Random raw blocks (every bit pattern of codes and scales), re-drawn per block until the block
// dequantizes to finite, moderate values.
std::vector<uint8_t> random_blocks(QuantType t, int64_t n, uint32_t seed) {
  const auto& info = quant_type_info(t);
  const auto& f = format_traits(t);
  std::mt19937 rng(seed);
  std::vector<uint8_t> q(row_bytes(t, n));
  std::vector<float> tmp(info.block_size);
  for (size_t b = 0; b < q.size() / info.type_size; ++b) {
    uint8_t* blk = q.data() + b * info.type_size;
    for (int attempt = 0;; ++attempt) {
      for (size_t k = 0; k < info.type_size; ++k) blk[k] = uint8_t(rng());
      f.dequantize_row(blk, tmp.data(), info.block_size);
      bool ok = true;
      for (float v : tmp) ok &= std::isfinite(v) && std::fabs(v) < 1e3f;
      if (ok) break;
      if (attempt > 100000) throw Error("no finite random block");
    }
  }
  return q;
}

std::vector<uint8_t> quantized(QuantType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())));
  format_traits(t).quantize_row_ref(x.data(), q.data(), int64_t(x.size()));
  return q;
}

// sum |w_i * a_i| of the dequantized operands: the scale of the rounding error
std::vector<int64_t> lengths_for(QuantType t) {
  const uint32_t bs = quant_type_info(t).block_size;
  if (bs == 1) return {1, 7, 31, 32, 33, 64, 100, 257, 4096};
  if (bs == 32) return {32, 64, 96, 224, 512, 4096};
  return {256, 512, 768, 4096};
}

TEST(KernelsDot, SimdMatchesScalarReference) {
  int compared = 0;
  for (QuantType t : kSimdFormats) {
    const auto& info = quant_type_info(t);
    const QuantType at = activation_type(t);
    const VecDotFn scalar = format_traits(t).vec_dot;
    // integer kernels: only the float accumulation order differs from the scalar reference
    const double rel = info.block_size == 1 ? 1e-5 : 4e-6;
    for (Isa isa : {Isa::avx2, Isa::avx2_vnni, Isa::avx512}) {
      const VecDotFn simd = vec_dot_variant(t, isa);
      if (!simd) continue;
      for (int64_t n : lengths_for(t)) {
        for (int source = 0; source < 2; ++source) {
          const uint32_t seed = uint32_t(n) * 31u + uint32_t(t);
          std::vector<uint8_t> w = source == 0 && format_traits(t).quantize_row_ref
                                       ? quantized(t, gaussian(size_t(n), seed))
                                       : random_blocks(t, n, seed);
          std::vector<uint8_t> a = quantized(at, gaussian(size_t(n), seed + 1));
          float want = 0, got = 0;
          scalar(n, &want, w.data(), a.data());
          simd(n, &got, w.data(), a.data());
          const double mag = dot_magnitude(t, w.data(), a.data(), n);
          EXPECT_NEAR(got, want, rel * mag + 1e-30)
              << info.name << " " << isa_name(isa) << " n=" << n << " source=" << source;
          ++compared;
        }
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

// The AVX2, AVX-VNNI and AVX-512 (VNNI) integer kernels built from dot_x86.inc compute identical
// integer sums and the same float accumulation, so they agree exactly. (Q8_0, Q4_0 and Q5_0 have
// 512-bit kernels of their own, dot_q32_avx512.cpp, which sum 16 blocks per FMA; they are
// checked against the reference like every kernel. Q4_K, Q5_K and Q6_K have them too,
// dot_kquant_avx512.inc: BRISK_NO_AVX512_KQUANT selects the dot_x86.inc ones compared here.)
TEST(KernelsDot, Avx2AndAvx512IntegerKernelsAgreeExactly) {
  ScopedEnv kquant_256("BRISK_NO_AVX512_KQUANT", "1");
  bool any = false;
  for (QuantType t : kSimdFormats) {
    if (quant_type_info(t).block_size == 1) continue;  // float kernels differ in vector width
    if (t == QuantType::Q8_0 || t == QuantType::Q4_0 || t == QuantType::Q5_0) continue;
    const VecDotFn k2 = vec_dot_variant(t, Isa::avx2);
    if (!k2) continue;
    const int64_t n = 4096;
    std::vector<uint8_t> w = random_blocks(t, n, 77);
    std::vector<uint8_t> a = quantized(activation_type(t), gaussian(size_t(n), 78));
    float r2 = 0;
    k2(n, &r2, w.data(), a.data());
    for (Isa isa : {Isa::avx2_vnni, Isa::avx512}) {
      const VecDotFn k = vec_dot_variant(t, isa);
      if (!k) continue;
      any = true;
      float r = 0;
      k(n, &r, w.data(), a.data());
      EXPECT_EQ(r2, r) << quant_type_info(t).name << " " << isa_name(isa);
    }
  }
  if (!any) GTEST_SKIP() << "needs AVX2 and AVX-VNNI or AVX-512 VNNI";
}

// Inputs that land exactly on rounding ties (scale 1: max |x| = 127) plus random data.
std::vector<float> quantizer_input(int64_t n, uint32_t seed) {
  std::vector<float> x = gaussian(size_t(n), seed);
  for (int64_t i = 0; i < 256 && i < n; ++i) x[size_t(i)] = float(i % 64) - 31.5f;
  if (n >= 256) {
    x[0] = 127.f;    // Q8_0/Q8_1 block 0 and the Q8_K block: scale exactly 1
    x[32] = -127.f;  // Q8_0 block 1, negative extreme
    x[64] = 127.f;
    for (int64_t i = 256; i < 288 && i < n; ++i) x[size_t(i)] = 0.f;  // an all-zero block
  }
  return x;
}

TEST(KernelsDot, SimdActivationQuantizersAreBitExact) {
  int compared = 0;
  for (QuantType at : {QuantType::Q8_0, QuantType::Q8_1, QuantType::Q8_K}) {
    for (Isa isa : {Isa::avx2, Isa::avx2_vnni, Isa::avx512}) {
      const QuantizeRowFn simd = quantize_activation_variant(at, isa);
      if (!simd) continue;
      for (int64_t n : {int64_t(256), int64_t(1024), int64_t(4096)}) {
        std::vector<float> x = quantizer_input(n, uint32_t(n));
        std::vector<uint8_t> want(row_bytes(at, n)), got(row_bytes(at, n), 0xAA);
        format_traits(at).quantize_row_ref(x.data(), want.data(), n);
        simd(x.data(), got.data(), n);
        EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size()), 0)
            << quant_type_info(at).name << " " << isa_name(isa) << " n=" << n;
        ++compared;
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

TEST(KernelsDot, SelectionHonoursKillSwitches) {
  const VecDotFn scalar = format_traits(QuantType::Q4_K).vec_dot;
  const VecDotFn best = select_vec_dot(QuantType::Q4_K);
  if (best == scalar) GTEST_SKIP() << "no SIMD kernel usable here (or SIMD switched off)";
  {
    ScopedEnv off("BRISK_NO_SIMD", "1");
    EXPECT_EQ(select_vec_dot(QuantType::Q4_K), scalar);
    EXPECT_EQ(select_quantize_activation(QuantType::Q8_K), format_traits(QuantType::Q8_K).quantize_row_ref);
  }
  {
    ScopedEnv off("BRISK_NO_SIMD_DOT_Q4_K", "1");
    EXPECT_EQ(select_vec_dot(QuantType::Q4_K), scalar);
    EXPECT_NE(select_vec_dot(QuantType::Q6_K), format_traits(QuantType::Q6_K).vec_dot);
  }
  {
    ScopedEnv off("BRISK_NO_SIMD_QUANTIZE_ACT", "1");
    EXPECT_EQ(select_quantize_activation(QuantType::Q8_0), format_traits(QuantType::Q8_0).quantize_row_ref);
  }
  if (vec_dot_variant(QuantType::Q4_K, Isa::avx512) && vec_dot_variant(QuantType::Q4_K, Isa::avx2)) {
    EXPECT_EQ(best, vec_dot_variant(QuantType::Q4_K, Isa::avx512));
    ScopedEnv off("BRISK_NO_AVX512", "1");
    const bool avx_vnni = vec_dot_variant(QuantType::Q4_K, Isa::avx2_vnni) != nullptr;
    EXPECT_EQ(select_vec_dot(QuantType::Q4_K), vec_dot_variant(QuantType::Q4_K, avx_vnni ? Isa::avx2_vnni : Isa::avx2));
    ScopedEnv off_vnni("BRISK_NO_AVX_VNNI", "1");
    EXPECT_EQ(select_vec_dot(QuantType::Q4_K), vec_dot_variant(QuantType::Q4_K, Isa::avx2));
    EXPECT_EQ(dot_isa(QuantType::Q4_K), Isa::avx2);
  }
  if (best == vec_dot_variant(QuantType::Q4_K, Isa::avx512)) {  // the 512-bit kernel unless switched off
    ScopedEnv off("BRISK_NO_AVX512_KQUANT", "1");
    EXPECT_NE(select_vec_dot(QuantType::Q4_K), best);
    EXPECT_EQ(select_vec_dot(QuantType::Q4_K), vec_dot_variant(QuantType::Q4_K, Isa::avx512));
  }
  EXPECT_EQ(select_vec_dot(QuantType::Q4_K), best);
  // formats without a SIMD kernel (the Q8_1 x Q8_1 pairing) keep their scalar dot product
  EXPECT_EQ(select_vec_dot(QuantType::Q8_1), format_traits(QuantType::Q8_1).vec_dot);
}

// gemv_rows_multi (including the multi-token kernels of Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K) must give every
// token exactly what gemv_rows gives it alone.
void check_gemv_rows(QuantType t) {
  for (int n_tokens : {2, 5, 8}) {
    const int64_t k = quant_type_info(t).block_size == 256 ? 768 : 544, n_rows = 37;
    const size_t rb = row_bytes(t, k) + 16;  // padded row stride
    std::vector<uint8_t> w(rb * size_t(n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      std::vector<uint8_t> row = random_blocks(t, k, uint32_t(r) + 1000);
      std::memcpy(w.data() + size_t(r) * rb, row.data(), row.size());
    }
    const QuantType at = activation_type(t);
    const size_t xb = activation_row_bytes(t, k);
    std::vector<uint8_t> x(xb * size_t(n_tokens));
    for (int tok = 0; tok < n_tokens; ++tok) {
      std::vector<float> xf = gaussian(size_t(k), 500u + uint32_t(tok));
      select_quantize_activation(at)(xf.data(), x.data() + size_t(tok) * xb, k);
    }
    std::vector<float> y1(size_t(n_rows) * n_tokens), ym(size_t(n_rows + 3) * n_tokens);
    for (int tok = 0; tok < n_tokens; ++tok)
      gemv_rows(t, w.data(), rb, n_rows, k, x.data() + size_t(tok) * xb, y1.data() + size_t(tok) * n_rows);
    gemv_rows_multi({.weight_type = t, .w = w.data(), .row_bytes = rb, .n_rows = n_rows, .k = k,
                     .x_quant = x.data(), .x_stride = xb, .n_tokens = n_tokens, .y = ym.data(),
                     .y_stride = n_rows + 3});
    const VecDotFn dot = select_vec_dot(t);
    for (int tok = 0; tok < n_tokens; ++tok)
      for (int64_t r = 0; r < n_rows; ++r) {
        float want = 0;
        dot(k, &want, w.data() + size_t(r) * rb, x.data() + size_t(tok) * xb);
        const float single = y1[size_t(tok * n_rows + r)];
        const float multi = ym[size_t(tok * (n_rows + 3) + r)];
        EXPECT_EQ(single, want) << quant_type_info(t).name;
        uint32_t b1, b2;
        std::memcpy(&b1, &single, 4);
        std::memcpy(&b2, &multi, 4);
        EXPECT_EQ(b1, b2) << quant_type_info(t).name << " " << n_tokens << " tokens: token " << tok << " row " << r;
      }
  }
}

TEST(KernelsGemv, RowsMatchSingleDotsAndMultiTokenIsBitIdentical) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K, QuantType::Q8_0, QuantType::Q4_0,
                      QuantType::Q5_0, QuantType::F16, QuantType::IQ2_XS})
    check_gemv_rows(t);
}

// One selected SIMD kernel against the format's reference dot product on a row of n elements:
// weights quantized from Gaussian floats (source 0) or random blocks (source 1), activations
// in the format's vec_dot_type.
void expect_kernel_matches_reference(VecDotFn simd, QuantType t, int64_t n, int source, uint32_t seed,
                                     const char* label) {
  std::vector<uint8_t> w = source == 0 ? quantized(t, gaussian(size_t(n), seed)) : random_blocks(t, n, seed);
  std::vector<uint8_t> a = quantized(format_traits(t).vec_dot_type, gaussian(size_t(n), seed + 1));
  float want = 0, got = 0;
  format_traits(t).vec_dot(n, &want, w.data(), a.data());
  simd(n, &got, w.data(), a.data());
  EXPECT_NEAR(got, want, 4e-6 * dot_magnitude(t, w.data(), a.data(), n) + 1e-30)
      << quant_type_info(t).name << " n=" << n << " source=" << source << label;
}

// Q4_0 and Q5_0 have two AVX-512 kernels: the byte-permute one (CPUs with VBMI, selected by
// default) and the plain AVX-512 one (BRISK_NO_AVX512_VBMI). Both against the reference, over
// lengths with partial groups and partial quads of blocks, and both through the GEMV.
TEST(KernelsDot, NibbleKernelsWithAndWithoutVbmiMatchReference) {
  if (!vec_dot_variant(QuantType::Q4_0, Isa::avx512)) GTEST_SKIP() << "needs AVX-512 VNNI";
  for (bool vbmi_off : {false, true}) {
    std::unique_ptr<ScopedEnv> off;
    if (vbmi_off) off = std::make_unique<ScopedEnv>("BRISK_NO_AVX512_VBMI", "1");
    for (QuantType t : {QuantType::Q4_0, QuantType::Q5_0}) {
      const VecDotFn simd = vec_dot_variant(t, Isa::avx512);
      for (int64_t n : {32, 64, 96, 128, 160, 512, 544, 896, 4864}) {
        for (int source = 0; source < 2; ++source) {
          const uint32_t seed = uint32_t(n) * 17u + uint32_t(t) + (vbmi_off ? 5u : 0u);
          expect_kernel_matches_reference(simd, t, n, source, seed, vbmi_off ? " vbmi_off" : "");
        }
      }
      check_gemv_rows(t);
    }
  }
}

// Q4_K, Q5_K and Q6_K have two AVX-512 kernels: the 512-bit one (dot_kquant_avx512.cpp,
// selected by default) and the 256-bit one of dot_x86.inc (BRISK_NO_AVX512_KQUANT). Both against
// the reference, and both through the GEMV.
TEST(KernelsDot, KquantKernelsWithAndWithoutWideMatchReference) {
  if (!vec_dot_variant(QuantType::Q4_K, Isa::avx512)) GTEST_SKIP() << "needs AVX-512 VNNI";
  for (bool wide_off : {false, true}) {
    std::unique_ptr<ScopedEnv> off;
    if (wide_off) off = std::make_unique<ScopedEnv>("BRISK_NO_AVX512_KQUANT", "1");
    for (QuantType t : {QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K}) {
      const VecDotFn simd = vec_dot_variant(t, Isa::avx512);
      for (int64_t n : {256, 512, 768, 4096, 14336}) {
        for (int source = 0; source < 2; ++source) {
          const uint32_t seed = uint32_t(n) * 13u + uint32_t(t) + (wide_off ? 7u : 0u);
          expect_kernel_matches_reference(simd, t, n, source, seed, wide_off ? " wide_off" : "");
        }
      }
      check_gemv_rows(t);
    }
  }
}

// 8 tokens of Gaussian activations quantized to Q8_K rows of k elements (token t: seed + t).
std::vector<uint8_t> q8k_token_rows(int64_t k, uint32_t seed) {
  const size_t xb = activation_row_bytes(QuantType::Q4_K, k);
  std::vector<uint8_t> x(xb * 8);
  for (int tok = 0; tok < 8; ++tok)
    format_traits(QuantType::Q8_K).quantize_row_ref(gaussian(size_t(k), seed + uint32_t(tok)).data(),
                                                    x.data() + size_t(tok) * xb, k);
  return x;
}

// The GFNI build of the 512-bit K-quant kernels (avx512-vbmi level, selected by default where the
// CPU has it) decodes the same codes as the plain build (BRISK_NO_AVX512_VBMI): the same bits,
// for 1..8 tokens, random blocks (every code and high-bit pattern) and long rows.
TEST(KernelsGemv, KquantGfniBuildIsBitIdenticalToPlain) {
  if (!cpu_has_level(IsaLevel::avx512_vbmi)) GTEST_SKIP() << "needs the avx512-vbmi level (GFNI)";
  for (QuantType t : {QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K}) {
    for (int64_t k : {256, 1024, 14336}) {
      const int64_t n_rows = 7;
      const size_t rb = row_bytes(t, k);
      std::vector<uint8_t> w(rb * size_t(n_rows));
      for (int64_t r = 0; r < n_rows; ++r) {
        std::vector<uint8_t> row = r % 2 ? quantized(t, gaussian(size_t(k), uint32_t(5 * r + k)))
                                         : random_blocks(t, k, uint32_t(5 * r + k));
        std::memcpy(w.data() + size_t(r) * rb, row.data(), row.size());
      }
      const size_t xb = activation_row_bytes(t, k);
      const std::vector<uint8_t> x = q8k_token_rows(k, 40u);
      for (int n_tokens = 1; n_tokens <= 8; ++n_tokens) {
        auto run = [&]() {
          std::vector<float> y(size_t(n_rows) * size_t(n_tokens), -1.f);
          gemv_rows_multi({.weight_type = t, .w = w.data(), .row_bytes = rb, .n_rows = n_rows, .k = k,
                           .x_quant = x.data(), .x_stride = xb, .n_tokens = n_tokens, .y = y.data(),
                           .y_stride = n_rows});
          return y;
        };
        const std::vector<float> gfni = run();
        ScopedEnv off("BRISK_NO_AVX512_VBMI", "1");
        const std::vector<float> plain = run();
        EXPECT_EQ(std::memcmp(gfni.data(), plain.data(), gfni.size() * sizeof(float)), 0)
            << quant_type_info(t).name << " k=" << k << " " << n_tokens << " tokens";
      }
    }
  }
}

// Speculative decoding verifies draft tokens with a multi-token GEMV and relies on each token's
// result being bit-identical to the 1-token GEMV's: every K-quant kernel (512-bit and, with
// BRISK_NO_AVX512_KQUANT, 256-bit) over long rows and every token count 1..8.
TEST(KernelsGemv, KquantMultiTokenIsBitIdenticalToOneToken) {
  for (bool wide_off : {false, true}) {
    std::unique_ptr<ScopedEnv> off;
    if (wide_off) off = std::make_unique<ScopedEnv>("BRISK_NO_AVX512_KQUANT", "1");
    for (QuantType t : {QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K}) {
      for (int64_t k : {256, 512, 4096, 14336}) {
        const int64_t n_rows = 5;
        const size_t rb = row_bytes(t, k);
        std::vector<uint8_t> w(rb * size_t(n_rows));
        for (int64_t r = 0; r < n_rows; ++r) {
          std::vector<uint8_t> row = r % 2 ? random_blocks(t, k, uint32_t(r + k))
                                           : quantized(t, gaussian(size_t(k), uint32_t(r + k)));
          std::memcpy(w.data() + size_t(r) * rb, row.data(), row.size());
        }
        const size_t xb = activation_row_bytes(t, k);
        const std::vector<uint8_t> x = q8k_token_rows(k, 900u);
        std::vector<float> single(size_t(n_rows) * 8);
        for (int tok = 0; tok < 8; ++tok)
          gemv_rows(t, w.data(), rb, n_rows, k, x.data() + size_t(tok) * xb, single.data() + size_t(tok) * n_rows);
        for (int n_tokens = 1; n_tokens <= 8; ++n_tokens) {
          std::vector<float> multi(size_t(n_rows) * size_t(n_tokens), -1.f);
          gemv_rows_multi({.weight_type = t, .w = w.data(), .row_bytes = rb, .n_rows = n_rows, .k = k,
                           .x_quant = x.data(), .x_stride = xb, .n_tokens = n_tokens, .y = multi.data(),
                           .y_stride = n_rows});
          EXPECT_EQ(std::memcmp(multi.data(), single.data(), multi.size() * sizeof(float)), 0)
              << quant_type_info(t).name << " k=" << k << " " << n_tokens << " tokens, wide_off=" << wide_off;
        }
      }
    }
  }
}

// The K-quant GEMV with the 512-bit kernel inlined in its row loop gives the bits of the
// kernel called per row (BRISK_NO_KQUANT_GEMV), for 1..8 tokens and padded row strides.
TEST(KernelsGemv, KquantRowLoopMatchesPerRowCalls) {
  for (QuantType t : {QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K}) {
    for (int64_t k : {256, 2048, 8192}) {
      const int64_t n_rows = 19;
      const size_t rb = row_bytes(t, k) + 32;
      std::vector<uint8_t> w(rb * size_t(n_rows));
      for (int64_t r = 0; r < n_rows; ++r) {
        std::vector<uint8_t> row = random_blocks(t, k, uint32_t(3 * r + k));
        std::memcpy(w.data() + size_t(r) * rb, row.data(), row.size());
      }
      const size_t xb = activation_row_bytes(t, k);
      const std::vector<uint8_t> x = q8k_token_rows(k, 70u);
      for (int n_tokens = 1; n_tokens <= 8; ++n_tokens) {
        auto run = [&]() {
          std::vector<float> y(size_t(n_rows + 2) * size_t(n_tokens), -1.f);
          gemv_rows_multi({.weight_type = t, .w = w.data(), .row_bytes = rb, .n_rows = n_rows, .k = k,
                           .x_quant = x.data(), .x_stride = xb, .n_tokens = n_tokens, .y = y.data(),
                           .y_stride = n_rows + 2});
          return y;
        };
        const std::vector<float> fast = run();
        ScopedEnv off("BRISK_NO_KQUANT_GEMV", "1");
        const std::vector<float> per_row = run();
        EXPECT_EQ(std::memcmp(fast.data(), per_row.data(), fast.size() * sizeof(float)), 0)
            << quant_type_info(t).name << " k=" << k << " " << n_tokens << " tokens";
      }
    }
  }
}

TEST(KernelsGemv, RejectsBadShapes) {
  std::vector<uint8_t> w(1024), x(1024);
  std::vector<float> y(8);
  EXPECT_THROW(gemv_rows(QuantType::Q4_K, w.data(), 144, 1, 100, x.data(), y.data()), Error);
  EXPECT_THROW(gemv_rows(QuantType::Q4_K, w.data(), 100, 1, 256, x.data(), y.data()), Error);
  EXPECT_THROW(gemv_rows_multi({.weight_type = QuantType::Q8_0, .w = w.data(), .row_bytes = 34,
                                .n_rows = 1, .k = 32, .x_quant = x.data(), .x_stride = 34,
                                .n_tokens = 9, .y = y.data(), .y_stride = 1}),
               Error);
  EXPECT_THROW(select_quantize_activation(QuantType::Q2_K), Error);
}

}  // namespace
}  // namespace brisk::kernels
