// AVX-512 attention (same contract as attention_rows in attention.cpp: causal, GQA, sliding
// window, soft-capping; the scalar kernel in kernels/cpu/ref.h is the reference).
//
// Work items are (token, KV head) pairs: the query heads of one GQA group share every K/V row,
// which is loaded (and converted from F16 / dequantized from Q8_0) once for all of them. Per
// item, in three passes over its positions (a two-pass softmax, no running rescale):
//   1. scores  (group, n_pos) floats: q_h · k_j * scale (soft-capped), 16 positions at a time,
//              one partial vector per position reduced 16 at a time by a transpose-and-add
//              tree; the running max per head. F16 K with head_dim 64 / 128: the tile is
//              converted into a pair layout (8 dims of two positions per vector), so a head's
//              FMAs leave one vector per two positions and the tree has 3 levels, not 4
//              (BRISK_NO_ATTN_PAIRS: the one-vector-per-position form). A tiled F16 K cache
//              (KvView::tiled: a tile's 16 positions of one dim are one vector) needs no
//              reduction: per dim, one conversion and one FMA per head with q_h[d] broadcast,
//              over the cache's own tiles (the first and last masked to the range), two tiles
//              at a time so that twice as many independent FMA chains are in flight
//   2. weights p = exp(score - max) in place (vectorized exp), and their sum per head
//   3. output  acc_h = sum_j p_hj * v_j: per 16-float chunk of the head, the group's heads keep
//              one accumulator each and share every V load, so the FMA chains are independent
//              (the online-softmax form had one long dependent chain per head and tile)
// Scores live in a per-thread buffer of group rows; a range of at most kSplitChunk positions (a
// chunk of a split decode) uses a fixed row stride, so pass 3 reads the G weights of a position
// at constant offsets from one register. Needs head_dim 16, 32, 64, 128 or 256 and
// a group of at most 16 heads (attention_avx512_supports; the caller checks).
// GCC 12's AVX-512 headers trip its own (maybe-)uninitialized warnings (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/flags.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd_math_avx512.h"

namespace brisk::cpu {

namespace {

constexpr int kTile = 16;

// Rows j0..j0+n-1 of one KV head as floats into out (kTile, hd); rows n..15 zero. The block of
// a row is looked up once per run of rows inside one block.
void load_tile(const KvView& v, int64_t seq, int64_t j0, int n, size_t byte_off, int32_t hd, float* out) {
  for (int j = 0; j < n;) {
    const uint8_t* src = v.row(seq, j0 + j) + byte_off;
    const int end = int(std::min<int64_t>(n, j + v.run(j0 + j)));
    for (; j < end; ++j, src += v.row_bytes) {
      float* dst = out + size_t(j) * size_t(hd);
      if (v.type == QuantType::F16) {
        for (int32_t i = 0; i < hd; i += 16)
          _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(src) + i))));
      } else if (v.type == QuantType::BF16) {
        for (int32_t i = 0; i < hd; i += 16)
          _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(
                                        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                            reinterpret_cast<const uint16_t*>(src) + i))),
                                        16)));
      } else if (v.type == QuantType::F32) {
        std::memcpy(dst, src, sizeof(float) * size_t(hd));
      } else {
        row_to_f32(v.type, src, dst, hd);
      }
    }
  }
  if (n < kTile) std::memset(out + size_t(n) * size_t(hd), 0, sizeof(float) * size_t(kTile - n) * size_t(hd));
}

// Rows of the F16 tile that share a vector in the pair layout: pair p holds rows kPairRows[2p]
// (lanes 0-7) and kPairRows[2p + 1] (lanes 8-15). With this order the reduction in
// reduce_pairs leaves the 16 scores in position order.
constexpr int kPairRows[kTile] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};

// Rows j0..j0+n-1 of one KV head of an F16 cache into out (8 pairs, 2 * hd / 16 vectors of 16
// floats each) in the pair layout: vector (p, c) holds dims 8c..8c+7 of the two rows of pair p,
// so a head's FMAs over a pair leave 8 partial sums per row in one vector. Rows n..15 are zero.
void load_tile_pairs_f16(const KvView& v, int64_t seq, int64_t j0, int n, size_t byte_off, int32_t hd, float* out) {
  alignas(64) static const uint16_t zeros[256] = {};
  const uint8_t* rows[kTile];
  for (int j = 0; j < kTile;) {
    if (j >= n) {
      rows[j++] = reinterpret_cast<const uint8_t*>(zeros);
      continue;
    }
    const uint8_t* src = v.row(seq, j0 + j) + byte_off;
    const int end = int(std::min<int64_t>(n, j + v.run(j0 + j)));
    for (; j < end; ++j, src += v.row_bytes) rows[j] = src;
  }
  const int chunks = hd / 8;  // vectors per pair
  for (int p = 0; p < kTile / 2; ++p) {
    const uint8_t* lo = rows[kPairRows[2 * p]];
    const uint8_t* hi = rows[kPairRows[2 * p + 1]];
    float* dst = out + size_t(p) * size_t(chunks) * 16;
    for (int c = 0; c < chunks; ++c) {
      const __m256i h = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + 16 * c))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + 16 * c)), 1);
      _mm512_storeu_ps(dst + 16 * c, _mm512_cvtph_ps(h));
    }
  }
}

