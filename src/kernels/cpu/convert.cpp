// Row conversions between float32 and the storage formats used for activations, the KV cache
// and embedding tables. F32/F16/BF16 are converted here; block formats go through their
// FormatTraits (dequantize_row / quantize_row_ref).
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu/ops.h"
#include "quant/format.h"

namespace brisk::cpu {

void row_to_f32(QuantType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case QuantType::F32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case QuantType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case QuantType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    default:
      format_traits(type).dequantize_row(src, dst, n);
  }
}

void row_from_f32(QuantType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case QuantType::F32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case QuantType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
      return;
    }
    case QuantType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    default: {
      const FormatTraits& tr = format_traits(type);
      BRISK_CHECK(tr.quantize_row_ref != nullptr, "no quantizer for format ",
                  quant_type_info(type).name);
      tr.quantize_row_ref(src, dst, n);
    }
  }
}

}  // namespace brisk::cpu
