// Row-parallel conversion of a matrix to a stored format with the reference quantizers
// (format_traits(t).quantize_row_ref), and of any stored format back to float32 rows.
#pragma once
#include <cstdint>
#include <vector>

#include "quant/types.h"

namespace brisk {

class ThreadPool;

// src: [n_rows, n_per_row] float32 -> n_rows rows of `type` (n_per_row whole blocks).
std::vector<uint8_t> quantize_rows(QuantType type, const float* src, int64_t n_rows, int64_t n_per_row,
                                   ThreadPool& pool);
// src: n_rows rows of `from` -> n_rows rows of `to`, through float32 one row at a time.
// Equal types copy the bytes.
std::vector<uint8_t> convert_rows(QuantType from, const uint8_t* src, QuantType to, int64_t n_rows,
                                  int64_t n_per_row, ThreadPool& pool);

}  // namespace brisk
