// Prefill GEMM, the parts both ISA builds share (gemm_pack.h): each format's code
// representation, the packing of the quantized activations by groups of 16 tokens, the
// per-thread scratch and the row-block size. Built for the baseline ISA; the packing costs
// O(tokens * k) against the GEMM's O(tokens * k * rows).
#include "kernels/cpu/gemm_pack.h"

#include <algorithm>
#include <cstring>
#include <unistd.h>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/dot.h"
#include "quant/blocks.h"
#include "quant/repack.h"

namespace brisk::kernels {

GemmCodeSpec gemm_code_spec(QuantType t) {
  switch (t) {
    case QuantType::Q8_0: return {.block = 32, .offset = 128, .code_max = 255};
    case QuantType::Q4_0: return {.block = 32, .offset = 8, .code_max = 15};
    case QuantType::Q5_0: return {.block = 32, .offset = 16, .code_max = 31};
    case QuantType::Q4_1: return {.block = 32, .has_min = true, .code_max = 15};
    case QuantType::Q5_1: return {.block = 32, .has_min = true, .code_max = 31};
    case QuantType::Q4_K: return {.block = 32, .has_min = true, .code_max = 15};
    case QuantType::Q5_K: return {.block = 32, .has_min = true, .code_max = 31};
    case QuantType::Q6_K: return {.block = 16, .offset = 32, .code_max = 63};
    case QuantType::IQ4_NL: return {.block = 32, .offset = 128, .code_max = 255};
    case QuantType::IQ4_XS: return {.block = 32, .offset = 128, .code_max = 255};
    case QuantType::Q4_0_R16:
    case QuantType::Q5_0_R16:
    case QuantType::Q8_0_R16: return gemm_code_spec(quant::stored_type(t));
    default: return {};
  }
}

GemmGroupLayout::GemmGroupLayout(int64_t k_, int block) : k(k_), nblk(k_ / block) {
  xa = 0;
  dx = size_t(k) * kGemmGroup;
  aux = dx + size_t(nblk) * kGemmGroup * sizeof(float);
  bytes = aux + size_t(nblk) * kGemmGroup * 4;
}

size_t gemm_group_packed_bytes(QuantType weight_type, int64_t k, int64_t n_tokens) {
  const GemmGroupLayout L(k, gemm_code_spec(weight_type).block);
  return size_t((n_tokens + kGemmGroup - 1) / kGemmGroup) * L.bytes;
}

namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

// Packs tokens [t0, t0 + n) (n <= 16; the rest of the group is zero) of the quantized rows.
void pack_group(const GemmParams& p, QuantType act, const GemmCodeSpec& spec, const GemmGroupLayout& L, int64_t t0,
                int n, uint8_t* g) {
  std::memset(g, 0, L.bytes);
  auto* xa = reinterpret_cast<int32_t*>(g + L.xa);
  auto* dx = reinterpret_cast<float*>(g + L.dx);
  auto* aux_i = reinterpret_cast<int32_t*>(g + L.aux);
  auto* aux_f = reinterpret_cast<float*>(g + L.aux);
  const int B = spec.block;
  const auto* xb = static_cast<const uint8_t*>(p.x_quant);
  for (int t = 0; t < n; ++t) {
    const uint8_t* row = xb + size_t(t0 + t) * p.x_stride;
    // Per block b of B weight elements: its 4-byte words, its scale and its integer sum.
    auto put_block = [&](int64_t b, const int8_t* qs, float d, int32_t sum, float sx) {
      for (int w = 0; w < B / 4; ++w) {
        int32_t v;
        std::memcpy(&v, qs + 4 * w, 4);
        xa[(b * (B / 4) + w) * kGemmGroup + t] = v;
      }
      dx[b * kGemmGroup + t] = d;
      if (spec.has_min) aux_f[b * kGemmGroup + t] = sx;
      else aux_i[b * kGemmGroup + t] = -spec.offset * sum;
    };
    if (act == QuantType::Q8_0 || act == QuantType::Q8_1) {
      for (int64_t b = 0; b < L.nblk; ++b) {
        const int8_t* qs;
        float d, s = 0.f;
        if (act == QuantType::Q8_0) {
          const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
          qs = blk.qs;
          d = fp16_to_f32(blk.d);
        } else {
          const auto& blk = reinterpret_cast<const BlockQ8_1*>(row)[b];
          qs = blk.qs;
          d = fp16_to_f32(blk.d);
          s = fp16_to_f32(blk.s);  // d * sum, as the reference dot product uses it
        }
        int32_t sum = 0;
        for (int i = 0; i < 32; ++i) sum += qs[i];
        put_block(b, qs, d, sum, act == QuantType::Q8_1 ? s : d * float(sum));
      }
    } else {  // Q8_K: super-blocks of 256 with sums per 16
      const auto* blk = reinterpret_cast<const BlockQ8_K*>(row);
      const int per_sb = 256 / B;
      for (int64_t b = 0; b < L.nblk; ++b) {
        const BlockQ8_K& s = blk[b / per_sb];
        const int j = int(b % per_sb);
        const int32_t sum = B == 16 ? s.bsums[j] : int32_t(s.bsums[2 * j]) + s.bsums[2 * j + 1];
        put_block(b, s.qs + j * B, s.d, sum, s.d * float(sum));
      }
    }
  }
}

}  // namespace

