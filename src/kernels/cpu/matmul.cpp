// Matmul driver: out[t, o] = dot(W[o, :], x[t, :]) (+ bias[o]) for a weight in any stored
// format. As in GGUF consumers, the activations are converted once per call to the weight
// format's vec_dot_type (e.g. Q8_0 for Q8_0/Q4_0 weights, Q8_K for K-quants, F16 for F16) with
// the best activation quantizer of this CPU; the dot products are the quant module's selected
// kernels (kernels/cpu/dot.h: AVX-512 / AVX2 / scalar, with their kill switches), called
// through gemv_rows_multi so that each weight row is read once for up to 8 tokens.
//
// Work split: output rows in tiles of 16, contiguous ranges of tiles per thread. Within a
// thread, blocks of 64 rows are swept over all tokens in groups of 8, so prefill reuses a
// block of weights from cache across the whole batch. Decode (1 token) is one GEMV per thread.
// Prefill (more than 8 tokens) of a format with a GEMM kernel (kernels/cpu/gemm.h) runs the
// thread's rows through gemm_rows instead, on activations quantized and repacked once for all
// threads (BRISK_NO_GEMM: the GEMV path above).
#include <algorithm>

#include "core/error.h"
#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"
#include "quant/format.h"

namespace brisk::cpu {

namespace {
constexpr int64_t kRowTile = 16;
constexpr int64_t kRowBlock = 64;
constexpr int kTokenGroup = 8;
}  // namespace

size_t matmul_act_row_bytes(QuantType weight_type, int64_t n_in) {
  const QuantType vt = format_traits(weight_type).vec_dot_type;
  const auto bytes = quant_row_bytes(vt, uint64_t(n_in));
  BRISK_CHECK(bytes.has_value(), "matmul: row of ", n_in, " elements does not fit format ",
              quant_type_info(vt).name);
  return size_t(*bytes);
}

namespace {
bool uses_gemm(const MatmulArgs& a) {
  return format_traits(a.w.type).vec_dot_type != QuantType::F32 && a.x.rows >= kernels::kGemmMinTokens &&
         kernels::gemm_available(a.w.type);
}

kernels::GemmParams gemm_params(const MatmulArgs& a, const void* act, int64_t row_begin, int64_t row_end) {
  return {.weight_type = a.w.type, .w = a.w.row(row_begin), .row_bytes = a.w.row_bytes,
          .n_rows = row_end - row_begin, .k = a.w.n_in, .x_quant = act,
          .x_stride = matmul_act_row_bytes(a.w.type, a.w.n_in), .n_tokens = a.x.rows,
          .y = a.out.row(0) + row_begin, .y_stride = a.out.row_stride()};
}
}  // namespace

size_t matmul_packed_bytes(const MatmulArgs& a) {
  return uses_gemm(a) ? kernels::gemm_packed_bytes(a.w.type, a.w.n_in, a.x.rows) : 0;
}

bool matmul_shares_input(const MatmulArgs& a, const MatmulArgs& b) {
  if (a.x.data != b.x.data || a.x.rows != b.x.rows || a.x.cols != b.x.cols || a.x.row_stride() != b.x.row_stride() ||
      a.w.n_in != b.w.n_in || format_traits(a.w.type).vec_dot_type != format_traits(b.w.type).vec_dot_type)
    return false;
  const bool ga = uses_gemm(a), gb = uses_gemm(b);
  if (ga != gb) return false;
  return !ga || kernels::gemm_packing_shared(a.w.type, b.w.type);
}

void matmul_quantize_rows(const MatmulArgs& a, void* act, void* packed, int ith, int nth) {
  const QuantType vt = format_traits(a.w.type).vec_dot_type;
  if (vt == QuantType::F32) return;  // rows are used in place
  const QuantizeRowFn quantize = kernels::select_quantize_activation(vt);
  const size_t rb = matmul_act_row_bytes(a.w.type, a.w.n_in);
  auto quantize_range = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      quantize(a.x.row(t), static_cast<uint8_t*>(act) + size_t(t) * rb, a.w.n_in);
  };
  int64_t begin, end;
  if (!packed) {
    split_range(a.x.rows, ith, nth, &begin, &end);
    quantize_range(begin, end);
    return;
  }
  // Whole groups of tokens per thread: each thread packs the rows it quantized itself.
  const int64_t n_groups = (a.x.rows + kernels::kGemmGroup - 1) / kernels::kGemmGroup;
  split_range(n_groups, ith, nth, &begin, &end);
  quantize_range(begin * kernels::kGemmGroup, std::min(a.x.rows, end * kernels::kGemmGroup));
  kernels::gemm_pack_tokens(gemm_params(a, act, 0, 0), packed, begin, end);
}

