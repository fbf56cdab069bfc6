// Q4_0 / Q5_0 <-> the repacked row layouts of quant/repack.h (scalar; run once at load).
#include "quant/repack.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace brisk::quant {
namespace {

struct Shape {
  bool high_bits = false;  // Q5_0
  size_t block_bytes = 0;
  bool codes_then_scales = false;  // Q8_0: every group, the last partial one too, is codes then scales
};

Shape shape_of(QuantType stored) {
  switch (stored) {
    case QuantType::Q4_0: return {false, sizeof(BlockQ4_0)};
    case QuantType::Q5_0: return {true, sizeof(BlockQ5_0)};
    case QuantType::Q8_0: return {false, sizeof(BlockQ8_0), true};
    default: fail("no repacked layout for ", quant_type_info(stored).name);
  }
}

// A stored block's fields.
struct BlockView {
  uint16_t d;
  uint32_t qh;
  const uint8_t* qs;
};

BlockView read_block(const Shape& s, const uint8_t* b) {
  BlockView v{};
  std::memcpy(&v.d, b, 2);
  if (s.high_bits) {
    std::memcpy(&v.qh, b + 2, 4);
    v.qs = b + 6;
  } else {
    v.qs = b + 2;
  }
  return v;
}

void write_block(const Shape& s, uint8_t* b, uint16_t d, uint32_t qh, const uint8_t* qs) {
  std::memcpy(b, &d, 2);
  if (s.high_bits) {
    std::memcpy(b + 2, &qh, 4);
    std::memcpy(b + 6, qs, 16);
  } else {
    std::memcpy(b + 2, qs, 16);
  }
}

// Group of `blocks` (16, or 4q for a partial group's quads) starting at block b0. to_repacked:
// stored blocks at `stored` -> repacked bytes at `packed`; else the reverse.
void convert_group(const Shape& s, int blocks, bool to_repacked, const uint8_t* stored_in, uint8_t* stored_out,
                   const uint8_t* packed_in, uint8_t* packed_out) {
  const int quads = blocks / 4;
  const size_t codes_bytes = size_t(64 * quads);
  const size_t qh_bytes = s.high_bits ? size_t(16 * quads) : 0;
  const bool full = blocks == 16;
  // Position of block k's scale among the group's scale words.
  auto scale_slot = [&](int k) { return full ? 4 * (k % 4) + k / 4 : k; };
  for (int k = 0; k < blocks; ++k) {
    const int j = k / 4, L = k % 4;
    if (to_repacked) {
      const BlockView v = read_block(s, stored_in + size_t(k) * s.block_bytes);
      std::memcpy(packed_out + 64 * j + 16 * L, v.qs, 16);
      if (s.high_bits) {  // the low 16 bits at word L of the quad's qh, the high 16 at word 4 + L
        const uint16_t lo = uint16_t(v.qh & 0xFFFF), hi = uint16_t(v.qh >> 16);
        std::memcpy(packed_out + codes_bytes + 16 * j + 2 * L, &lo, 2);
        std::memcpy(packed_out + codes_bytes + 16 * j + 8 + 2 * L, &hi, 2);
      }
      std::memcpy(packed_out + codes_bytes + qh_bytes + 2 * scale_slot(k), &v.d, 2);
    } else {
      uint16_t d, lo = 0, hi = 0;
      std::memcpy(&d, packed_in + codes_bytes + qh_bytes + 2 * scale_slot(k), 2);
      if (s.high_bits) {
        std::memcpy(&lo, packed_in + codes_bytes + 16 * j + 2 * L, 2);
        std::memcpy(&hi, packed_in + codes_bytes + 16 * j + 8 + 2 * L, 2);
      }
      write_block(s, stored_out + size_t(k) * s.block_bytes, d, uint32_t(lo) | (uint32_t(hi) << 16),
                  packed_in + 64 * j + 16 * L);
    }
  }
}

// Block in int32 lane l of a whole Q8_0 group (the lane order of the stored Q8_0 kernel's block
// sums, which the repacked kernel keeps so that both give the same bits); a partial last group
// has block l in lane l.
constexpr int kQ8BlockOfLane[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};

// A Q8_0 group of m blocks: m stored blocks <-> the interleaved codes (step j, lane l at
// 4 * (m * j + l): bytes 4j..4j+3 of the lane's block, each xor 0x80) then m scale words in
// lane order.
void convert_q8_group(int m, bool to_repacked, const uint8_t* stored_in, uint8_t* stored_out, const uint8_t* packed_in,
                      uint8_t* packed_out) {
  constexpr size_t kB = sizeof(BlockQ8_0);
  const size_t codes_bytes = size_t(m) * 32;
  for (int l = 0; l < m; ++l) {
    const size_t k = size_t(m == 16 ? kQ8BlockOfLane[l] : l);
    for (int j = 0; j < 8; ++j) {  // 4 code bytes at a time, each xor 0x80
      const size_t at = size_t(4 * (m * j + l)), qs = k * kB + 2 + size_t(4 * j);
      uint32_t word;
      std::memcpy(&word, to_repacked ? stored_in + qs : packed_in + at, 4);
      word ^= 0x80808080u;
      std::memcpy(to_repacked ? packed_out + at : stored_out + qs, &word, 4);
    }
    if (to_repacked) std::memcpy(packed_out + codes_bytes + 2 * size_t(l), stored_in + k * kB, 2);
    else std::memcpy(stored_out + k * kB, packed_in + codes_bytes + 2 * size_t(l), 2);
  }
}

void convert_row(QuantType stored, bool to_repacked, const uint8_t* src, uint8_t* dst, int64_t nb) {
  const Shape s = shape_of(stored);
  BRISK_CHECK(nb >= 0, "repack: negative block count");
  for (int64_t b0 = 0; b0 < nb; b0 += 16) {
    const int m = int(nb - b0 < 16 ? nb - b0 : 16);
    const int whole = m == 16 || s.codes_then_scales ? m : 4 * (m / 4);
    const size_t at = size_t(b0) * s.block_bytes;
    if (s.codes_then_scales) {
      if (to_repacked) convert_q8_group(m, true, src + at, nullptr, nullptr, dst + at);
      else convert_q8_group(m, false, nullptr, dst + at, src + at, nullptr);
    } else if (whole > 0) {
      if (to_repacked) convert_group(s, whole, true, src + at, nullptr, nullptr, dst + at);
      else convert_group(s, whole, false, nullptr, dst + at, src + at, nullptr);
    }
    const size_t rest = size_t(m - whole) * s.block_bytes;  // the last blocks, as stored
    if (rest) std::memcpy(dst + at + size_t(whole) * s.block_bytes, src + at + size_t(whole) * s.block_bytes, rest);
  }
}

}  // namespace