// v[p] (8 vectors): lanes 0-7 partial sums of the row kPairRows[2p], lanes 8-15 of the row
// kPairRows[2p + 1]; returns the 16 row sums in row order. The first three levels of the
// transpose-and-add tree of hsum16x16 (the layout did the fourth): 21 operations against 45.
inline __m512 reduce_pairs(const __m512* v) {
  __m512 a[4], b[2];
  for (int i = 0; i < 4; ++i)
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i) {
    const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
    b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xDD));
}

// Scores of G heads over one tile of a tiled F16 K cache: out[g] (16 positions) = sum over d
// of q[g * NC * 16 + d] * tile[d] (tile: one head's [NC * 16, 16] halves). With fewer than 4
// heads the dims alternate between two sums per head, so that enough FMA chains are in flight.
template <int NC, int G>
inline void score_tile_cols(const uint16_t* tile, const float* q, __m512* out) {
  constexpr int hd = NC * 16;
  constexpr int S = G < 4 ? 2 : 1;
  __m512 acc[S][G];
  for (int k = 0; k < S; ++k)
    for (int g = 0; g < G; ++g) acc[k][g] = _mm512_setzero_ps();
  for (int d = 0; d < hd; d += S) {
    for (int k = 0; k < S; ++k) {
      const __m512 kd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + (d + k) * 16)));
      for (int g = 0; g < G; ++g) acc[k][g] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * hd + d + k]), kd, acc[k][g]);
    }
  }
  for (int g = 0; g < G; ++g) out[g] = S == 2 ? _mm512_add_ps(acc[0][g], acc[S - 1][g]) : acc[0][g];
}

// The same for two tiles at once (ta -> oa, tb -> ob): each tile's sums are formed exactly as
// score_tile_cols forms them (the same bits), but the two sets of FMA chains share each
// broadcast of q and are independent, so twice as many are in flight (one tile's G chains of
// 4-cycle FMAs leave the FMA units idle for G < 8).
template <int NC, int G>
__attribute__((always_inline)) inline void score_two_tiles_cols(const uint16_t* ta, const uint16_t* tb, const float* q,
                                                                 __m512* oa, __m512* ob) {
  constexpr int hd = NC * 16;
  constexpr int S = G < 4 ? 2 : 1;
  __m512 acc_a[S][G], acc_b[S][G];
  for (int k = 0; k < S; ++k)
    for (int g = 0; g < G; ++g) acc_a[k][g] = acc_b[k][g] = _mm512_setzero_ps();
  for (int d = 0; d < hd; d += S) {
    for (int k = 0; k < S; ++k) {
      const __m512 ka = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ta + (d + k) * 16)));
      const __m512 kb = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tb + (d + k) * 16)));
      for (int g = 0; g < G; ++g) {
        const __m512 qd = _mm512_set1_ps(q[g * hd + d + k]);
        acc_a[k][g] = _mm512_fmadd_ps(qd, ka, acc_a[k][g]);
        acc_b[k][g] = _mm512_fmadd_ps(qd, kb, acc_b[k][g]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    oa[g] = S == 2 ? _mm512_add_ps(acc_a[0][g], acc_a[S - 1][g]) : acc_a[0][g];
    ob[g] = S == 2 ? _mm512_add_ps(acc_b[0][g], acc_b[S - 1][g]) : acc_b[0][g];
  }
}

template <int NC>
inline void score_two_tiles_cols(const uint16_t* ta, const uint16_t* tb, const float* q, int ng, __m512* oa, __m512* ob) {
  switch (ng) {
    case 1: score_two_tiles_cols<NC, 1>(ta, tb, q, oa, ob); break;
    case 2: score_two_tiles_cols<NC, 2>(ta, tb, q, oa, ob); break;
    case 3: score_two_tiles_cols<NC, 3>(ta, tb, q, oa, ob); break;
    case 4: score_two_tiles_cols<NC, 4>(ta, tb, q, oa, ob); break;
    case 5: score_two_tiles_cols<NC, 5>(ta, tb, q, oa, ob); break;
    case 6: score_two_tiles_cols<NC, 6>(ta, tb, q, oa, ob); break;
    case 7: score_two_tiles_cols<NC, 7>(ta, tb, q, oa, ob); break;
    default: score_two_tiles_cols<NC, 8>(ta, tb, q, oa, ob); break;
  }
}

