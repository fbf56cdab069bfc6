// gguf::Value accessors and constructors, and the value type names.
#include <limits>

#include "core/error.h"
#include "formats/gguf.h"

namespace brisk::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "u8";
    case ValueType::INT8: return "i8";
    case ValueType::UINT16: return "u16";
    case ValueType::INT16: return "i16";
    case ValueType::UINT32: return "u32";
    case ValueType::INT32: return "i32";
    case ValueType::FLOAT32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "u64";
    case ValueType::INT64: return "i64";
    case ValueType::FLOAT64: return "f64";
  }
  return "unknown";
}

std::optional<int64_t> Value::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return int64_t(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&data)) return *i;
  return std::nullopt;
}

std::optional<double> Value::as_float() const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return double(*u);
  if (const auto* i = std::get_if<int64_t>(&data)) return double(*i);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  return std::nullopt;
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&data); }
const Array* Value::as_array() const { return std::get_if<Array>(&data); }

Value Value::from_u32(uint32_t v) { return Value{.type = ValueType::UINT32, .data = uint64_t(v)}; }
Value Value::from_i32(int32_t v) { return Value{.type = ValueType::INT32, .data = int64_t(v)}; }
Value Value::from_u64(uint64_t v) { return Value{.type = ValueType::UINT64, .data = v}; }
Value Value::from_f32(float v) { return Value{.type = ValueType::FLOAT32, .data = double(v)}; }
Value Value::from_bool(bool v) { return Value{.type = ValueType::BOOL, .data = v}; }
Value Value::from_string(std::string v) {
  return Value{.type = ValueType::STRING, .data = std::move(v)};
}

Value Value::from_strings(const std::vector<std::string>& v) {
  Array a{.type = ValueType::STRING, .items = {}};
  a.items.reserve(v.size());
  for (const auto& s : v) a.items.push_back(from_string(s));
  return Value{.type = ValueType::ARRAY, .data = std::move(a)};
}

Value Value::from_f32s(const std::vector<float>& v) {
  Array a{.type = ValueType::FLOAT32, .items = {}};
  a.items.reserve(v.size());
  for (float x : v) a.items.push_back(from_f32(x));
  return Value{.type = ValueType::ARRAY, .data = std::move(a)};
}

Value Value::from_i32s(const std::vector<int32_t>& v) {
  Array a{.type = ValueType::INT32, .items = {}};
  a.items.reserve(v.size());
  for (int32_t x : v) a.items.push_back(from_i32(x));
  return Value{.type = ValueType::ARRAY, .data = std::move(a)};
}

}  // namespace brisk::gguf
