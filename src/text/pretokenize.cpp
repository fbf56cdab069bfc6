// Normalizers and pre-tokenizers (Hugging Face `tokenizers` semantics), on UTF-8 strings.
#include "text/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "core/error.h"
#include "text/precompiled.h"
#include "text/unicode.h"

namespace brisk::text {

const char* const kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// ---------------------------------------------------------------------------------------
// Regex
// ---------------------------------------------------------------------------------------

namespace {
// Per-thread match state: match data and a JIT stack large enough for long whitespace runs.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};
MatchState& match_state() {
  thread_local MatchState state;
  return state;
}
}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    fail("tokenizer regex does not compile at offset ", err_offset, ": ",
         reinterpret_cast<const char*>(msg), " (pattern: ", pattern, ")");
  }
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  auto& st = match_state();
  BRISK_CHECK(st.data && st.context, "out of memory creating regex match data");
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    const int rc = jit_ ? pcre2_jit_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK,
                                          st.data, st.context)
                        : pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, st.data,
                                      st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      fail("tokenizer regex match failed: ", reinterpret_cast<const char*>(msg),
           " (pattern: ", pattern_, ")");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) out.emplace_back(b, e);
    if (e > pos) {
      pos = e;
    } else {  // empty match: step over one character
      if (pos >= s.size()) break;
      uint32_t c = 0;
      pos += utf8_next(s, pos, &c);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Normalizers
// ---------------------------------------------------------------------------------------

namespace {

std::string replace_literal(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::string replace_regex(const std::string& s, const Regex& re, const std::string& to) {
  std::vector<std::pair<size_t, size_t>> m;
  re.find_all(s, m);
  if (m.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (auto [b, e] : m) {
    out.append(s, pos, b - pos);
    out += to;
    pos = e;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::string bert_normalize(const NormalizerStep& st, const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t c = 0;
    const size_t n = utf8_next(s, i, &c);
    i += n;
    if (st.clean_text) {
      if (c == 0 || c == 0xFFFD || cpt_is_control(c)) continue;
      if (cpt_is_whitespace(c)) { out += ' '; continue; }
    }
    if (st.handle_chinese_chars && cpt_is_cjk(c)) {
      out += ' ';
      utf8_append(out, c);
      out += ' ';
      continue;
    }
    utf8_append(out, c);
  }
  const bool strip = st.strip_accents < 0 ? st.lowercase : st.strip_accents == 1;
  if (strip) out = unicode_strip_accents(unicode_normalize(out, NormalForm::nfd));
  if (st.lowercase) out = unicode_lowercase(out);
  return out;
}

size_t leading_ws(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint32_t c = 0;
    const size_t n = utf8_next(s, i, &c);
    if (!cpt_is_whitespace(c)) break;
    i += n;
  }
  return i;
}

size_t trailing_ws_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t b = end - 1;
    while (b > 0 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b;
    uint32_t c = 0;
    utf8_next(s, b, &c);
    if (!cpt_is_whitespace(c)) break;
    end = b;
  }
  return end;
}

}  // namespace

std::string normalize(const std::vector<NormalizerStep>& steps, std::string text) {
  using K = NormalizerStep::Kind;
  for (const auto& st : steps) {
    switch (st.kind) {
      case K::nfc: text = unicode_normalize(text, NormalForm::nfc); break;
      case K::nfd: text = unicode_normalize(text, NormalForm::nfd); break;
      case K::nfkc: text = unicode_normalize(text, NormalForm::nfkc); break;
      case K::nfkd: text = unicode_normalize(text, NormalForm::nfkd); break;
      case K::lowercase: text = unicode_lowercase(text); break;
      case K::strip_accents: text = unicode_strip_accents(text); break;
      case K::replace:
        text = st.regex ? replace_regex(text, *st.regex, st.content)
                        : replace_literal(text, st.pattern, st.content);
        break;
      case K::prepend:
        if (!text.empty()) text = st.content + text;
        break;
      case K::strip: {
        const size_t b = st.strip_left ? leading_ws(text) : 0;
        const size_t e = st.strip_right ? trailing_ws_start(text) : text.size();
        text = e > b ? text.substr(b, e - b) : std::string();
        break;
      }
      case K::bert: text = bert_normalize(st, text); break;
      case K::precompiled: text = st.charsmap->normalize(text); break;
      case K::byte_level: {
        std::string out;
        byte_level_encode(text, out);
        text = std::move(out);
        break;
      }
    }
  }
  return text;
}

// ---------------------------------------------------------------------------------------
// Pre-tokenizers
// ---------------------------------------------------------------------------------------

namespace {

using Range = std::pair<size_t, size_t>;
struct Span {
  size_t b, e;
  bool is_match;
};

// Turns matches into alternating spans covering all of `len`, then applies the behavior
// (the same merging rules as the reference implementation).
std::vector<Range> split_spans(size_t len, const std::vector<Range>& matches, bool invert,
                               SplitBehavior behavior) {
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < len) spans.push_back({prev, len, invert});

  std::vector<Span> acc;
  switch (behavior) {
    case SplitBehavior::isolated: acc = spans; break;
    case SplitBehavior::removed:
      for (const auto& s : spans)
        if (!s.is_match) acc.push_back(s);
      break;
    case SplitBehavior::merged_with_previous: {
      bool previous_match = false;
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !acc.empty()) acc.back().e = s.e;
        else acc.push_back(s);
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool previous_match = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const auto& s = spans[k];
        if (s.is_match && !previous_match && !acc.empty()) acc.back().b = s.b;
        else acc.push_back(s);
        previous_match = s.is_match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    }
    case SplitBehavior::contiguous: {
      bool previous_match = false;
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !acc.empty()) acc.back().e = s.e;
        else acc.push_back(s);
        previous_match = s.is_match;
      }
      break;
    }
  }
  std::vector<Range> out;
  out.reserve(acc.size());
  for (const auto& s : acc)
    if (s.e > s.b) out.emplace_back(s.b, s.e);
  return out;
}

