// Tensor element / block formats, numbered as GGUF stores them (ggml type ids).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace brisk {

enum class QuantType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
  // In-memory layouts of the engine, never read from or written to a file (quant/repack.h):
  // Q4_0 / Q5_0 / Q8_0 rows rearranged for the CPU decode kernels, same bytes per block.
  Q4_0_R16 = 1002, Q5_0_R16 = 1006, Q8_0_R16 = 1008,
};

}  // namespace brisk

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
