// Causal attention over the KV cache with grouped-query heads, an optional sliding window and
// optional score soft-capping, computed flash-style: one pass over the cached positions with
// an online softmax (running max m, running sum l, rescaled accumulator), so no [n_tok, n_ctx]
// score matrix is materialized and long contexts cost O(head_dim) memory per (token, head).
//
// Layout: q/out [n_tok, n_head * head_dim]; K/V cache paged (backend.h KvView: rows of
// n_head_kv * head_dim reached through the block table, or F16 tiles) in F32, F16 or Q8_0
// (head_dim is then a multiple of 32, so a head's slice is whole blocks).
// Query head h reads KV head h / (n_head / n_head_kv). Token t attends positions
// [max(0, pos[t] - window + 1), pos[t]] of sequence seq[t]; its own K/V must be stored first.
// Work is split over (token, head) pairs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu/ops.h"

namespace brisk::cpu {

namespace {

// Elements [col0, col0 + n) of (seq, pos): in place for F32 rows, else converted into buf.
const float* load_segment(const KvView& v, int64_t seq, int64_t pos, int64_t col0, int64_t n, float* buf) {
  if (v.type == QuantType::F32 && !v.tiled) return reinterpret_cast<const float*>(v.row(seq, pos)) + col0;
  kv_read_f32(v, seq, pos, col0, n, buf);
  return buf;
}

}  // namespace

void kv_read_f32(const KvView& v, int64_t seq, int64_t pos, int64_t col0, int64_t n, float* out) {
  if (!v.tiled) {
    row_to_f32(v.type, v.row(seq, pos) + kv_segment_offset(v, col0), out, n);
    return;
  }
  const uint16_t* t = reinterpret_cast<const uint16_t*>(v.tile_start(seq, pos)) + (pos & (KvView::kKvTile - 1));
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_f32(t[(col0 + i) * KvView::kKvTile]);
}

void kv_write_f32(const KvView& v, int64_t seq, int64_t pos, const float* src) {
  if (!v.tiled) {
    row_from_f32(v.type, src, v.row(seq, pos), v.width);
    return;
  }
  // Converted as a row (the same bits as an untiled cache), then scattered 16 halves apart.
  uint16_t* t = reinterpret_cast<uint16_t*>(v.tile_start(seq, pos)) + (pos & (KvView::kKvTile - 1));
  uint16_t h[256];
  for (int64_t c0 = 0; c0 < v.width; c0 += 256) {
    const int64_t n = std::min<int64_t>(256, v.width - c0);
    row_from_f32(QuantType::F16, src + c0, h, n);
    for (int64_t i = 0; i < n; ++i) t[(c0 + i) * KvView::kKvTile] = h[i];
  }
}

void kv_store_rows(const KvStoreArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.k.rows, ith, nth, &begin, &end);
  for (int64_t t = begin; t < end; ++t) {
    kv_write_f32(a.k_cache, a.seq[t], a.pos[t], a.k.row(t));
    kv_write_f32(a.v_cache, a.seq[t], a.pos[t], a.v.row(t));
  }
}

int64_t attention_scratch_floats(int32_t head_dim) { return 3 * int64_t(head_dim); }

void attention_split_items(const AttentionArgs& a, int64_t per_token, int ith, int nth, int64_t* begin, int64_t* end) {
  const int64_t n = a.q.rows * per_token;
  if (nth <= 1 || n == 0) {
    split_range(n, ith, nth, begin, end);
    return;
  }
  // An item's fixed cost (the query's setup, the output) in positions.
  constexpr double kItemCost = 32.0;
  auto cost = [&](int64_t t) {
    const int64_t p = a.pos[t];
    const int64_t start = a.key_begin(t);
    return double(p + 1 - start) + kItemCost;
  };
  double total = 0.0;
  for (int64_t t = 0; t < a.q.rows; ++t) total += cost(t) * double(per_token);
  // Item i goes to the part whose cost interval [total * p / nth, total * (p + 1) / nth) holds
  // the middle of the item's own interval; every item lands in exactly one part.
  const double lo = total * double(ith) / double(nth), hi = total * double(ith + 1) / double(nth);
  *begin = n;
  *end = n;
  double c = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double ci = cost(i / per_token), mid = c + 0.5 * ci;
    if (*begin == n && mid >= lo) *begin = i;
    if (ith + 1 < nth && mid >= hi) {
      *end = i;
      break;
    }
    c += ci;
  }
  if (*end < *begin) *end = *begin;
}

void attention_rows(const AttentionArgs& a, float* scratch, int ith, int nth) {
  const int32_t hd = a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  float* kbuf = scratch;
  float* vbuf = scratch + hd;
  float* acc = scratch + 2 * hd;
  int64_t begin, end;
  attention_split_items(a, a.n_head, ith, nth, &begin, &end);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t t = item / a.n_head;
    const int32_t h = int32_t(item % a.n_head);
    const int32_t kvh = h / group;
    const float* q = a.q.row(t) + int64_t(h) * hd;
    const int64_t s = a.seq[t], p = a.pos[t];
    const int64_t start = a.key_begin(t);
    const int64_t col0 = int64_t(kvh) * hd;
    float m = -std::numeric_limits<float>::infinity();
    float l = 0.0f;
    std::memset(acc, 0, sizeof(float) * size_t(hd));
    for (int64_t j = start; j <= p; ++j) {
      const float* k = load_segment(a.k_cache, s, j, col0, hd, kbuf);
      float score = 0.0f;
      for (int32_t i = 0; i < hd; ++i) score += q[i] * k[i];
      score *= a.scale;
      if (a.softcap > 0.0f) score = a.softcap * std::tanh(score / a.softcap);
      const float* v = load_segment(a.v_cache, s, j, col0, hd, vbuf);
      if (score > m) {
        const float corr = std::exp(m - score);  // 0 on the first position
        l *= corr;
        for (int32_t i = 0; i < hd; ++i) acc[i] *= corr;
        m = score;
      }
      const float w = std::exp(score - m);
      l += w;
      for (int32_t i = 0; i < hd; ++i) acc[i] += w * v[i];
    }
    float* out = a.out.row(t) + int64_t(h) * hd;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t i = 0; i < hd; ++i) out[i] = acc[i] * inv;
  }
}

}  // namespace brisk::cpu
