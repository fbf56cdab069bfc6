// Unigram Viterbi, following the reference's tie rules: positions are visited left to right,
// candidate pieces shortest first, and a later candidate replaces the best only when strictly
// better.
#include "text/spm.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "text/unicode.h"

namespace brisk::text {

namespace {
constexpr double kUnkPenalty = 10.0;
}

UnigramModel::UnigramModel(const std::vector<std::string>& pieces, const std::vector<float>& scores,
                           UnigramParams params)
    : params_(params) {
  BRISK_CHECK(pieces.size() == scores.size(), "unigram: ", pieces.size(), " pieces but ",
              scores.size(), " scores");
  double min_score = std::numeric_limits<double>::infinity();
  index_.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    index_.emplace(pieces[i], static_cast<int32_t>(i));
    scores_.push_back(scores[i]);
    min_score = std::min(min_score, static_cast<double>(scores[i]));
    max_piece_bytes_ = std::max(max_piece_bytes_, pieces[i].size());
  }
  unk_score_ = (pieces.empty() ? 0.0 : min_score) - kUnkPenalty;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = token_index_find(index_, name);
  }
}

void UnigramModel::tokenize(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  struct Best {
    int32_t id = -1;
    size_t start = std::string_view::npos;  // npos: not reached
    double score = 0;
  };
  const size_t n = text.size();
  std::vector<Best> best(n + 1);
  best[0].start = 0;
  for (size_t at = 0; at < n;) {
    uint32_t c = 0;
    const size_t mblen = utf8_next(text, at, &c);
    if (best[at].start == std::string_view::npos) {  // not reachable (cannot happen with unk)
      at += mblen;
      continue;
    }
    const double base = best[at].score;
    bool has_single = false;
    const size_t limit = std::min(n - at, max_piece_bytes_);
    for (size_t len = mblen; len <= limit;) {
      const int32_t id = token_index_find(index_, text.substr(at, len));
      if (id >= 0) {
        const double cand = base + scores_[id];
        Best& b = best[at + len];
        if (b.start == std::string_view::npos || cand > b.score) b = {id, at, cand};
        if (len == mblen) has_single = true;
      }
      if (at + len >= n) break;
      uint32_t c2 = 0;
      len += utf8_next(text, at + len, &c2);
    }
    if (!has_single) {
      const double cand = base + unk_score_;
      Best& b = best[at + mblen];
      if (b.start == std::string_view::npos || cand > b.score) b = {params_.unk_id, at, cand};
    }
    at += mblen;
  }
  // Backtrack: (start, end, id) from the end.
  struct Span {
    size_t b, e;
    int32_t id;
  };
  std::vector<Span> spans;
  for (size_t e = n; e > 0;) {
    const Best& b = best[e];
    if (b.start == std::string_view::npos) break;
    spans.push_back({b.start, e, b.id});
    e = b.start;
  }
  std::reverse(spans.begin(), spans.end());
  // Fuse consecutive unknown spans.
  std::vector<Span> fused;
  for (const auto& s : spans) {
    const bool unk = s.id < 0 || s.id == params_.unk_id;
    if (unk && params_.fuse_unk && !fused.empty() &&
        (fused.back().id < 0 || fused.back().id == params_.unk_id) && fused.back().id == s.id) {
      fused.back().e = s.e;
      continue;
    }
    fused.push_back(s);
  }
  for (const auto& s : fused) {
    const bool unk = s.id < 0 || s.id == params_.unk_id;
    if (!unk) {
      out.push_back(s.id);
      continue;
    }
    // The reference looks the text up again; an unknown run has no piece of its own.
    const std::string_view str = text.substr(s.b, s.e - s.b);
    const int32_t direct = token_index_find(index_, str);
    if (direct >= 0 && direct != params_.unk_id) {
      out.push_back(direct);
      continue;
    }
    if (params_.byte_fallback) {
      bool all = true;
      for (char ch : str) all = all && byte_ids_[static_cast<uint8_t>(ch)] >= 0;
      if (all) {
        for (char ch : str) out.push_back(byte_ids_[static_cast<uint8_t>(ch)]);
        continue;
      }
    }
    BRISK_CHECK(params_.unk_id >= 0, "unigram tokenizer has no <unk> piece for \"", str, "\"");
    out.push_back(params_.unk_id);
  }
}

}  // namespace brisk::text
