// safetensors reader: header validation (JSON shape, dtypes, offsets contiguous and inside the
// file, shape product × dtype size == byte span), single files, folders and sharded checkpoints.
#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/checked_math.h"
#include "core/error.h"
#include "formats/display.h"
#include "formats/json_file.h"

namespace brisk::safetensors {
namespace {

namespace fs = std::filesystem;

// The safetensors format caps the JSON header at 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kMaxDims = 16;

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F64, "F64", 8},         {DType::F32, "F32", 4},       {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},       {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::I64, "I64", 8},         {DType::I32, "I32", 4},       {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},           {DType::U64, "U64", 8},       {DType::U32, "U32", 4},
    {DType::U16, "U16", 2},         {DType::U8, "U8", 1},         {DType::BOOL, "BOOL", 1},
};

const DTypeInfo* dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

template <class... Args>
[[noreturn]] void header_error(const std::string& file, Args&&... args) {
  fail(file, ": offset 8: header ", std::forward<Args>(args)...);
}

uint64_t json_u64(const nlohmann::json& j, const std::string& file, const std::string& what) {
  if (!j.is_number_unsigned()) {
    if (j.is_number_integer() && j.get<int64_t>() >= 0) return uint64_t(j.get<int64_t>());
    header_error(file, what, " is not a non-negative integer");
  }
  return j.get<uint64_t>();
}

}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  return "unknown";
}

size_t dtype_size(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.size;
  return 0;
}

void Checkpoint::add_file(std::shared_ptr<const MappedFile> bytes) {
  BRISK_CHECK(bytes, "safetensors: no file given");
  const std::string& file = bytes->path();
  const uint64_t size = bytes->size();
  BRISK_CHECK(size >= 8, file, ": offset 0: file is ", size,
              " bytes, too short for the safetensors header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes->data(), 8);
  BRISK_CHECK(header_len <= kMaxHeaderBytes, file, ": offset 0: header length ", header_len,
              " exceeds the 100 MB limit");
  BRISK_CHECK(header_len <= size - 8, file, ": offset 0: header length ", header_len,
              " exceeds the ", size - 8, " bytes after it");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes->data() + 8, bytes->data() + data_start);
  } catch (const nlohmann::json::exception& e) {
    fail(file, ": offset 8: header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) header_error(file, "is not a JSON object");

  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  const size_t first_new = tensors_.size();
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) header_error(file, "__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) header_error(file, "__metadata__ value '", display_text(k), "' is not a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = str_cat("tensor '", display_text(name), "'");
    if (!entry.is_object()) header_error(file, where, " is not an object");
    const auto dt = entry.find("dtype");
    const auto sh = entry.find("shape");
    const auto off = entry.find("data_offsets");
    if (dt == entry.end() || !dt->is_string()) header_error(file, where, " has no string dtype");
    if (sh == entry.end() || !sh->is_array()) header_error(file, where, " has no shape array");
    if (off == entry.end() || !off->is_array() || off->size() != 2)
      header_error(file, where, " has no [begin, end] data_offsets");
    const DTypeInfo* di = dtype_from_name(dt->get<std::string>());
    if (!di) header_error(file, where, " has unsupported dtype '", display_text(dt->get<std::string>()), "'");
    if (sh->size() > kMaxDims) header_error(file, where, " has ", sh->size(), " dimensions");

    TensorInfo t;
    t.name = name;
    t.dtype = di->type;
    t.file = file;
    std::optional<uint64_t> n = 1;
    for (const auto& d : *sh) {
      t.shape.push_back(json_u64(d, file, where + " shape entry"));
      if (n) n = checked_mul<uint64_t>(*n, t.shape.back());
    }
    if (!n) header_error(file, where, " element count overflows");
    t.n_elements = *n;
    const auto n_bytes = checked_mul<uint64_t>(*n, di->size);
    if (!n_bytes) header_error(file, where, " byte size overflows");
    const uint64_t begin = json_u64((*off)[0], file, where + " data_offsets[0]");
    const uint64_t end = json_u64((*off)[1], file, where + " data_offsets[1]");
    if (begin > end) header_error(file, where, " data_offsets [", begin, ", ", end, "] reversed");
    if (end > data_size)
      header_error(file, where, " data_offsets end ", end, " exceeds the ", data_size,
                   "-byte data section");
    if (end - begin != *n_bytes)
      header_error(file, where, " spans ", end - begin, " bytes but shape × ", di->name,
                   " needs ", *n_bytes);
    t.n_bytes = *n_bytes;
    t.data = bytes->data() + data_start + begin;
    if (index_.count(name)) header_error(file, where, " appears twice");
    index_.emplace(name, tensors_.size());
    spans.push_back(Span{.begin = begin, .end = end, .index = tensors_.size()});
    tensors_.push_back(std::move(t));
  }

  // The data section must be covered exactly: no gaps, no overlaps, nothing left over.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (const auto& s : spans) {
    if (s.begin != expect)
      header_error(file, "tensor '", display_text(tensors_[s.index].name), "' starts at ", s.begin,
                   s.begin < expect ? " overlapping the previous tensor" : " leaving a gap",
                   " (expected ", expect, ")");
    expect = s.end;
  }
  if (expect != data_size)
    fail(file, ": offset ", data_start + expect, ": ", data_size - expect,
         " bytes after the last tensor are not described by the header");
  // Keep file order stable: tensors sorted by data offset within a file.
  std::vector<TensorInfo> ordered;
  ordered.reserve(spans.size());
  for (const auto& s : spans) ordered.push_back(std::move(tensors_[s.index]));
  tensors_.resize(first_new);
  for (auto& t : ordered) {
    index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  files_.push_back(std::move(bytes));
}