namespace {
int64_t row_tiles(const MatmulArgs& a) { return (a.w.n_out + kRowTile - 1) / kRowTile; }

// Output rows [tile_begin * 16, tile_end * 16) of one matmul.
void matmul_tiles(const MatmulArgs& a, const void* act, const void* packed, int64_t tile_begin, int64_t tile_end) {
  const bool in_place = format_traits(a.w.type).vec_dot_type == QuantType::F32;
  const size_t x_stride = in_place ? sizeof(float) * size_t(a.x.row_stride()) : matmul_act_row_bytes(a.w.type, a.w.n_in);
  const uint8_t* x0 = in_place ? reinterpret_cast<const uint8_t*>(a.x.data) : static_cast<const uint8_t*>(act);
  const int64_t n_tok = a.x.rows;
  const int64_t row_begin = tile_begin * kRowTile;
  const int64_t row_end = std::min(a.w.n_out, tile_end * kRowTile);
  if (row_begin >= row_end) return;
  if (!in_place && uses_gemm(a)) {
    kernels::GemmParams gp = gemm_params(a, x0, row_begin, row_end);
    gp.x_packed = packed;
    kernels::gemm_rows(gp);
    if (a.bias) {
      for (int64_t t = 0; t < n_tok; ++t) {
        float* y = a.out.row(t);
        for (int64_t r = row_begin; r < row_end; ++r) y[r] += a.bias[r];
      }
    }
    return;
  }
  // One token group (decode): one GEMV over all the rows, so the kernel prepares the activations
  // once; more tokens: blocks of rows reused from cache across the token groups.
  const int64_t row_block = n_tok <= kTokenGroup ? row_end - row_begin : kRowBlock;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += row_block) {
    const int64_t r1 = std::min(row_end, r0 + row_block);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokenGroup) {
      const int nt = int(std::min<int64_t>(kTokenGroup, n_tok - t0));
      kernels::gemv_rows_multi({.weight_type = a.w.type, .w = a.w.row(r0), .row_bytes = a.w.row_bytes,
                                .n_rows = r1 - r0, .k = a.w.n_in, .x_quant = x0 + size_t(t0) * x_stride,
                                .x_stride = x_stride, .n_tokens = nt, .y = a.out.row(t0) + r0,
                                .y_stride = a.out.row_stride()});
      if (a.bias) {
        for (int t = 0; t < nt; ++t) {
          float* y = a.out.row(t0 + t);
          for (int64_t r = r0; r < r1; ++r) y[r] += a.bias[r];
        }
      }
    }
  }
}
}  // namespace

void matmul_rows(const MatmulArgs& a, const void* act, const void* packed, int ith, int nth) {
  int64_t tile_begin, tile_end;
  split_range(row_tiles(a), ith, nth, &tile_begin, &tile_end);
  matmul_tiles(a, act, packed, tile_begin, tile_end);
}

void matmul_list_rows(const MatmulArgs* list, int n, const void* act, const void* packed, int ith, int nth) {
  if (packed || list[0].x.rows > kTokenGroup || flags().no_joint_split) {
    for (int i = 0; i < n; ++i) matmul_rows(list[i], act, packed, ith, nth);
    return;
  }
  // Decode: the matmuls' row tiles as one sequence, cut into contiguous parts.
  int64_t total = 0;
  for (int i = 0; i < n; ++i) total += row_tiles(list[i]);
  int64_t begin, end;
  split_range(total, ith, nth, &begin, &end);
  int64_t first = 0;  // the first tile of matmul i in the sequence
  for (int i = 0; i < n && first < end; ++i) {
    const int64_t tiles = row_tiles(list[i]);
    const int64_t b = std::max(begin, first) - first, e = std::min(end, first + tiles) - first;
    if (b < e) matmul_tiles(list[i], act, packed, b, e);
    first += tiles;
  }
}

}  // namespace brisk::cpu
