// safetensors::to_f32: widens any stored dtype to float32. FP8 follows the OCP 8-bit floating
// point spec: E4M3 ("fn": bias 7, no infinities, S.1111.111 is NaN) and E5M2 (bias 15, IEEE-like,
// the upper byte of an fp16).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/fp16.h"
#include "formats/safetensors.h"

namespace brisk::safetensors {
namespace {

float fp8_e4m3_to_f32(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xf;
  const int mant = b & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(float(mant), -9);  // subnormal: mant/8 × 2^-6
  return sign * std::ldexp(1.0f + float(mant) / 8.0f, exp - 7);
}

float fp8_e5m2_to_f32(uint8_t b) { return fp16_to_f32(uint16_t(uint16_t(b) << 8)); }

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

std::vector<float> to_f32(const TensorInfo& t) {
  const auto n_bytes = checked_mul<uint64_t>(t.n_elements, dtype_size(t.dtype));
  BRISK_CHECK(n_bytes && *n_bytes == t.n_bytes, "tensor '", t.name,
              "': byte size does not match its shape");
  BRISK_CHECK(t.data || t.n_elements == 0, "tensor '", t.name, "' has no data");
  std::vector<float> out(t.n_elements);
  const uint8_t* p = t.data;
  const size_t n = out.size();
  switch (t.dtype) {
    case DType::F64: for (size_t i = 0; i < n; ++i) out[i] = float(load<double>(p + 8 * i)); break;
    case DType::F32: if (n) std::memcpy(out.data(), p, 4 * n); break;
    case DType::F16: for (size_t i = 0; i < n; ++i) out[i] = fp16_to_f32(load<uint16_t>(p + 2 * i)); break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) out[i] = f32_from_bits(uint32_t(load<uint16_t>(p + 2 * i)) << 16);
      break;
    case DType::F8_E4M3: for (size_t i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(p[i]); break;
    case DType::F8_E5M2: for (size_t i = 0; i < n; ++i) out[i] = fp8_e5m2_to_f32(p[i]); break;
    case DType::I64: for (size_t i = 0; i < n; ++i) out[i] = float(load<int64_t>(p + 8 * i)); break;
    case DType::I32: for (size_t i = 0; i < n; ++i) out[i] = float(load<int32_t>(p + 4 * i)); break;
    case DType::I16: for (size_t i = 0; i < n; ++i) out[i] = float(load<int16_t>(p + 2 * i)); break;
    case DType::I8: for (size_t i = 0; i < n; ++i) out[i] = float(int8_t(p[i])); break;
    case DType::U64: for (size_t i = 0; i < n; ++i) out[i] = float(load<uint64_t>(p + 8 * i)); break;
    case DType::U32: for (size_t i = 0; i < n; ++i) out[i] = float(load<uint32_t>(p + 4 * i)); break;
    case DType::U16: for (size_t i = 0; i < n; ++i) out[i] = float(load<uint16_t>(p + 2 * i)); break;
    case DType::U8: for (size_t i = 0; i < n; ++i) out[i] = float(p[i]); break;
    case DType::BOOL: for (size_t i = 0; i < n; ++i) out[i] = p[i] ? 1.0f : 0.0f; break;
  }
  return out;
}

}  // namespace brisk::safetensors