std::optional<QuantType> repacked_type(QuantType stored) {
  switch (stored) {
    case QuantType::Q4_0: return QuantType::Q4_0_R16;
    case QuantType::Q5_0: return QuantType::Q5_0_R16;
    case QuantType::Q8_0: return QuantType::Q8_0_R16;
    default: return std::nullopt;
  }
}

QuantType stored_type(QuantType t) {
  switch (t) {
    case QuantType::Q4_0_R16: return QuantType::Q4_0;
    case QuantType::Q5_0_R16: return QuantType::Q5_0;
    case QuantType::Q8_0_R16: return QuantType::Q8_0;
    default: return t;
  }
}

void repack_row(QuantType stored, const void* src, void* dst, int64_t nb) {
  convert_row(stored, true, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), nb);
}

void unrepack_row(QuantType repacked, const void* src, void* dst, int64_t nb) {
  BRISK_CHECK(is_repacked(repacked), "unrepack: ", quant_type_info(repacked).name, " is not a repacked layout");
  convert_row(stored_type(repacked), false, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), nb);
}

void repack_rows_in_place(QuantType stored, void* data, int64_t n_rows, size_t row_bytes, int64_t nb) {
  const Shape s = shape_of(stored);
  BRISK_CHECK(row_bytes >= size_t(nb) * s.block_bytes, "repack: rows of ", row_bytes, " bytes hold fewer than ", nb,
              " blocks");
  std::vector<uint8_t> tmp(size_t(nb) * s.block_bytes);
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = static_cast<uint8_t*>(data) + size_t(r) * row_bytes;
    std::memcpy(tmp.data(), row, tmp.size());
    repack_row(stored, tmp.data(), row, nb);
  }
}

}  // namespace brisk::quant

