// GGUF v3 writer: metadata in insertion order, tensor infos with offsets padded to the
// alignment, then each tensor's bytes padded to the alignment (the layout llama.cpp writes and
// expects: tensor data contiguous in info order).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

#include "core/checked_math.h"
#include "core/error.h"
#include "formats/gguf.h"

namespace brisk::gguf {
namespace {

constexpr size_t kMaxNameBytes = 64;  // GGML_MAX_NAME, including the terminating zero

using Sink = std::function<void(const void*, size_t)>;

template <class T>
void put(const Sink& out, T v) {
  out(&v, sizeof(T));
}

void put_string(const Sink& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out(s.data(), s.size());
}

void put_payload(const Sink& out, const Value& v, const std::string& key);

void check_item_type(const Value& item, ValueType type, const std::string& key) {
  BRISK_CHECK(item.type == type, "gguf writer: key '", key, "': array of ", value_type_name(type),
              " holds an item of type ", value_type_name(item.type));
}

void put_array(const Sink& out, const Array& a, const std::string& key) {
  put<uint32_t>(out, uint32_t(a.type));
  put<uint64_t>(out, a.items.size());
  for (const auto& item : a.items) {
    check_item_type(item, a.type, key);
    put_payload(out, item, key);
  }
}

// Writes the value without its type tag.
void put_payload(const Sink& out, const Value& v, const std::string& key) {
  // The integer, checked to fit the declared type (a value set as u8 must be 0..255).
  auto as_int = [&](auto zero) -> decltype(zero) {
    using T = decltype(zero);
    bool fits = false;
    T r{};
    if (const auto* u = std::get_if<uint64_t>(&v.data)) {
      fits = std::in_range<T>(*u);
      r = T(*u);
    } else if (const auto* i = std::get_if<int64_t>(&v.data)) {
      fits = std::in_range<T>(*i);
      r = T(*i);
    } else {
      fail("gguf writer: key '", key, "': ", value_type_name(v.type), " value holds no integer");
    }
    BRISK_CHECK(fits, "gguf writer: key '", key, "': value does not fit ",
                value_type_name(v.type));
    return r;
  };
  auto as_d = [&]() -> double {
    const auto d = v.as_float();
    BRISK_CHECK(d, "gguf writer: key '", key, "': ", value_type_name(v.type),
                " value holds no number");
    return *d;
  };
  switch (v.type) {
    case ValueType::UINT8: put<uint8_t>(out, as_int(uint8_t{})); break;
    case ValueType::INT8: put<int8_t>(out, as_int(int8_t{})); break;
    case ValueType::UINT16: put<uint16_t>(out, as_int(uint16_t{})); break;
    case ValueType::INT16: put<int16_t>(out, as_int(int16_t{})); break;
    case ValueType::UINT32: put<uint32_t>(out, as_int(uint32_t{})); break;
    case ValueType::INT32: put<int32_t>(out, as_int(int32_t{})); break;
    case ValueType::UINT64: put<uint64_t>(out, as_int(uint64_t{})); break;
    case ValueType::INT64: put<int64_t>(out, as_int(int64_t{})); break;
    case ValueType::FLOAT32: put<float>(out, float(as_d())); break;
    case ValueType::FLOAT64: put<double>(out, as_d()); break;
    case ValueType::BOOL: {
      const auto b = v.as_bool();
      BRISK_CHECK(b, "gguf writer: key '", key, "': bool value holds no bool");
      put<uint8_t>(out, *b ? 1 : 0);
      break;
    }
    case ValueType::STRING: {
      const std::string* s = v.as_string();
      BRISK_CHECK(s, "gguf writer: key '", key, "': string value holds no string");
      put_string(out, *s);
      break;
    }
    case ValueType::ARRAY: {
      const Array* a = v.as_array();
      BRISK_CHECK(a, "gguf writer: key '", key, "': array value holds no array");
      put_array(out, *a, key);
      break;
    }
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void Writer::set(std::string key, Value value) {
  for (auto& kv : metadata_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void Writer::set_alignment(uint64_t alignment) {
  BRISK_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0 && alignment <= (1u << 30),
              "gguf writer: alignment ", alignment, " is not a power of two up to 2^30");
  alignment_ = alignment;
  set("general.alignment", Value::from_u32(uint32_t(alignment)));
}

void Writer::add_tensor(std::string name, QuantType type, std::vector<uint64_t> ne,
                        const void* data, uint64_t n_bytes) {
  for (const auto& t : tensors_)
    BRISK_CHECK(t.name != name, "gguf writer: duplicate tensor '", name, "'");
  BRISK_CHECK(name.size() < kMaxNameBytes, "gguf writer: tensor name '", name, "' is ",
              name.size(), " bytes; llama.cpp accepts at most ", kMaxNameBytes - 1);
  BRISK_CHECK(!ne.empty() && ne.size() <= kMaxDims, "gguf writer: tensor '", name, "' has ",
              ne.size(), " dimensions (1 to ", kMaxDims, " allowed)");
  const QuantTypeInfo& qi = quant_type_info(type);
  auto expected = quant_row_bytes(type, ne[0]);
  BRISK_CHECK(expected, "gguf writer: tensor '", name, "': ne[0] = ", ne[0],
              " is not a multiple of the ", qi.name, " block size ", qi.block_size);
  for (size_t d = 1; d < ne.size() && expected; ++d) expected = checked_mul(*expected, ne[d]);
  BRISK_CHECK(expected && *expected == n_bytes, "gguf writer: tensor '", name, "': ", n_bytes,
              " bytes given, its shape and type need ",
              expected ? str_cat(*expected) : std::string("an overflowing size"));
  BRISK_CHECK(data || n_bytes == 0, "gguf writer: tensor '", name, "' has no data");
  tensors_.push_back(PendingTensor{.name = std::move(name), .type = type, .ne = std::move(ne),
                                   .data = data, .n_bytes = n_bytes});
}

// The file's bytes in order, to `out`.
void Writer::emit(const Sink& out) const {
  uint64_t written = 0;
  const Sink counted = [&](const void* p, size_t n) {
    out(p, n);
    written += n;
  };
  const auto pad_to = [&](uint64_t alignment) {
    static const uint8_t zeros[64] = {};
    uint64_t pad = align_up(written, alignment) - written;
    while (pad > 0) {
      const size_t n = size_t(std::min<uint64_t>(pad, sizeof zeros));
      counted(zeros, n);
      pad -= n;
    }
  };
  counted("GGUF", 4);
  put<uint32_t>(counted, 3);
  put<uint64_t>(counted, tensors_.size());
  put<uint64_t>(counted, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    put_string(counted, key);
    put<uint32_t>(counted, uint32_t(value.type));
    put_payload(counted, value, key);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(counted, t.name);
    put<uint32_t>(counted, uint32_t(t.ne.size()));
    for (uint64_t n : t.ne) put<uint64_t>(counted, n);
    put<uint32_t>(counted, uint32_t(t.type));
    put<uint64_t>(counted, offset);
    offset = align_up(offset + t.n_bytes, alignment_);
  }
  // Like llama.cpp's Python writer: a file without tensors ends right after its metadata.
  if (!tensors_.empty()) pad_to(alignment_);
  for (const auto& t : tensors_) {
    counted(t.data, size_t(t.n_bytes));
    pad_to(alignment_);
  }
}

void Writer::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* fp = std::fopen(tmp.c_str(), "wb");
  BRISK_CHECK(fp, tmp, ": cannot create: ", std::strerror(errno));
  bool ok = true;
  try {
    emit([&](const void* p, size_t n) {
      if (ok && n > 0 && std::fwrite(p, 1, n, fp) != n) ok = false;
    });
  } catch (...) {
    std::fclose(fp);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(fp) != 0) ok = false;
  if (!ok) {
    std::remove(tmp.c_str());
    fail(path, ": write failed: ", std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path, ": cannot rename from ", tmp, ": ", std::strerror(errno));
  }
}

std::shared_ptr<const MappedFile> Writer::write_to_memory(std::string name) const {
  size_t size = 0;
  emit([&](const void*, size_t n) { size += n; });
  return MappedFile::filled(size, std::move(name), [&](uint8_t* dst) {
    size_t at = 0;
    emit([&](const void* p, size_t n) {
      if (n > 0) std::memcpy(dst + at, p, n);
      at += n;
    });
  });
}

}  // namespace brisk::gguf
