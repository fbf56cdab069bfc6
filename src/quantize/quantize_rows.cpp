#include "quantize/quantize_rows.h"

#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/format.h"

namespace brisk {
namespace {

uint64_t row_bytes(QuantType t, int64_t n_per_row) {
  const auto rb = quant_row_bytes(t, uint64_t(n_per_row));
  BRISK_CHECK(rb.has_value(), "quantize: a row of ", n_per_row, " elements is not whole blocks of ",
              quant_type_info(t).name);
  return *rb;
}

}  // namespace

std::vector<uint8_t> quantize_rows(QuantType type, const float* src, int64_t n_rows, int64_t n_per_row,
                                   ThreadPool& pool) {
  const uint64_t rb = row_bytes(type, n_per_row);
  const auto quantize = format_traits(type).quantize_row_ref;
  BRISK_CHECK(quantize != nullptr, "quantize: no reference quantizer for ", quant_type_info(type).name);
  std::vector<uint8_t> out(size_t(rb) * size_t(n_rows));
  pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      quantize(src + size_t(r) * size_t(n_per_row), out.data() + size_t(r) * rb, n_per_row);
  });
  return out;
}

std::vector<uint8_t> convert_rows(QuantType from, const uint8_t* src, QuantType to, int64_t n_rows,
                                  int64_t n_per_row, ThreadPool& pool) {
  const uint64_t in_rb = row_bytes(from, n_per_row), out_rb = row_bytes(to, n_per_row);
  std::vector<uint8_t> out(size_t(out_rb) * size_t(n_rows));
  if (from == to) {
    std::memcpy(out.data(), src, out.size());
    return out;
  }
  const auto dequantize = format_traits(from).dequantize_row;
  const auto quantize = format_traits(to).quantize_row_ref;
  BRISK_CHECK(dequantize != nullptr, "quantize: cannot read ", quant_type_info(from).name);
  BRISK_CHECK(quantize != nullptr, "quantize: no reference quantizer for ", quant_type_info(to).name);
  pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(n_per_row));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize(src + size_t(r) * in_rb, row.data(), n_per_row);
      quantize(row.data(), out.data() + size_t(r) * out_rb, n_per_row);
    }
  });
  return out;
}

}  // namespace brisk
