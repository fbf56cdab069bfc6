#include "runtime/speech_align.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "text/tokenizer.h"

namespace brisk {

void speech_median_filter(float* x, int64_t rows, int64_t cols, int32_t width) {
  BRISK_CHECK(width >= 1 && width % 2 == 1, "median filter: width ", width, " must be odd");
  const int64_t pad = width / 2;
  if (cols <= pad || width == 1) return;
  std::vector<float> row(static_cast<size_t>(cols)), win(static_cast<size_t>(width));
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * cols;
    std::copy(v, v + cols, row.begin());
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t k = -pad; k <= pad; ++k) {
        int64_t i = c + k;  // reflect (no edge repeat), as torch's reflect padding
        if (i < 0) i = -i;
        if (i >= cols) i = 2 * (cols - 1) - i;
        win[size_t(k + pad)] = row[size_t(i)];
      }
      std::nth_element(win.begin(), win.begin() + pad, win.end());
      v[c] = win[size_t(pad)];
    }
  }
}

void speech_dtw(const std::vector<double>& x, int64_t n, int64_t m, std::vector<int64_t>* text_idx,
                std::vector<int64_t>* time_idx) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<float> cost(size_t((n + 1) * (m + 1)), float(inf));
  std::vector<int8_t> trace(size_t((n + 1) * (m + 1)), -1);
  auto at = [&](int64_t i, int64_t j) { return size_t(i * (m + 1) + j); };
  cost[0] = 0.0f;
  for (int64_t j = 1; j <= m; ++j) {
    for (int64_t i = 1; i <= n; ++i) {
      const float c0 = cost[at(i - 1, j - 1)], c1 = cost[at(i - 1, j)], c2 = cost[at(i, j - 1)];
      float c;
      int8_t t;
      if (c0 < c1 && c0 < c2) {
        c = c0;
        t = 0;
      } else if (c1 < c0 && c1 < c2) {
        c = c1;
        t = 1;
      } else {
        c = c2;
        t = 2;
      }
      cost[at(i, j)] = float(x[size_t((i - 1) * m + (j - 1))]) + c;
      trace[at(i, j)] = t;
    }
  }
  for (int64_t j = 0; j <= m; ++j) trace[at(0, j)] = 2;
  for (int64_t i = 0; i <= n; ++i) trace[at(i, 0)] = 1;
  text_idx->clear();
  time_idx->clear();
  int64_t i = n, j = m;
  while (i > 0 || j > 0) {
    text_idx->push_back(i - 1);
    time_idx->push_back(j - 1);
    const int8_t t = trace[at(i, j)];
    if (t == 0) {
      --i;
      --j;
    } else if (t == 1) {
      --i;
    } else {
      --j;
    }
  }
  std::reverse(text_idx->begin(), text_idx->end());
  std::reverse(time_idx->begin(), time_idx->end());
}

std::vector<int64_t> speech_align_tokens(const std::vector<std::vector<float>>& heads, int64_t n_tok, int64_t n_cols,
                                         int32_t median_width, int64_t row_begin, int64_t row_end) {
  BRISK_CHECK(!heads.empty() && n_tok > 0 && n_cols > 0 && row_begin >= 0 && row_begin < row_end && row_end <= n_tok,
              "alignment: no attention to align");
  std::vector<double> matrix(size_t(n_tok * n_cols), 0.0);
  std::vector<float> w(static_cast<size_t>(n_tok * n_cols));
  for (const std::vector<float>& h : heads) {
    BRISK_CHECK(int64_t(h.size()) == n_tok * n_cols, "alignment: head of ", h.size(), " values, expected ", n_tok * n_cols);
    w = h;
    for (int64_t c = 0; c < n_cols; ++c) {  // standardise each column over the tokens
      double mean = 0.0, var = 0.0;
      for (int64_t r = 0; r < n_tok; ++r) mean += w[size_t(r * n_cols + c)];
      mean /= double(n_tok);
      for (int64_t r = 0; r < n_tok; ++r) var += (w[size_t(r * n_cols + c)] - mean) * (w[size_t(r * n_cols + c)] - mean);
      const double sd = std::sqrt(var / double(n_tok));
      for (int64_t r = 0; r < n_tok; ++r) w[size_t(r * n_cols + c)] = float((w[size_t(r * n_cols + c)] - mean) / sd);
    }
    speech_median_filter(w.data(), n_tok, n_cols, median_width);
    for (size_t i = 0; i < w.size(); ++i) matrix[i] += w[i];
  }
  const int64_t rows = row_end - row_begin;
  std::vector<double> cost(matrix.begin() + row_begin * n_cols, matrix.begin() + row_end * n_cols);
  for (double& v : cost) v = -v / double(heads.size());
  std::vector<int64_t> text_idx, time_idx;
  speech_dtw(cost, rows, n_cols, &text_idx, &time_idx);
  std::vector<int64_t> out;
  for (size_t k = 0; k < text_idx.size(); ++k)
    if (k == 0 || text_idx[k] != text_idx[k - 1]) out.push_back(time_idx[k]);
  return out;  // one entry per row: the path enters each row once
}

