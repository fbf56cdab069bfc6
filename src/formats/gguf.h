// GGUF (versions 2 and 3): reader with zero-copy tensor views, and writer.
// Layout: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, n_kv × (string key, u32 type,
// value), n_tensors × (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset),
// padding to `general.alignment` (default 32), then the data section. Every count, length and
// offset read from the file is validated before use; errors name the file and byte offset.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "formats/mapped_file.h"
#include "quant/types.h"

namespace brisk::gguf {

// Tensor dimensions a GGUF tensor may have (GGML_MAX_DIMS: what llama.cpp reads and writes).
constexpr uint32_t kMaxDims = 4;

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

struct Value;
struct Array {
  ValueType type = ValueType::UINT8;  // element type (ARRAY for nested arrays)
  std::vector<Value> items;
};

struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;  // ints widened

  std::optional<int64_t> as_int() const;    // any integer type (u64 above INT64_MAX: nullopt)
  std::optional<double> as_float() const;   // float or integer types
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;     // nullptr unless STRING
  const Array* as_array() const;            // nullptr unless ARRAY

  static Value from_u32(uint32_t v);
  static Value from_i32(int32_t v);
  static Value from_u64(uint64_t v);
  static Value from_f32(float v);
  static Value from_bool(bool v);
  static Value from_string(std::string v);
  static Value from_strings(const std::vector<std::string>& v);
  static Value from_f32s(const std::vector<float>& v);
  static Value from_i32s(const std::vector<int32_t>& v);
};

struct TensorInfo {
  std::string name;
  QuantType type = QuantType::F32;
  std::vector<uint64_t> ne;   // GGUF order: ne[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;        // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapped file
};

class File {
 public:
  static File open(const std::string& path, MappedFile::Mode mode = MappedFile::Mode::mmap);
  static File parse(std::shared_ptr<const MappedFile> bytes);

  const std::string& path() const;
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // Arrays: empty when the key is absent; brisk::Error when present with another type.
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::string architecture() const;  // general.architecture, "" when absent

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const std::shared_ptr<const MappedFile>& bytes() const { return bytes_; }

 private:
  std::shared_ptr<const MappedFile> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// Writes GGUF v3. Tensor data is copied at write time from the pointers given (which must
// stay valid until write()).
class Writer {
 public:
  void set(std::string key, Value value);  // replaces an existing key, keeps first position
  void add_tensor(std::string name, QuantType type, std::vector<uint64_t> ne, const void* data,
                  uint64_t n_bytes);
  void set_alignment(uint64_t alignment);
  void write(const std::string& path) const;
  // The same bytes in memory (a 64-byte-aligned buffer, as a file read with Mode::read).
  std::shared_ptr<const MappedFile> write_to_memory(std::string name) const;

 private:
  void emit(const std::function<void(const void*, size_t)>& out) const;
  std::vector<std::pair<std::string, Value>> metadata_;
  struct PendingTensor {
    std::string name;
    QuantType type;
    std::vector<uint64_t> ne;
    const void* data;
    uint64_t n_bytes;
  };
  std::vector<PendingTensor> tensors_;
  uint64_t alignment_ = 32;
};

}  // namespace brisk::gguf