template <int NC>
inline void score_tile_cols(const uint16_t* tile, const float* q, int ng, __m512* out) {
  switch (ng) {
    case 1: score_tile_cols<NC, 1>(tile, q, out); break;
    case 2: score_tile_cols<NC, 2>(tile, q, out); break;
    case 3: score_tile_cols<NC, 3>(tile, q, out); break;
    case 4: score_tile_cols<NC, 4>(tile, q, out); break;
    case 5: score_tile_cols<NC, 5>(tile, q, out); break;
    case 6: score_tile_cols<NC, 6>(tile, q, out); break;
    case 7: score_tile_cols<NC, 7>(tile, q, out); break;
    default: score_tile_cols<NC, 8>(tile, q, out); break;
  }
}

}  // namespace

int64_t attention_avx512_scratch_floats(int32_t group, int32_t head_dim) {
  return int64_t(kTile + group) * head_dim;
}

namespace {

// K/V rows are prefetched this many positions ahead of their use (into L1, and into L2).
constexpr int64_t kPrefetchRows = 16;
constexpr int64_t kL2PrefetchRows = 64;
// Decode of one token with few KV heads over at least this many positions per part splits the
// positions over the threads (attention_avx512_split_parts): each thread then reads whole K/V
// rows in order instead of one head's half of every row.
constexpr int64_t kSplitMinPositions = 512;
// A thread's range of a split decode runs in chunks of this many positions (every KV head, then
// the next chunk, merged online), so that its K/V rows stream in (RowStream) while earlier
// chunks compute.
constexpr int64_t kSplitChunk = 256;
// Floats per head in the score buffer when a range needs no more (a chunk of a split decode,
// with a partial tile at each end): a fixed stride that accumulate_v knows at compile time.
constexpr int64_t kChunkRowFloats = kSplitChunk + 2 * kTile;

inline void prefetch_row(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p) + off, _MM_HINT_T0);
}

inline void prefetch_row_l2(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p) + off, _MM_HINT_T1);
}

// L2 prefetches over a thread's K and V rows (positions [first, end) of one sequence) issued a
// line or two at a time from every loop of the kernel, so the memory stream runs during all of
// the arithmetic: a burst of prefetches at the head of a pass only makes that pass wait on
// memory while the others run from cache with the bus idle. Each stream walks the rows one
// block (a contiguous run) at a time.
struct RowStream {
  struct Cursor {
    const uint8_t* p = nullptr;
    const uint8_t* end = nullptr;  // end of the current run
    int64_t next = 0;              // first position after the current run
  };
  const KvView* kv[2] = {nullptr, nullptr};  // K, V
  int64_t seq = 0, end_pos = 0;
  Cursor c[2];
  RowStream() = default;
  RowStream(const KvView& k, const KvView& v, int64_t s, int64_t first, int64_t end)
      : kv{&k, &v}, seq(s), end_pos(end), c{{nullptr, nullptr, first}, {nullptr, nullptr, first}} {}
  // Opens the next run of stream i; false when the positions are done.
  bool refill(int i) {
    Cursor& x = c[i];
    if (x.next >= end_pos) return false;
    const int64_t n = std::min(end_pos - x.next, kv[i]->run(x.next));
    x.p = kv[i]->row(seq, x.next);
    x.end = x.p + size_t(n) * kv[i]->row_bytes;
    x.next += n;
    return true;
  }
  __attribute__((always_inline)) inline void lines(int n) {
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < 2; ++k) {
        if (c[k].p >= c[k].end && !refill(k)) continue;
        _mm_prefetch(reinterpret_cast<const char*>(c[k].p), _MM_HINT_T1);
        c[k].p += 64;
      }
    }
  }
};
// Lines of each stream per 16-position tile of a score pass (the V pass: one per position).
constexpr int kStreamLinesPerTile = 8;

// Largest V stream of one item (bytes) that pass 1 prefetches into L2 (half a typical 2 MiB L2).
constexpr size_t kVPrefetchMaxBytes = size_t(1) << 20;

// Chunks of 16 floats of a V row that one pass over the positions takes: as many as keep the
// G x CP accumulators, the CP converted chunks and a broadcast weight in the 32 vector
// registers (at most 28 accumulators). Fewer passes mean fewer broadcasts of each weight and
// fewer loop iterations: with G = 7, NC = 4, one pass of 4 chunks instead of two of 2 took the
// two-thread split decode over 4096 positions from 74.1-77.3 to 72.2-75.2 us (median, K/V
// from DRAM, both forms alternated in one process; the same bits).
constexpr int v_chunks_per_pass(int nc, int g) {
  for (int cp = 8; cp > 1; cp /= 2)
    if (nc % cp == 0 && g * cp <= 28) return cp;
  return 1;
}

