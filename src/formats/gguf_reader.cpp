// GGUF reader: parses the header, metadata and tensor infos of a GGUF v2/v3 file held in a
// MappedFile. Every count, length and offset is checked against the bytes that remain before it
// is used, so a hostile file can neither read out of bounds nor make the parser allocate much
// more than the file's own size. Errors read "FILE: offset N: what".
#include <cstring>
#include <limits>

#include "core/checked_math.h"
#include "core/error.h"
#include "formats/display.h"
#include "formats/gguf.h"

namespace brisk::gguf {
namespace {

constexpr int kMaxArrayDepth = 8;         // nested arrays deeper than this are rejected
constexpr uint64_t kDefaultAlignment = 32;
// Each parsed value costs sizeof(Value) (48 bytes) of memory however small its encoding, so the
// total is capped: 8 M values is ten times the largest tokenizer (vocab + scores + types +
// merges) seen in practice, and bounds the parse to a few hundred MB for any input.
constexpr uint64_t kMaxMetadataValues = 1ull << 23;

// Smallest encoded size of one value of type t (used to bound counts read from the file).
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;   // u64 length
    case ValueType::ARRAY: return 12;   // u32 type + u64 count
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= uint32_t(ValueType::FLOAT64); }

// Bounds-checked little-endian cursor over the file bytes.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  uint64_t pos() const { return pos_; }

  // Counts values as they are parsed, so a hostile file cannot make the parser allocate far
  // more than its size through arrays of one-byte items.
  void count_values(uint64_t at, uint64_t n) {
    values_ += n;
    if (values_ > kMaxMetadataValues)
      fail_at(at, "more than ", kMaxMetadataValues, " metadata values in the file");
  }
  uint64_t remaining() const { return size_ - pos_; }

  template <class... Args>
  [[noreturn]] void fail_at(uint64_t offset, Args&&... args) const {
    fail(name_, ": offset ", offset, ": ", std::forward<Args>(args)...);
  }

  template <class T>
  T read(const char* what) {
    if (remaining() < sizeof(T))
      fail_at(pos_, "file ends while reading ", what, " (", sizeof(T), " bytes needed, ",
              remaining(), " left)");
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const uint64_t at = pos_;
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining())
      fail_at(at, what, " length ", len, " exceeds the ", remaining(), " bytes left in the file");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_t(len));
    pos_ += len;
    return s;
  }

  // Checks that `count` items of at least `min_size` bytes each can still fit in the file.
  void check_count(uint64_t at, uint64_t count, uint64_t min_size, const char* what) const {
    const auto need = checked_mul<uint64_t>(count, min_size);
    if (!need || *need > remaining())
      fail_at(at, what, " count ", count, " cannot fit in the ", remaining(),
              " bytes left in the file");
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t values_ = 0;
  const std::string& name_;
};

Value read_value(Cursor& c, ValueType type, int depth);

Array read_array(Cursor& c, int depth) {
  const uint64_t at = c.pos();
  if (depth >= kMaxArrayDepth) c.fail_at(at, "arrays nested deeper than ", kMaxArrayDepth);
  const uint32_t raw_type = c.read<uint32_t>("array element type");
  if (!valid_value_type(raw_type)) c.fail_at(at, "invalid array element type ", raw_type);
  Array a{.type = ValueType(raw_type), .items = {}};
  const uint64_t count_at = c.pos();
  const uint64_t count = c.read<uint64_t>("array count");
  c.check_count(count_at, count, min_encoded_size(a.type), "array");
  c.count_values(count_at, count);
  a.items.reserve(size_t(count));
  for (uint64_t i = 0; i < count; ++i) a.items.push_back(read_value(c, a.type, depth + 1));
  return a;
}

Value read_value(Cursor& c, ValueType type, int depth) {
  Value v{.type = type, .data = uint64_t(0)};
  switch (type) {
    case ValueType::UINT8: v.data = uint64_t(c.read<uint8_t>("u8 value")); break;
    case ValueType::INT8: v.data = int64_t(c.read<int8_t>("i8 value")); break;
    case ValueType::UINT16: v.data = uint64_t(c.read<uint16_t>("u16 value")); break;
    case ValueType::INT16: v.data = int64_t(c.read<int16_t>("i16 value")); break;
    case ValueType::UINT32: v.data = uint64_t(c.read<uint32_t>("u32 value")); break;
    case ValueType::INT32: v.data = int64_t(c.read<int32_t>("i32 value")); break;
    case ValueType::UINT64: v.data = c.read<uint64_t>("u64 value"); break;
    case ValueType::INT64: v.data = c.read<int64_t>("i64 value"); break;
    case ValueType::FLOAT32: v.data = double(c.read<float>("f32 value")); break;
    case ValueType::FLOAT64: v.data = c.read<double>("f64 value"); break;
    case ValueType::BOOL: {
      const uint64_t at = c.pos();
      const uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1) c.fail_at(at, "bool value ", unsigned(b), " is neither 0 nor 1");
      v.data = b == 1;
      break;
    }
    case ValueType::STRING: v.data = c.read_string("string"); break;
    case ValueType::ARRAY: v.data = read_array(c, depth); break;
  }
  return v;
}

}  // namespace