void gemm_pack_groups(const GemmParams& p, void* packed, int64_t group_begin, int64_t group_end) {
  const GemmCodeSpec spec = gemm_code_spec(p.weight_type);
  const QuantType act = kernels::activation_type(p.weight_type);
  const GemmGroupLayout L(p.k, spec.block);
  for (int64_t gi = group_begin; gi < group_end; ++gi)
    pack_group(p, act, spec, L, gi * kGemmGroup, int(std::min<int64_t>(kGemmGroup, p.n_tokens - gi * kGemmGroup)),
               static_cast<uint8_t*>(packed) + size_t(gi) * L.bytes);
}

GemmScratch gemm_scratch(const GemmParams& p, const GemmGroupLayout& L, int64_t row_block, int64_t code_stride) {
  thread_local std::vector<uint8_t> xbuf;
  thread_local std::vector<uint8_t> wcodes;
  thread_local std::vector<float> wscale;
  const auto* packed = static_cast<const uint8_t*>(p.x_packed);
  if (!packed) {
    const int64_t n_groups = (p.n_tokens + kGemmGroup - 1) / kGemmGroup;
    xbuf.resize(size_t(n_groups) * L.bytes);
    gemm_pack_groups(p, xbuf.data(), 0, n_groups);
    packed = xbuf.data();
  }
  wcodes.resize(size_t(row_block) * size_t(code_stride));
  wscale.resize(size_t(2 * row_block * L.nblk));
  return {.packed = packed, .codes = wcodes.data(), .scale = wscale.data(), .min = wscale.data() + row_block * L.nblk};
}

namespace {
// Bytes of unpacked codes per row block: 3/8 of the L2 (768 KB of a 2 MB L2, where the tile sizes
// were tuned; AVX2-only CPUs often have 256 KB - 1.25 MB), 768 KB when the size is not known.
int64_t code_budget() {
  static const int64_t budget = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? std::clamp<int64_t>(int64_t(l2) / 8 * 3, 96 << 10, 768 << 10) : int64_t(768) << 10;
  }();
  return budget;
}
}  // namespace

int64_t gemm_row_block(int64_t k, int bytes_per_element, int multiple) {
  const int64_t per_row = std::max<int64_t>(k, 1) * bytes_per_element;
  const int64_t rows = std::clamp<int64_t>(code_budget() / per_row, 16, 128);
  return std::max<int64_t>(multiple, rows / multiple * multiple);
}

}  // namespace brisk::kernels
