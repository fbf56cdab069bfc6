// The element / block format of a tensor, numbered as GGUF stores them (ggml type ids). The
// facts about each format (block size, bytes per block, names) are in quant/types.h; the id
// alone lives here so that tensor views (core/tensor_view.h) can name it.
#pragma once
#include <cstdint>

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