// acc (G, NC * 16) = sum_j w[g * w_stride + j] * v_j for G heads: per chunk of 16 floats of
// v_j, one load shared by the G heads' accumulators.
// V rows: row j at v + j * v_stride bytes, F16 (kF16) or F32. With `more`, acc already holds
// the sums over earlier positions (an earlier block) and these add to them.
// kWStride: w_stride known at compile time (0: not), so that the G weights of a position are
// read from one base register at fixed offsets rather than through G pointers.
template <int NC, int G, bool kF16, int64_t kWStride = 0>
inline void accumulate_v(const float* w, int64_t w_stride, int64_t n_pos, const uint8_t* v, size_t v_stride, float* acc,
                         RowStream* stream, bool more) {
  if constexpr (kWStride > 0) w_stride = kWStride;
  // CP chunks per pass over the positions, so each head's weight is broadcast once for 16 CP
  // floats of v_j: CP * G accumulators.
  constexpr int CP = v_chunks_per_pass(NC, G);
  // L2 prefetch lines of each stream per position of a pass: NC / 2 per position over all the
  // passes, whatever CP (fewer lines per position let the stream fall behind the passes).
  constexpr int kStreamLines = CP / 2 > 1 ? CP / 2 : 1;
  constexpr size_t kChunkBytes = kF16 ? 32 : 64;
  for (int c = 0; c < NC; c += CP) {
    __m512 ac[CP][G];
    for (int k = 0; k < CP; ++k)
      for (int g = 0; g < G; ++g)
        ac[k][g] = more ? _mm512_loadu_ps(acc + g * NC * 16 + 16 * (c + k)) : _mm512_setzero_ps();
    const uint8_t* vr = v + kChunkBytes * size_t(c);
    for (int64_t j = 0; j < n_pos; ++j, vr += v_stride) {
      if (c == 0 && j + kPrefetchRows < n_pos) prefetch_row(vr + kPrefetchRows * v_stride, NC * kChunkBytes);
      if (stream) stream->lines(kStreamLines);
      __m512 vj[CP];
      for (int k = 0; k < CP; ++k)
        vj[k] = kF16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(vr + kChunkBytes * k)))
                     : _mm512_loadu_ps(reinterpret_cast<const float*>(vr + kChunkBytes * k));
      for (int g = 0; g < G; ++g) {
        const __m512 wg = _mm512_set1_ps(w[g * w_stride + j]);
        for (int k = 0; k < CP; ++k) ac[k][g] = _mm512_fmadd_ps(wg, vj[k], ac[k][g]);
      }
    }
    for (int k = 0; k < CP; ++k)
      for (int g = 0; g < G; ++g) _mm512_storeu_ps(acc + g * NC * 16 + 16 * (c + k), ac[k][g]);
  }
}

template <int NC, int G>
inline void accumulate_v(const float* w, int64_t w_stride, int64_t n_pos, bool f16, const uint8_t* v, size_t v_stride,
                         float* acc, RowStream* stream, bool more) {
  if (f16 && w_stride == kChunkRowFloats)
    accumulate_v<NC, G, true, kChunkRowFloats>(w, w_stride, n_pos, v, v_stride, acc, stream, more);
  else if (f16) accumulate_v<NC, G, true>(w, w_stride, n_pos, v, v_stride, acc, stream, more);
  else accumulate_v<NC, G, false>(w, w_stride, n_pos, v, v_stride, acc, stream, more);
}

// Positions of token t that attention reads: [first, first + count).
struct PosRange {
  int64_t first = 0, count = 0;
};
PosRange visible_positions(const AttentionArgs& a, int64_t t) {
  const int64_t p = a.pos[t];
  const int64_t start = a.key_begin(t);
  return {start, p + 1 - start};
}