namespace {

bool utf8_complete(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + len > s.size()) return false;
    i += len;
  }
  return true;
}

bool is_punctuation(const std::string& s) {
  static const std::string kPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  return s.size() == 1 && kPunct.find(s[0]) != std::string::npos;
}

std::string word_strip(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

std::vector<SpeechWordSpan> speech_split_words(const Tokenizer& tok, const std::vector<int32_t>& tokens, bool no_spaces) {
  // Pieces that decode to whole characters.
  std::vector<SpeechWordSpan> pieces;
  std::vector<int32_t> cur_ids;
  std::vector<int32_t> cur_idx;
  for (size_t i = 0; i < tokens.size(); ++i) {
    cur_ids.push_back(tokens[i]);
    cur_idx.push_back(int32_t(i));
    const std::string text = tok.decode_bytes(cur_ids, false);
    if (utf8_complete(text) || i + 1 == tokens.size()) {
      pieces.push_back({.text = text, .token_index = cur_idx});
      cur_ids.clear();
      cur_idx.clear();
    }
  }
  std::vector<SpeechWordSpan> words;
  for (SpeechWordSpan& p : pieces) {
    const bool starts = no_spaces || words.empty() || (!p.text.empty() && p.text[0] == ' ') || is_punctuation(word_strip(p.text));
    if (starts) {
      words.push_back(std::move(p));
    } else {
      words.back().text += p.text;
      words.back().token_index.insert(words.back().token_index.end(), p.token_index.begin(), p.token_index.end());
    }
  }
  for (SpeechWordSpan& w : words) {
    w.timing_begin = w.token_index.front();
    w.timing_end = w.token_index.back() + 1;
  }
  // Punctuation joins its neighbour: a word of leading marks (a space and marks) the following
  // word, a word of trailing marks the previous one. Membership is a substring test of the
  // mark strings, as openai-whisper's merge_punctuations does it (so a lone space counts too).
  static const std::string kPrepend = "\"'\xe2\x80\x9c\xc2\xbf([{-";
  static const std::string kAppend = "\"'.\xe3\x80\x82,\xef\xbc\x8c!\xef\xbc\x81?\xef\xbc\x9f:\xef\xbc\x9a\xe2\x80\x9d)]}\xe3\x80\x81";
  auto in = [](const std::string& set, const std::string& s) { return set.find(s) != std::string::npos; };
  if (words.size() >= 2) {
    int64_t i = int64_t(words.size()) - 2, j = int64_t(words.size()) - 1;
    while (i >= 0) {
      SpeechWordSpan& prev = words[size_t(i)];
      SpeechWordSpan& next = words[size_t(j)];
      if (!prev.text.empty() && prev.text[0] == ' ' && in(kPrepend, word_strip(prev.text))) {
        next.text = prev.text + next.text;  // keeps its own timing
        next.token_index.insert(next.token_index.begin(), prev.token_index.begin(), prev.token_index.end());
        prev.text.clear();
        prev.token_index.clear();
      } else {
        j = i;
      }
      --i;
    }
    size_t a = 0, b = 1;
    while (b < words.size()) {
      SpeechWordSpan& prev = words[a];
      SpeechWordSpan& next = words[b];
      if ((prev.text.empty() || prev.text.back() != ' ') && in(kAppend, next.text)) {
        prev.text += next.text;
        prev.token_index.insert(prev.token_index.end(), next.token_index.begin(), next.token_index.end());
        next.text.clear();
        next.token_index.clear();
      } else {
        a = b;
      }
      ++b;
    }
  }
  std::vector<SpeechWordSpan> out;
  for (SpeechWordSpan& w : words) {
    if (w.token_index.empty()) continue;
    // The text as a whole decode gives it (bytes that are not UTF-8 become U+FFFD).
    std::vector<int32_t> ids;
    for (int32_t i : w.token_index) ids.push_back(tokens[size_t(i)]);
    w.text = tok.decode(ids, false);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace brisk
