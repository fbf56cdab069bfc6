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
#include "kernels/cpu/gemm_float.h"
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
void matmul_tiles(const MatmulArgs& a, const void* act, const void* packed, uint64_t act_epoch, int64_t tile_begin,
                  int64_t tile_end) {
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
  // Float weights in prefill: the float GEMM (gemm_float.h) on the same activation rows.
  if (n_tok >= kernels::kGemmMinTokens && kernels::gemm_float_available(a.w.type)) {
    kernels::gemm_float_rows({.weight_type = a.w.type, .w = a.w.row(row_begin), .row_bytes = a.w.row_bytes,
                              .n_rows = row_end - row_begin, .k = a.w.n_in, .x = x0, .x_stride = x_stride,
                              .x_type = format_traits(a.w.type).vec_dot_type, .n_tokens = n_tok,
                              .y = a.out.row(0) + row_begin, .y_stride = a.out.row_stride()});
    if (a.bias)
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t r = row_begin; r < row_end; ++r) a.out.row(t)[r] += a.bias[r];
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
                                .y_stride = a.out.row_stride(), .x_epoch = act_epoch});
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

void matmul_rows(const MatmulArgs& a, const void* act, const void* packed, int ith, int nth, uint64_t act_epoch) {
  int64_t tile_begin, tile_end;
  split_range(row_tiles(a), ith, nth, &tile_begin, &tile_end);
  matmul_tiles(a, act, packed, act_epoch, tile_begin, tile_end);
}

namespace {
// Tiles [begin, end) of the matmuls' row tiles taken as one sequence.
void list_tiles(const MatmulArgs* list, int n, const void* act, const void* packed, uint64_t act_epoch, int64_t begin,
                int64_t end) {
  int64_t first = 0;  // the first tile of matmul i in the sequence
  for (int i = 0; i < n && first < end; ++i) {
    const int64_t tiles = row_tiles(list[i]);
    const int64_t b = std::max(begin, first) - first, e = std::min(end, first + tiles) - first;
    if (b < e) matmul_tiles(list[i], act, packed, act_epoch, b, e);
    first += tiles;
  }
}

int64_t list_tile_count(const MatmulArgs* list, int n) {
  int64_t total = 0;
  for (int i = 0; i < n; ++i) total += row_tiles(list[i]);
  return total;
}

// Decode lists (at most 8 tokens, no GEMM) cut their row tiles as one sequence.
bool joint_decode_split(const MatmulArgs* list, const void* packed) {
  return !packed && list[0].x.rows <= kTokenGroup && !flags().no_joint_split;
}

constexpr uint64_t pack_range(int64_t lo, int64_t hi) { return uint64_t(lo) | (uint64_t(hi) << 32); }
constexpr int64_t range_lo(uint64_t r) { return int64_t(r & 0xffffffffu); }
constexpr int64_t range_hi(uint64_t r) { return int64_t(r >> 32); }

// Claims a piece of the unclaimed range r (front: from lo, else from hi): half of what is left,
// at least min_piece tiles. False when nothing is left.
bool claim_piece(std::atomic<uint64_t>& r, bool front, int64_t min_piece, int64_t* begin, int64_t* end) {
  uint64_t cur = r.load(std::memory_order_acquire);
  for (;;) {
    const int64_t lo = range_lo(cur), hi = range_hi(cur);
    if (lo >= hi) return false;
    const int64_t take = std::min(hi - lo, std::max(min_piece, (hi - lo + 1) / 2));
    const uint64_t next = front ? pack_range(lo + take, hi) : pack_range(lo, hi - take);
    if (r.compare_exchange_weak(cur, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
      *begin = front ? lo : hi - take;
      *end = front ? lo + take : hi;
      return true;
    }
  }
}
}  // namespace

void matmul_list_rows(const MatmulArgs* list, int n, const void* act, const void* packed, int ith, int nth,
                      uint64_t act_epoch) {
  if (!joint_decode_split(list, packed)) {
    for (int i = 0; i < n; ++i) matmul_rows(list[i], act, packed, ith, nth, act_epoch);
    return;
  }
  // Decode: the matmuls' row tiles as one sequence, cut into contiguous parts.
  int64_t begin, end;
  split_range(list_tile_count(list, n), ith, nth, &begin, &end);
  list_tiles(list, n, act, packed, act_epoch, begin, end);
}

bool matmul_balanced_split(const MatmulArgs* list, int n, const void* packed, int nth, TileClaims& claims,
                           size_t min_share_bytes, size_t min_piece_bytes) {
  if (!joint_decode_split(list, packed) || nth < 2 || nth > TileClaims::kMaxParts || flags().no_balanced_split)
    return false;
  double bytes = 0.0;
  for (int i = 0; i < n; ++i) bytes += double(list[i].w.row_bytes) * double(list[i].w.n_out);
  if (bytes < double(min_share_bytes) * double(nth)) return false;
  const int64_t total = list_tile_count(list, n);
  if (total >= (int64_t(1) << 31)) return false;  // ranges are packed in 32 bits
  for (int i = 0; i < nth; ++i) {
    int64_t b, e;
    split_range(total, i, nth, &b, &e);
    claims.range[i].store(pack_range(b, e), std::memory_order_relaxed);
  }
  const double tile_bytes = bytes / double(total);
  claims.min_piece = std::max<int64_t>(1, int64_t(double(min_piece_bytes) / tile_bytes));
  return true;
}

void matmul_list_rows_balanced(const MatmulArgs* list, int n, const void* act, const void* packed, int ith, int nth,
                               TileClaims& claims, uint64_t act_epoch) {
  int64_t b, e;
  while (claim_piece(claims.range[ith], true, claims.min_piece, &b, &e)) list_tiles(list, n, act, packed, act_epoch, b, e);
  for (int k = 1; k < nth; ++k)
    while (claim_piece(claims.range[(ith + k) % nth], false, claims.min_piece, &b, &e))
      list_tiles(list, n, act, packed, act_epoch, b, e);
}

}  // namespace brisk::cpu