// Row functions of the repacked layouts for the trait table (format.cpp): the stored format's,
// on a converted copy of the row. n must be a whole row (the layout depends on the row length).
namespace brisk::quant {
namespace {
uint8_t* row_scratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

template <QuantType kRepacked, size_t kBlockBytes, auto kStoredFn>
void dequantize_repacked(const void* src, float* dst, int64_t n) {
  uint8_t* stored = row_scratch(size_t(n / 32) * kBlockBytes);
  unrepack_row(kRepacked, src, stored, n / 32);
  kStoredFn(stored, dst, n);
}

template <QuantType kStored, size_t kBlockBytes, auto kStoredFn>
void quantize_repacked(const float* src, void* dst, int64_t n) {
  uint8_t* stored = row_scratch(size_t(n / 32) * kBlockBytes);
  kStoredFn(src, stored, n);
  repack_row(kStored, stored, dst, n / 32);
}

template <QuantType kRepacked, size_t kBlockBytes, auto kStoredFn>
void dot_repacked(int64_t n, float* out, const void* w, const void* a) {
  uint8_t* stored = row_scratch(size_t(n / 32) * kBlockBytes);
  unrepack_row(kRepacked, w, stored, n / 32);
  kStoredFn(n, out, stored, a);
}
}  // namespace

void dequantize_row_q4_0_r16(const void* src, float* dst, int64_t n) {
  dequantize_repacked<QuantType::Q4_0_R16, sizeof(BlockQ4_0), dequantize_row_q4_0>(src, dst, n);
}
void dequantize_row_q5_0_r16(const void* src, float* dst, int64_t n) {
  dequantize_repacked<QuantType::Q5_0_R16, sizeof(BlockQ5_0), dequantize_row_q5_0>(src, dst, n);
}
void quantize_row_q4_0_r16_ref(const float* src, void* dst, int64_t n) {
  quantize_repacked<QuantType::Q4_0, sizeof(BlockQ4_0), quantize_row_q4_0_ref>(src, dst, n);
}
void quantize_row_q5_0_r16_ref(const float* src, void* dst, int64_t n) {
  quantize_repacked<QuantType::Q5_0, sizeof(BlockQ5_0), quantize_row_q5_0_ref>(src, dst, n);
}
void vec_dot_q4_0_r16_q8_0(int64_t n, float* out, const void* w, const void* a) {
  dot_repacked<QuantType::Q4_0_R16, sizeof(BlockQ4_0), vec_dot_q4_0_q8_0>(n, out, w, a);
}
void vec_dot_q5_0_r16_q8_0(int64_t n, float* out, const void* w, const void* a) {
  dot_repacked<QuantType::Q5_0_R16, sizeof(BlockQ5_0), vec_dot_q5_0_q8_0>(n, out, w, a);
}

void dequantize_row_q8_0_r16(const void* src, float* dst, int64_t n) {
  dequantize_repacked<QuantType::Q8_0_R16, sizeof(BlockQ8_0), dequantize_row_q8_0>(src, dst, n);
}
void quantize_row_q8_0_r16_ref(const float* src, void* dst, int64_t n) {
  quantize_repacked<QuantType::Q8_0, sizeof(BlockQ8_0), quantize_row_q8_0_ref>(src, dst, n);
}
void vec_dot_q8_0_r16_q8_0(int64_t n, float* out, const void* w, const void* a) {
  dot_repacked<QuantType::Q8_0_R16, sizeof(BlockQ8_0), vec_dot_q8_0_q8_0>(n, out, w, a);
}

}  // namespace brisk::quant