// Where an item's result goes: normalized into a.out (partial == nullptr), or, for a range of
// the positions, unnormalized per head of the group as {max score, sum of weights, acc[hd]}
// (stride hd + 2) for attention_merge_split.
// Item (token t, KV head kvh) over positions `range` with head_dim = NC * 16; stream: the
// L2 prefetches to advance (split decode), else this item prefetches its own rows into L2.
template <int NC>
void attention_item(const AttentionArgs& a, int64_t t, int32_t kvh, PosRange range, RowStream* stream, float* kt,
                    float* acc, float* partial) {
  constexpr int32_t hd = NC * 16;
  const int32_t group = a.n_head / a.n_head_kv;
  thread_local std::vector<float> score_buf;
  const int64_t s = a.seq[t];
  const int64_t start = range.first;
  const int64_t n_pos = range.count;
  // Tiled K: the score pass runs over the cache's tiles, so a head's scores start at buffer
  // index w0 (the range's offset in its first tile), with one more tile of room for pass 2.
  const bool tiled = a.k_cache.tiled && a.k_cache.type == QuantType::F16;
  const int64_t w0 = tiled ? (start & (kTile - 1)) : 0;
  const int64_t n_pad = (w0 + n_pos + kTile - 1) / kTile * kTile + (w0 > 0 ? kTile : 0);
  const size_t k_off = kv_segment_offset(a.k_cache, int64_t(kvh) * hd);
  const size_t v_off = kv_segment_offset(a.v_cache, int64_t(kvh) * hd);
  const size_t k_row_bytes = size_t(quant_row_bytes(a.k_cache.type, uint64_t(hd)).value_or(0));
  const size_t v_row_bytes = size_t(quant_row_bytes(a.v_cache.type, uint64_t(hd)).value_or(0));
  // Prefetching V in pass 1 pays while this item's V rows fit in L2 with room to spare.
  const bool v_l2 = size_t(n_pos) * v_row_bytes <= kVPrefetchMaxBytes;
  const int64_t w_stride = n_pad <= kChunkRowFloats ? kChunkRowFloats : n_pad;
  if (score_buf.size() < size_t(group * w_stride)) score_buf.resize(size_t(group * w_stride));
  float* sc = score_buf.data();  // (group, w_stride), n_pad of each row used
  const float* q0 = a.q.row(t) + int64_t(kvh * group) * hd;
  // F16 K (head_dim <= 128): the tile in the pair layout (load_tile_pairs_f16), and each head's
  // q as 2 * NC vectors holding 8 dims twice, qp (group, 2 * NC, 16).
  const bool pairs = !tiled && NC <= 8 && a.k_cache.type == QuantType::F16 && !flags().no_attn_pairs;
  thread_local std::vector<float> qp_buf;
  if (pairs) {
    if (qp_buf.size() < size_t(group * 2 * hd)) qp_buf.resize(size_t(group * 2 * hd));
    for (int32_t g = 0; g < group; ++g)
      for (int c = 0; c < 2 * NC; ++c)
        _mm512_storeu_ps(qp_buf.data() + size_t(g * 2 * NC + c) * 16,
                         _mm512_broadcast_f32x8(_mm256_loadu_ps(q0 + g * hd + 8 * c)));
  }

  // 1. scores and running max per head
  __m512 mxv[16];  // running max per head, lane-wise (reduced once after the pass)
  for (int32_t g = 0; g < group; ++g) mxv[g] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // Scale and soft-cap the 16 scores v of head g for buffer index b0 (lanes `valid` are real).
  auto finish_scores = [&](int32_t g, __m512 v, int64_t b0, __mmask16 valid) __attribute__((always_inline)) {
    v = _mm512_mul_ps(v, _mm512_set1_ps(a.scale));
    if (a.softcap > 0.0f) {
      alignas(64) float tmp[kTile];
      _mm512_store_ps(tmp, v);
      for (int j = 0; j < kTile; ++j) tmp[j] = a.softcap * std::tanh(tmp[j] / a.softcap);
      v = _mm512_load_ps(tmp);
    }
    _mm512_storeu_ps(sc + g * w_stride + b0, v);
    mxv[g] = _mm512_mask_max_ps(mxv[g], valid, mxv[g], v);
  };
  if (tiled) {
    const size_t head_bytes = size_t(hd) * kTile * sizeof(uint16_t);  // one head's part of a tile
    const int64_t tile0 = start - w0;                                 // first tile's first position
    // Per tile: its valid lanes, and the prefetches issued while it is scored.
    auto tile_mask = [&](int64_t b0) __attribute__((always_inline)) {
      const int lo = int(std::max<int64_t>(0, w0 - b0)), hi = int(std::min<int64_t>(kTile, w0 + n_pos - b0));
      return __mmask16(((1u << hi) - 1u) & ~((1u << lo) - 1u));
    };
    auto tile_prefetch = [&](int64_t b0) __attribute__((always_inline)) {
      if (b0 + kTile < w0 + n_pos) prefetch_row(a.k_cache.tile_start(s, tile0 + b0 + kTile) + size_t(kvh) * head_bytes, head_bytes);
      if (stream) stream->lines(kStreamLinesPerTile);
      else if (b0 + kL2PrefetchRows < w0 + n_pos) {
        prefetch_row_l2(a.k_cache.tile_start(s, tile0 + b0 + kL2PrefetchRows) + size_t(kvh) * head_bytes, head_bytes);
        for (int64_t j = b0 + kL2PrefetchRows; j < std::min(w0 + n_pos, b0 + kL2PrefetchRows + kTile) && v_l2; ++j)
          if (j >= w0) prefetch_row_l2(a.v_cache.row(s, tile0 + j) + v_off, v_row_bytes);
      }
    };
    auto tile_at = [&](int64_t b0) __attribute__((always_inline)) {
      return reinterpret_cast<const uint16_t*>(a.k_cache.tile_start(s, tile0 + b0) + size_t(kvh) * head_bytes);
    };
    for (int64_t b0 = 0; b0 < w0 + n_pos;) {
      if (b0 + kTile < w0 + n_pos) {  // two tiles
        const int64_t b1 = b0 + kTile;
        tile_prefetch(b0);
        tile_prefetch(b1);
        const __mmask16 valid0 = tile_mask(b0), valid1 = tile_mask(b1);
        const uint16_t *t0 = tile_at(b0), *t1 = tile_at(b1);
        for (int32_t g0 = 0; g0 < group; g0 += 8) {
          const int32_t ng = std::min<int32_t>(8, group - g0);
          __m512 v0[8], v1[8];
          score_two_tiles_cols<NC>(t0, t1, q0 + int64_t(g0) * hd, ng, v0, v1);
          for (int32_t g = 0; g < ng; ++g) {
            finish_scores(g0 + g, v0[g], b0, valid0);
            finish_scores(g0 + g, v1[g], b1, valid1);
          }
        }
        b0 += 2 * kTile;
        continue;
      }
      tile_prefetch(b0);
      const __mmask16 valid = tile_mask(b0);
      const uint16_t* tile = tile_at(b0);
      for (int32_t g0 = 0; g0 < group; g0 += 8) {
        const int32_t ng = std::min<int32_t>(8, group - g0);
        __m512 v[8];
        score_tile_cols<NC>(tile, q0 + int64_t(g0) * hd, ng, v);
        for (int32_t g = 0; g < ng; ++g) finish_scores(g0 + g, v[g], b0, valid);
      }
      b0 += kTile;
    }
  }
  for (int64_t j0 = 0; j0 < n_pos && !tiled; j0 += kTile) {
    const int n = int(std::min<int64_t>(kTile, n_pos - j0));
    const __mmask16 valid = __mmask16((1u << n) - 1u);
    // K and V rows (strided streams the hardware prefetchers follow poorly): K of the next tile
    // into L1, and K and V kL2PrefetchRows ahead into L2, so that the V stream of pass 3
    // overlaps this pass's arithmetic.
    for (int64_t j = j0 + kPrefetchRows; j < std::min(n_pos, j0 + kPrefetchRows + kTile); ++j)
      prefetch_row(a.k_cache.row(s, start + j) + k_off, k_row_bytes);
    if (stream) stream->lines(kStreamLinesPerTile);
    for (int64_t j = j0 + kL2PrefetchRows; j < std::min(n_pos, j0 + kL2PrefetchRows + kTile) && !stream; ++j) {
      prefetch_row_l2(a.k_cache.row(s, start + j) + k_off, k_row_bytes);
      if (v_l2) prefetch_row_l2(a.v_cache.row(s, start + j) + v_off, v_row_bytes);
    }
    if (pairs) load_tile_pairs_f16(a.k_cache, s, start + j0, n, k_off, hd, kt);
    else load_tile(a.k_cache, s, start + j0, n, k_off, hd, kt);
    for (int32_t g = 0; g < group; ++g) {
      __m512 v;
      if (pairs) {
        // 8 pairs of rows x 2 * NC vectors, q of head g in registers.
        const float* q = qp_buf.data() + size_t(g) * 2 * NC * 16;
        __m512 qv[2 * NC];
        for (int c = 0; c < 2 * NC; ++c) qv[c] = _mm512_loadu_ps(q + 16 * c);
        __m512 part[kTile / 2];
        for (int p = 0; p < kTile / 2; ++p) {
          const float* kp = kt + size_t(p) * 2 * NC * 16;
          __m512 d = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kp));
          for (int c = 1; c < 2 * NC; ++c) d = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kp + 16 * c), d);
          part[p] = d;
        }
        v = reduce_pairs(part);
      } else {
        const float* q = q0 + int64_t(g) * hd;
        __m512 qv[NC];
        for (int c = 0; c < NC; ++c) qv[c] = _mm512_loadu_ps(q + 16 * c);
        __m512 part[kTile];
        for (int j = 0; j < kTile; ++j) {
          __m512 d = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kt + j * hd));
          for (int c = 1; c < NC; ++c) d = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kt + j * hd + 16 * c), d);
          part[j] = d;
        }
        v = avx512::hsum16x16(part);
      }
      finish_scores(g, v, j0, valid);
    }
  }
  float mx[16];
  for (int32_t g = 0; g < group; ++g) mx[g] = _mm512_reduce_max_ps(mxv[g]);
  // 2. weights and their sums (positions past n_pos get weight 0)
  float sum[16];
  for (int32_t g = 0; g < group; ++g) {
    float* row = sc + g * w_stride + w0;
    const __m512 m = _mm512_set1_ps(mx[g]);
    __m512 tot = _mm512_setzero_ps();
    for (int64_t j0 = 0; j0 < n_pos; j0 += kTile) {
      const int n = int(std::min<int64_t>(kTile, n_pos - j0));
      const __mmask16 valid = __mmask16((1u << n) - 1u);
      const __m512 w = _mm512_maskz_mov_ps(valid, avx512::exp512(_mm512_sub_ps(_mm512_loadu_ps(row + j0), m)));
      _mm512_storeu_ps(row + j0, w);
      tot = _mm512_add_ps(tot, w);
    }
    sum[g] = _mm512_reduce_add_ps(tot);
  }
  // 3. acc_h = sum_j w_hj * v_j: per position, every chunk of v_j is loaded once for all heads.
  // V rows are read as F16 / F32 in place; other cache types are converted to F32 first.
  const bool v_f16 = a.v_cache.type == QuantType::F16;
  const bool v_direct = v_f16 || a.v_cache.type == QuantType::F32;
  thread_local std::vector<float> v_conv;
  if (!v_direct) {
    if (v_conv.size() < size_t(n_pos * hd)) v_conv.resize(size_t(n_pos * hd));
    for (int64_t j = 0; j < n_pos; ++j) row_to_f32(a.v_cache.type, a.v_cache.row(s, start + j) + v_off, v_conv.data() + j * hd, hd);
  }
  const size_t v_stride = v_direct ? a.v_cache.row_bytes : sizeof(float) * size_t(hd);  // consecutive positions
  // Runs of positions whose V rows are consecutive (one block each; all of them once converted),
  // each added to the sums of the runs before it (the same arithmetic as one pass).
  for (int64_t j = 0; j < n_pos;) {
    const int64_t m = v_direct ? std::min(n_pos - j, a.v_cache.run(start + j)) : n_pos;
    const uint8_t* v0 = v_direct ? a.v_cache.row(s, start + j) + v_off
                                 : reinterpret_cast<const uint8_t*>(v_conv.data());
    // Heads in batches of up to 8 with a compile-time count, so the accumulators stay in registers.
    for (int32_t g0 = 0; g0 < group; g0 += 8) {
      const int32_t ng = std::min<int32_t>(8, group - g0);
      const float* w = sc + int64_t(g0) * w_stride + w0 + j;
      float* acc_g = acc + int64_t(g0) * hd;
      const bool more = j > 0;
      switch (ng) {
        case 1: accumulate_v<NC, 1>(w, w_stride, m, v_f16, v0, v_stride, acc_g, stream, more); break;
        case 2: accumulate_v<NC, 2>(w, w_stride, m, v_f16, v0, v_stride, acc_g, stream, more); break;
        case 3: accumulate_v<NC, 3>(w, w_stride, m, v_f16, v0, v_stride, acc_g, stream, more); break;
        case 4: accumulate_v<NC, 4>(w, w_stride, m, v_f16, v0, v_stride, acc_g, stream, more); break;
        case 5: accumulate_v<NC, 5>(w, w_stride, m, v_f16, v0, v_stride, acc_g, stream, more); break;
        case 6: accumulate_v<NC, 6>(w, w_stride, m, v_f16, v0, v_stride, acc_g, stream, more); break;
        case 7: accumulate_v<NC, 7>(w, w_stride, m, v_f16, v0, v_stride, acc_g, stream, more); break;
        default: accumulate_v<NC, 8>(w, w_stride, m, v_f16, v0, v_stride, acc_g, stream, more); break;
      }
    }
    j += m;
  }
  for (int32_t g = 0; g < group; ++g) {
    if (partial) {
      float* ph = partial + int64_t(kvh * group + g) * (hd + 2);
      ph[0] = mx[g];
      ph[1] = sum[g];
      std::memcpy(ph + 2, acc + g * hd, sizeof(float) * hd);
      continue;
    }
    float* out = a.out.row(t) + int64_t(kvh * group + g) * hd;
    const float inv = sum[g] > 0.0f ? 1.0f / sum[g] : 0.0f;
    for (int32_t i = 0; i < hd; ++i) out[i] = acc[g * hd + i] * inv;
  }
}