Checkpoint Checkpoint::parse(std::shared_ptr<const MappedFile> bytes) {
  Checkpoint c;
  c.add_file(std::move(bytes));
  return c;
}

Checkpoint Checkpoint::open(const std::string& path, MappedFile::Mode mode) {
  std::error_code ec;
  const fs::path p(path);
  fs::path index;
  std::vector<fs::path> shards;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "model.safetensors.index.json", ec)) {
      index = p / "model.safetensors.index.json";
    } else if (fs::exists(p / "model.safetensors", ec)) {
      shards.push_back(p / "model.safetensors");
    } else {
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.path().extension() == ".safetensors") shards.push_back(e.path());
      std::sort(shards.begin(), shards.end());
      BRISK_CHECK(!shards.empty(), path, ": no model.safetensors, index or *.safetensors file");
    }
  } else if (p.extension() == ".json") {
    index = p;
  } else {
    shards.push_back(p);
  }

  Checkpoint c;
  if (!index.empty()) {
    const nlohmann::json j = read_json_file(index.string());
    const auto wm = j.find("weight_map");
    BRISK_CHECK(j.is_object() && wm != j.end() && wm->is_object(), index.string(),
                ": no \"weight_map\" object");
    std::vector<std::string> names;
    for (const auto& [tensor, shard] : wm->items()) {
      BRISK_CHECK(shard.is_string(), index.string(), ": weight_map entry '", display_text(tensor),
                  "' is not a file name");
      const std::string s = shard.get<std::string>();
      BRISK_CHECK(!s.empty() && s.find('/') == std::string::npos &&
                      s.find('\\') == std::string::npos && s != "." && s != "..",
                  index.string(), ": weight_map entry '", display_text(tensor), "' names '", display_text(s),
                  "', not a plain file name in the same folder");
      if (std::find(names.begin(), names.end(), s) == names.end()) names.push_back(s);
    }
    std::sort(names.begin(), names.end());
    for (const auto& s : names) c.add_file(MappedFile::open((index.parent_path() / s).string(), mode));
    for (const auto& [tensor, shard] : wm->items()) {
      const TensorInfo* t = c.find(tensor);
      BRISK_CHECK(t, index.string(), ": tensor '", display_text(tensor), "' is not in its shard ",
                  display_text(shard.get<std::string>()));
      BRISK_CHECK(fs::path(t->file).filename() == shard.get<std::string>(), index.string(),
                  ": tensor '", display_text(tensor), "' is in ", t->file, ", not in ",
                  display_text(shard.get<std::string>()));
    }
  } else {
    for (const auto& s : shards) c.add_file(MappedFile::open(s.string(), mode));
  }
  return c;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace brisk::safetensors
