// Tensor element / block formats, numbered as GGUF stores them (ggml type ids).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/quant_type.h"

namespace brisk {

// Static facts about a format: elements per block and bytes per block.
struct QuantTypeInfo {
  QuantType type;
  std::string_view name;    // "Q4_K", "F16", ...
  uint32_t block_size;      // elements per block
  uint32_t type_size;       // bytes per block
  bool quantized;           // block format (not a plain scalar type)
};

// nullptr for ids that are not a known format (e.g. from an untrusted file).
const QuantTypeInfo* quant_type_info(uint32_t ggml_type_id);
const QuantTypeInfo& quant_type_info(QuantType t);  // throws brisk::Error for unknown
std::optional<QuantType> quant_type_from_name(std::string_view name);  // case-insensitive
// Bytes for a row of n elements; nullopt when n is not a multiple of the block size or on overflow.
std::optional<uint64_t> quant_row_bytes(QuantType t, uint64_t n);

}  // namespace brisk