File File::open(const std::string& path, MappedFile::Mode mode) {
  return parse(MappedFile::open(path, mode));
}

File File::parse(std::shared_ptr<const MappedFile> bytes) {
  BRISK_CHECK(bytes, "gguf: no file given");
  File f;
  f.bytes_ = std::move(bytes);
  const std::string& name = f.bytes_->path();
  Cursor c(f.bytes_->data(), f.bytes_->size(), name);

  const uint32_t magic = c.read<uint32_t>("magic");
  if (std::memcmp(&magic, "GGUF", 4) != 0) c.fail_at(0, "not a GGUF file (bad magic)");
  f.version_ = c.read<uint32_t>("version");
  if (f.version_ == 1) c.fail_at(4, "GGUF version 1 is not supported (only 2 and 3)");
  if (f.version_ != 2 && f.version_ != 3) {
    if ((f.version_ & 0xffff) == 0)
      c.fail_at(4, "big-endian GGUF (version bytes ", f.version_, ") is not supported");
    c.fail_at(4, "unsupported GGUF version ", f.version_, " (only 2 and 3)");
  }
  const uint64_t n_tensors_at = c.pos();
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv_at = c.pos();
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info
  // 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
  c.check_count(n_kv_at, n_kv, 13, "metadata");
  c.check_count(n_tensors_at, n_tensors, 24, "tensor");

  f.metadata_.reserve(size_t(n_kv));
  uint64_t alignment_at = 0;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = c.pos();
    std::string key = c.read_string("metadata key");
    const uint64_t type_at = c.pos();
    const uint32_t raw_type = c.read<uint32_t>("metadata value type");
    if (!valid_value_type(raw_type))
      c.fail_at(type_at, "metadata key '", display_text(key), "' has invalid value type ", raw_type);
    if (f.metadata_index_.count(key)) c.fail_at(at, "duplicate metadata key '", display_text(key), "'");
    if (key == "general.alignment") alignment_at = c.pos();
    Value v = read_value(c, ValueType(raw_type), 0);
    f.metadata_index_.emplace(key, f.metadata_.size());
    f.metadata_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = f.find("general.alignment")) {
    const auto n = a->as_int();
    if (!n || a->type == ValueType::BOOL || *n <= 0 || (*n & (*n - 1)) != 0 || *n > (1 << 30))
      c.fail_at(alignment_at, "general.alignment must be a power-of-two integer up to 2^30");
    f.alignment_ = uint64_t(*n);
  } else {
    f.alignment_ = kDefaultAlignment;
  }

  f.tensors_.reserve(size_t(n_tensors));
  std::vector<uint64_t> info_offsets;
  info_offsets.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = c.pos();
    info_offsets.push_back(at);
    TensorInfo t;
    t.name = c.read_string("tensor name");
    if (f.tensor_index_.count(t.name)) c.fail_at(at, "duplicate tensor name '", display_text(t.name), "'");
    const uint64_t dims_at = c.pos();
    const uint32_t n_dims = c.read<uint32_t>("tensor n_dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      c.fail_at(dims_at, "tensor '", display_text(t.name), "' has ", n_dims, " dimensions (1 to ", kMaxDims,
                " allowed)");
    t.ne.resize(n_dims);
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.ne[d] = c.read<uint64_t>("tensor dimension");
      const auto prod = checked_mul<uint64_t>(n_elements, t.ne[d]);
      if (t.ne[d] > uint64_t(std::numeric_limits<int64_t>::max()) || !prod ||
          *prod > uint64_t(std::numeric_limits<int64_t>::max()))
        c.fail_at(dims_at, "tensor '", display_text(t.name), "' element count overflows");
      n_elements = *prod;
    }
    t.n_elements = n_elements;
    const uint64_t type_at = c.pos();
    const uint32_t raw_type = c.read<uint32_t>("tensor type");
    const QuantTypeInfo* qi = quant_type_info(raw_type);
    if (!qi) c.fail_at(type_at, "tensor '", display_text(t.name), "' has unknown type id ", raw_type);
    t.type = qi->type;
    if (t.ne[0] % qi->block_size != 0)
      c.fail_at(dims_at, "tensor '", display_text(t.name), "': ne[0] = ", t.ne[0],
                " is not a multiple of the ", qi->name, " block size ", qi->block_size);
    std::optional<uint64_t> n_bytes = quant_row_bytes(t.type, t.ne[0]);
    for (uint32_t d = 1; d < n_dims && n_bytes; ++d)
      n_bytes = checked_mul<uint64_t>(*n_bytes, t.ne[d]);
    if (!n_bytes) c.fail_at(dims_at, "tensor '", display_text(t.name), "' byte size overflows");
    t.n_bytes = *n_bytes;
    const uint64_t offset_at = c.pos();
    t.offset = c.read<uint64_t>("tensor offset");
    if (t.offset % f.alignment_ != 0)
      c.fail_at(offset_at, "tensor '", display_text(t.name), "' data offset ", t.offset,
                " is not a multiple of the alignment ", f.alignment_);
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t header_end = c.pos();
  const uint64_t pad = (f.alignment_ - header_end % f.alignment_) % f.alignment_;
  f.data_offset_ = header_end + pad;  // cannot overflow: header_end <= file size
  const uint64_t file_size = f.bytes_->size();
  bool any_data = false;
  for (const auto& t : f.tensors_) any_data |= t.n_bytes > 0;
  if (any_data && f.data_offset_ > file_size)
    c.fail_at(header_end, "file ends before the data section (", file_size, " bytes, data at ",
              f.data_offset_, ")");
  const uint64_t data_size = f.data_offset_ <= file_size ? file_size - f.data_offset_ : 0;
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    TensorInfo& t = f.tensors_[i];
    if (!range_within(t.offset, t.n_bytes, data_size))
      c.fail_at(info_offsets[i], "tensor '", display_text(t.name), "' data [", t.offset, ", +", t.n_bytes,
                ") lies outside the ", data_size, "-byte data section");
    t.data = t.n_bytes > 0 ? f.bytes_->data() + f.data_offset_ + t.offset : nullptr;
  }
  return f;
}

