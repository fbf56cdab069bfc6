// Causal attention over the KV cache with grouped-query heads, an optional sliding window and
// optional score soft-capping, computed flash-style: one pass over the cached positions with
// an online softmax (running max m, running sum l, rescaled accumulator), so no [n_tok, n_ctx]
// score matrix is materialized and long contexts cost O(head_dim) memory per (token, head).
//
// Layout: q/out [n_tok, n_head * head_dim]; K/V cache paged (backend.h KvView: rows of
// n_head_kv * head_dim reached through the block table) in F32, F16 or Q8_0 (head_dim is then a multiple of 32, so a head's slice is whole blocks).
// Query head h reads KV head h / (n_head / n_head_kv). Token t attends positions
// [max(0, pos[t] - window + 1), pos[t]] of sequence seq[t]; its own K/V must be stored first.
// Work is split over (token, head) pairs.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/ops.h"

namespace brisk::cpu {

namespace {

const float* load_segment(const KvView& v, int64_t seq, int64_t pos, size_t byte_off, int64_t n,
                          float* buf) {
  const uint8_t* src = v.row(seq, pos) + byte_off;
  if (v.type == QuantType::F32) return reinterpret_cast<const float*>(src);
  row_to_f32(v.type, src, buf, n);
  return buf;
}

}  // namespace

void kv_store_rows(const KvStoreArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.k.rows, ith, nth, &begin, &end);
  for (int64_t t = begin; t < end; ++t) {
    row_from_f32(a.k_cache.type, a.k.row(t), a.k_cache.row(a.seq[t], a.pos[t]), a.k_cache.width);
    row_from_f32(a.v_cache.type, a.v.row(t), a.v_cache.row(a.seq[t], a.pos[t]), a.v_cache.width);
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
    const int64_t start = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
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
    const int64_t start = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    const size_t k_off = kv_segment_offset(a.k_cache, int64_t(kvh) * hd);
    const size_t v_off = kv_segment_offset(a.v_cache, int64_t(kvh) * hd);
    float m = -std::numeric_limits<float>::infinity();
    float l = 0.0f;
    std::memset(acc, 0, sizeof(float) * size_t(hd));
    for (int64_t j = start; j <= p; ++j) {
      const float* k = load_segment(a.k_cache, s, j, k_off, hd, kbuf);
      float score = 0.0f;
      for (int32_t i = 0; i < hd; ++i) score += q[i] * k[i];
      score *= a.scale;
      if (a.softcap > 0.0f) score = a.softcap * std::tanh(score / a.softcap);
      const float* v = load_segment(a.v_cache, s, j, v_off, hd, vbuf);
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