template <int NC>
void run_item(const AttentionArgs& a, int64_t t, int32_t kvh, PosRange range, RowStream* stream, float* kt, float* acc,
              float* partial) {
  attention_item<NC>(a, t, kvh, range, stream, kt, acc, partial);
}

void item_any(const AttentionArgs& a, int64_t t, int32_t kvh, PosRange range, RowStream* stream, float* kt, float* acc,
              float* partial) {
  switch (a.head_dim) {
    case 16: run_item<1>(a, t, kvh, range, stream, kt, acc, partial); break;
    case 32: run_item<2>(a, t, kvh, range, stream, kt, acc, partial); break;
    case 64: run_item<4>(a, t, kvh, range, stream, kt, acc, partial); break;
    case 128: run_item<8>(a, t, kvh, range, stream, kt, acc, partial); break;
    default: run_item<16>(a, t, kvh, range, stream, kt, acc, partial); break;
  }
}

}  // namespace

bool attention_avx512_supports(int32_t head_dim, int32_t group) {
  return (head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256) && group >= 1 &&
         group <= 16;
}

void attention_rows_avx512(const AttentionArgs& a, float* scratch, int ith, int nth) {
  const int32_t hd = a.head_dim;
  float* kt = scratch;          // (kTile, hd)
  float* acc = kt + kTile * hd;  // (group, hd)
  int64_t begin, end;
  attention_split_items(a, a.n_head_kv, ith, nth, &begin, &end);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t t = item / a.n_head_kv;
    item_any(a, t, int32_t(item % a.n_head_kv), visible_positions(a, t), nullptr, kt, acc, nullptr);
  }
}

