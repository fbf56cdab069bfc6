// safetensors: u64 little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets: [begin, end]}, "__metadata__": {...}}, then the data. Single files, folders and
// sharded checkpoints (model.safetensors.index.json). Header and offsets are validated.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/mapped_file.h"

namespace brisk::safetensors {

enum class DType { F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U64, U32, U16, U8, BOOL };
std::string_view dtype_name(DType t);
size_t dtype_size(DType t);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;  // row-major as in the file: shape[0] is the OUTERMOST dimension
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapped shard
  std::string file;               // shard path
};

class Checkpoint {
 public:
  // `path`: a .safetensors file, a folder holding model.safetensors or
  // model.safetensors.index.json (or any *.safetensors), or an index file.
  static Checkpoint open(const std::string& path, MappedFile::Mode mode = MappedFile::Mode::mmap);
  // Parses one file's bytes (tests and fuzzers).
  static Checkpoint parse(std::shared_ptr<const MappedFile> bytes);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  void add_file(std::shared_ptr<const MappedFile> bytes);
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Converts any floating or integer tensor to float32 (F8_E4M3 per the OCP FP8 spec).
std::vector<float> to_f32(const TensorInfo& t);

}  // namespace brisk::safetensors