// Matches of single characters that satisfy `pred`, as ranges.
template <class Pred>
void char_matches(std::string_view s, Pred pred, std::vector<Range>& out) {
  for (size_t i = 0; i < s.size();) {
    uint32_t c = 0;
    const size_t n = utf8_next(s, i, &c);
    if (pred(c)) out.emplace_back(i, i + n);
    i += n;
  }
}

void literal_matches(std::string_view s, std::string_view lit, std::vector<Range>& out) {
  if (lit.empty()) return;
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(lit, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(hit, hit + lit.size());
    pos = hit + lit.size();
  }
}

// Applies one split to every piece.
template <class MatchFn>
void split_pieces(std::vector<Piece>& pieces, bool invert, SplitBehavior behavior, MatchFn fn) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  std::vector<Range> matches;
  for (auto& p : pieces) {
    matches.clear();
    fn(p.text, matches);
    if (matches.empty() && !invert) {
      if (!p.text.empty()) out.push_back(std::move(p));
      continue;
    }
    for (auto [b, e] : split_spans(p.text.size(), matches, invert, behavior))
      out.push_back({p.text.substr(b, e - b), p.at_start && b == 0});
  }
  pieces = std::move(out);
}

}  // namespace

void pre_tokenize(const std::vector<PreTokenizerStep>& steps, std::vector<Piece>& pieces) {
  using K = PreTokenizerStep::Kind;
  for (const auto& st : steps) {
    switch (st.kind) {
      case K::split:
        if (st.regex) {
          split_pieces(pieces, st.invert, st.behavior,
                       [&](const std::string& s, std::vector<Range>& m) { st.regex->find_all(s, m); });
        } else {
          split_pieces(pieces, st.invert, st.behavior, [&](const std::string& s, std::vector<Range>& m) {
            literal_matches(s, st.literal, m);
          });
        }
        break;
      case K::char_delimiter:
        split_pieces(pieces, false, SplitBehavior::removed, [&](const std::string& s, std::vector<Range>& m) {
          literal_matches(s, st.literal, m);
        });
        break;
      case K::byte_level: {
        if (st.add_prefix_space)
          for (auto& p : pieces)
            if (p.text.empty() || p.text[0] != ' ') p.text.insert(p.text.begin(), ' ');
        if (st.regex)
          split_pieces(pieces, false, SplitBehavior::isolated,
                       [&](const std::string& s, std::vector<Range>& m) { st.regex->find_all(s, m); });
        std::string mapped;
        for (auto& p : pieces) {
          mapped.clear();
          byte_level_encode(p.text, mapped);
          p.text.swap(mapped);
        }
        break;
      }
      case K::digits:
        split_pieces(pieces, false,
                     st.individual_digits ? SplitBehavior::isolated : SplitBehavior::contiguous,
                     [](const std::string& s, std::vector<Range>& m) { char_matches(s, cpt_is_number, m); });
        break;
      case K::metaspace: {
        for (auto& p : pieces) {
          p.text = [&] {
            std::string out;
            out.reserve(p.text.size() + 8);
            for (char ch : p.text) {
              if (ch == ' ') out += st.replacement;
              else out += ch;
            }
            return out;
          }();
          const bool starts = p.text.compare(0, st.replacement.size(), st.replacement) == 0;
          if (!starts && (st.prepend == PreTokenizerStep::Prepend::always ||
                          (st.prepend == PreTokenizerStep::Prepend::first && p.at_start)))
            p.text.insert(0, st.replacement);
        }
        if (st.metaspace_split)
          split_pieces(pieces, false, SplitBehavior::merged_with_next,
                       [&](const std::string& s, std::vector<Range>& m) { literal_matches(s, st.replacement, m); });
        break;
      }
      case K::whitespace:
        // \w+|[^\w\s]+ kept, the rest (whitespace) dropped.
        split_pieces(pieces, false, SplitBehavior::removed, [](const std::string& s, std::vector<Range>& m) {
          char_matches(s, cpt_is_whitespace, m);
        });
        split_pieces(pieces, false, SplitBehavior::contiguous, [](const std::string& s, std::vector<Range>& m) {
          char_matches(s, [](uint32_t c) { return cpt_is_alnum(c) || c == '_' || cpt_is_mark(c); }, m);
        });
        break;
      case K::whitespace_split:
        split_pieces(pieces, false, SplitBehavior::removed, [](const std::string& s, std::vector<Range>& m) {
          char_matches(s, cpt_is_whitespace, m);
        });
        break;
      case K::bert:
        split_pieces(pieces, false, SplitBehavior::removed, [](const std::string& s, std::vector<Range>& m) {
          char_matches(s, cpt_is_whitespace, m);
        });
        split_pieces(pieces, false, SplitBehavior::isolated, [](const std::string& s, std::vector<Range>& m) {
          char_matches(s, cpt_is_punctuation, m);
        });
        break;
      case K::punctuation:
        split_pieces(pieces, false, st.behavior, [](const std::string& s, std::vector<Range>& m) {
          char_matches(s, cpt_is_punctuation, m);
        });
        break;
    }
  }
}


}  // namespace brisk::text