int attention_avx512_split_parts(const AttentionArgs& a, int n_threads) {
  if (a.q.rows != 1 || n_threads < 2 || a.n_head_kv >= 2 * n_threads) return 1;
  const int64_t n_pos = visible_positions(a, 0).count;
  if (n_pos < kSplitMinPositions) return 1;
  return int(std::min<int64_t>(n_threads, n_pos / kSplitMinPositions * 2));
}

int64_t attention_split_partial_floats(const AttentionArgs& a) { return int64_t(a.n_head) * (a.head_dim + 2); }

void attention_split_avx512(const AttentionArgs& a, float* scratch, float* partials, int ith, int nth) {
  const int32_t hd = a.head_dim;
  float* kt = scratch;
  float* acc = kt + kTile * hd;
  const PosRange all = visible_positions(a, 0);
  const int64_t n_tiles = (all.count + kTile - 1) / kTile;
  int64_t t0, t1;
  split_range(n_tiles, ith, nth, &t0, &t1);
  const PosRange mine{all.first + t0 * kTile, std::min(all.count, t1 * kTile) - t0 * kTile};
  const int64_t per_head = hd + 2;  // {max, sum, acc[hd]} per query head
  float* partial = partials + attention_split_partial_floats(a) * ith;
  for (int32_t h = 0; h < a.n_head; ++h) {  // empty until a chunk lands
    float* ph = partial + int64_t(h) * per_head;
    ph[0] = -std::numeric_limits<float>::infinity();
    ph[1] = 0.0f;
    std::fill(ph + 2, ph + 2 + hd, 0.0f);
  }
  thread_local std::vector<float> chunk_partial;
  chunk_partial.resize(size_t(attention_split_partial_floats(a)));
  const int32_t group = a.n_head / a.n_head_kv;
  RowStream stream(a.k_cache, a.v_cache, a.seq[0], mine.first, mine.first + std::max<int64_t>(0, mine.count));
  for (int64_t c0 = 0; c0 < mine.count; c0 += kSplitChunk) {
    const PosRange chunk{mine.first + c0, std::min(kSplitChunk, mine.count - c0)};
    for (int32_t kvh = 0; kvh < a.n_head_kv; ++kvh) {
      item_any(a, 0, kvh, chunk, &stream, kt, acc, chunk_partial.data());
      // Online merge: both sides are (max, sum of exp(score - max), unnormalized acc).
      for (int32_t g = 0; g < group; ++g) {
        const int64_t h = int64_t(kvh) * group + g;
        float* ph = partial + h * per_head;
        const float* pc = chunk_partial.data() + h * per_head;
        if (pc[1] <= 0.0f) continue;
        const float m = std::max(ph[0], pc[0]);
        const float f_old = ph[1] > 0.0f ? std::exp(ph[0] - m) : 0.0f, f_new = std::exp(pc[0] - m);
        ph[0] = m;
        ph[1] = ph[1] * f_old + pc[1] * f_new;
        for (int32_t i = 0; i < hd; ++i) ph[2 + i] = ph[2 + i] * f_old + pc[2 + i] * f_new;
      }
    }
  }
}

void attention_merge_split(const AttentionArgs& a, const float* partials, int parts) {
  const int32_t hd = a.head_dim;
  const int64_t stride = attention_split_partial_floats(a);
  float* out = a.out.row(0);
  for (int32_t h = 0; h < a.n_head; ++h) {
    float m = -std::numeric_limits<float>::infinity();
    for (int p = 0; p < parts; ++p) m = std::max(m, partials[p * stride + h * (hd + 2)]);
    float l = 0.0f;
    float* o = out + int64_t(h) * hd;
    std::fill(o, o + hd, 0.0f);
    for (int p = 0; p < parts; ++p) {
      const float* ph = partials + p * stride + h * (hd + 2);
      if (ph[1] <= 0.0f) continue;
      const float f = std::exp(ph[0] - m);
      l += ph[1] * f;
      for (int32_t i = 0; i < hd; ++i) o[i] += ph[2 + i] * f;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t i = 0; i < hd; ++i) o[i] *= inv;
  }
}

}  // namespace brisk::cpu
