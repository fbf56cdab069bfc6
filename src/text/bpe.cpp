// BPE merge loop: symbols in a doubly linked array, candidate pairs in a min-heap keyed by
// (rank, position). Stale heap entries are skipped by re-checking the pair.
#include "text/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "core/error.h"
#include "core/flags.h"
#include "text/unicode.h"

namespace brisk::text {

namespace {
constexpr size_t kCacheMaxEntries = 1 << 16;
constexpr size_t kCacheMaxPieceBytes = 64;

struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t len;  // bytes of the piece covered; 0 once merged away
};

struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t left, right;  // ids of the pair when queued: stale once either side changed
  int32_t result;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};
}  // namespace

void BpeModel::FlatMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot{kEmpty, 0, 0});
  mask_ = cap - 1;
  size_ = 0;
}

void BpeModel::FlatMap::insert(uint64_t key, int32_t a, int32_t b) {
  if ((size_ + 1) * 2 > slots_.size()) {  // grow
    std::vector<Slot> old = std::move(slots_);
    reserve(std::max<size_t>(16, old.size()));
    for (const auto& s : old)
      if (s.key != kEmpty) insert(s.key, s.a, s.b);
  }
  for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i].key == key) return;
    if (slots_[i].key == kEmpty) {
      slots_[i] = {key, a, b};
      ++size_;
      return;
    }
  }
}

const int32_t* BpeModel::FlatMap::find(uint64_t key) const {
  if (size_ == 0) return nullptr;
  for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i].key == key) return &slots_[i].a;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

BpeModel::BpeModel(TokenIndex index, const std::vector<BpeMerge>& merges, BpeParams params)
    : index_(std::move(index)), params_(std::move(params)) {
  merges_.reserve(merges.size());
  for (const auto& m : merges) merges_.insert(pair_key(m.left, m.right), m.rank, m.result);
  char_ids_.reserve(1024);
  for (const auto& [text, id] : index_) {
    uint32_t c = 0;
    if (!text.empty() && utf8_next(text, 0, &c) == text.size() && !(c == 0xFFFD && text.size() == 1))
      char_ids_.insert(c, id, 0);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = token_index_find(index_, name);
  }
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() > kCacheMaxPieceBytes || flags().no_tokenizer_cache) {
    tokenize_uncached(piece, out);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  tokenize_uncached(piece, out);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::vector<int32_t>(out.begin() + start, out.end()));
  }
}

void BpeModel::tokenize_uncached(std::string_view piece, std::vector<int32_t>& out) const {
  if (params_.ignore_merges ||
      (params_.whole_newline_runs && !piece.empty() && piece.find_first_not_of('\n') == std::string_view::npos)) {
    const int32_t id = token_index_find(index_, piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> syms;
  syms.reserve(piece.size());
  auto add = [&](int32_t id, uint32_t len) {
    const auto n = static_cast<int32_t>(syms.size());
    syms.push_back({id, n - 1, -1, len});
    if (n > 0) syms[n - 1].next = n;
  };
  // Pending unknown run: (id, len) when set.
  bool have_unk = false;
  uint32_t unk_len = 0;
  const bool affixes = !params_.continuing_subword_prefix.empty() || !params_.end_of_word_suffix.empty();
  std::string scratch;
  for (size_t i = 0; i < piece.size();) {
    uint32_t c = 0;
    const size_t n = utf8_next(piece, i, &c);
    std::string_view ch = piece.substr(i, n);
    std::string_view key = ch;
    if (affixes) {
      scratch.clear();
      if (i > 0) scratch += params_.continuing_subword_prefix;
      scratch += ch;
      if (i + n == piece.size()) scratch += params_.end_of_word_suffix;
      key = scratch;
    }
    i += n;
    const int32_t id = affixes ? token_index_find(index_, key) : char_id(ch, c);
    if (id >= 0) {
      if (have_unk) {
        add(params_.unk_id, unk_len);
        have_unk = false;
      }
      add(id, static_cast<uint32_t>(n));
      continue;
    }
    if (params_.byte_fallback) {
      bool all = true;
      for (char b : key) all = all && byte_ids_[static_cast<uint8_t>(b)] >= 0;
      if (all) {
        for (char b : key) add(byte_ids_[static_cast<uint8_t>(b)], 1);
        continue;
      }
    }
    if (params_.unk_id >= 0) {
      if (have_unk && params_.fuse_unk) {
        unk_len += static_cast<uint32_t>(n);
      } else {
        if (have_unk) add(params_.unk_id, unk_len);
        have_unk = true;
        unk_len = static_cast<uint32_t>(n);
      }
    }
  }
  if (have_unk) add(params_.unk_id, unk_len);
  if (syms.empty()) return;

  if (syms.size() > 1 && !merges_.empty()) {
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    auto consider = [&](int32_t pos) {
      const int32_t next = syms[pos].next;
      if (next < 0) return;
      const int32_t* m = merges_.find(pair_key(syms[pos].id, syms[next].id));
      if (m) queue.push({m[0], pos, syms[pos].id, syms[next].id, m[1]});
    };
    for (int32_t k = 0; k + 1 < static_cast<int32_t>(syms.size()); ++k) consider(k);
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& left = syms[top.pos];
      if (left.len == 0 || left.next < 0) continue;
      Symbol& right = syms[left.next];
      if (left.id != top.left || right.id != top.right) continue;
      left.id = top.result;
      left.len += right.len;
      left.next = right.next;
      right.len = 0;
      if (left.next >= 0) syms[left.next].prev = top.pos;
      if (left.prev >= 0) consider(left.prev);
      consider(top.pos);
    }
  }
  for (int32_t k = 0; k >= 0; k = syms[k].next) out.push_back(syms[k].id);
}

int32_t BpeModel::char_id(std::string_view ch, uint32_t cpt) const {
  if (cpt == 0xFFFD && ch.size() == 1) return token_index_find(index_, ch);  // invalid byte
  const int32_t* v = char_ids_.find(cpt);
  return v ? v[0] : -1;
}

std::vector<BpeMerge> bpe_merges_from_scores(const std::vector<std::string>& tokens,
                                             const std::vector<float>& scores,
                                             const std::vector<bool>& mergeable,
                                             const TokenIndex& index) {
  // Distinct scores, descending, give the ranks.
  std::vector<float> distinct;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (mergeable[i]) distinct.push_back(scores[i]);
  std::sort(distinct.begin(), distinct.end(), std::greater<float>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  auto rank_of = [&](float s) {
    return static_cast<int32_t>(std::lower_bound(distinct.begin(), distinct.end(), s,
                                                 std::greater<float>()) - distinct.begin());
  };
  std::vector<BpeMerge> merges;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!mergeable[i]) continue;
    const std::string& t = tokens[i];
    uint32_t c = 0;
    for (size_t cut = utf8_next(t, 0, &c); cut < t.size(); cut += utf8_next(t, cut, &c)) {
      const int32_t a = token_index_find(index, std::string_view(t).substr(0, cut));
      const int32_t b = token_index_find(index, std::string_view(t).substr(cut));
      if (a < 0 || b < 0) continue;
      merges.push_back({a, b, static_cast<int32_t>(i), rank_of(scores[i])});
    }
  }
  return merges;
}

}  // namespace brisk::text