const std::string& File::path() const {
  static const std::string empty;
  return bytes_ ? bytes_->path() : empty;
}

const Value* File::find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {
[[noreturn]] void wrong_type(const File& f, std::string_view key, const Value& v,
                             const char* wanted) {
  std::string got(value_type_name(v.type));
  if (const Array* a = v.as_array()) got = str_cat("array of ", value_type_name(a->type));
  fail(f.path(), ": metadata key '", key, "' is ", got, ", expected ", wanted);
}
}  // namespace

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == ValueType::BOOL || v->type == ValueType::STRING || v->type == ValueType::ARRAY ||
      v->type == ValueType::FLOAT32 || v->type == ValueType::FLOAT64)
    wrong_type(*this, key, *v, "an integer");
  const auto i = v->as_int();
  if (!i) fail(path(), ": metadata key '", key, "' value does not fit in int64");
  return i;
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == ValueType::BOOL) wrong_type(*this, key, *v, "a number");
  const auto d = v->as_float();
  if (!d) wrong_type(*this, key, *v, "a number");
  return d;
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  const auto b = v->as_bool();
  if (!b) wrong_type(*this, key, *v, "a bool");
  return b;
}

std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  const std::string* s = v->as_string();
  if (!s) wrong_type(*this, key, *v, "a string");
  return *s;
}

std::vector<std::string> File::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return {};
  const Array* a = v->as_array();
  if (!a || a->type != ValueType::STRING) wrong_type(*this, key, *v, "an array of strings");
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const auto& item : a->items) out.push_back(*item.as_string());
  return out;
}

std::vector<float> File::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return {};
  const Array* a = v->as_array();
  if (!a || a->type == ValueType::STRING || a->type == ValueType::ARRAY ||
      a->type == ValueType::BOOL)
    wrong_type(*this, key, *v, "an array of numbers");
  std::vector<float> out;
  out.reserve(a->items.size());
  for (const auto& item : a->items) out.push_back(float(*item.as_float()));
  return out;
}

std::vector<int64_t> File::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return {};
  const Array* a = v->as_array();
  if (!a || a->type == ValueType::STRING || a->type == ValueType::ARRAY ||
      a->type == ValueType::BOOL || a->type == ValueType::FLOAT32 ||
      a->type == ValueType::FLOAT64)
    wrong_type(*this, key, *v, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(a->items.size());
  for (size_t i = 0; i < a->items.size(); ++i) {
    const auto x = a->items[i].as_int();
    if (!x) fail(path(), ": metadata key '", key, "' item ", i, " does not fit in int64");
    out.push_back(*x);
  }
  return out;
}

std::string File::architecture() const {
  const Value* v = find("general.architecture");
  const std::string* s = v ? v->as_string() : nullptr;
  return s ? *s : std::string();
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace brisk::gguf
