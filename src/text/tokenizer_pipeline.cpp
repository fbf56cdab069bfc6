// Encode: text -> segments (added tokens matched leftmost-longest in a byte trie) ->
// normalize -> pre-tokenize -> model ids; add_special wraps with the post-processor ids.
// Decode: ids -> token strings -> decoder steps.
#include "text/tokenizer_pipeline.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "text/unicode.h"

namespace brisk::text {

namespace {

// Byte trie over added-token contents; finds the leftmost-longest allowed match.
class AddedMatcher {
 public:
  void build(const std::vector<AddedToken>& tokens, bool normalized) {
    nodes_.assign(1, Node{});
    first_.fill(false);
    for (size_t k = 0; k < tokens.size(); ++k) {
      const auto& t = tokens[k];
      if (t.normalized != normalized || t.content.empty()) continue;
      int32_t node = 0;
      for (char ch : t.content) node = child(node, static_cast<uint8_t>(ch), true);
      if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(k);
      first_[static_cast<uint8_t>(t.content[0])] = true;
      empty_ = false;
    }
  }
  bool empty() const { return empty_; }

  struct Match {
    size_t begin, end;
    int32_t token;  // index into the added list
  };
  // First match at or after `from` that `allow(token)` accepts.
  template <class Allow>
  bool find(std::string_view s, size_t from, Allow allow, Match* m) const {
    for (size_t i = from; i < s.size(); ++i) {
      if (!first_[static_cast<uint8_t>(s[i])]) continue;
      int32_t node = 0;
      int32_t best = -1;
      size_t best_end = 0;
      for (size_t j = i; j < s.size(); ++j) {
        node = child_const(node, static_cast<uint8_t>(s[j]));
        if (node < 0) break;
        const int32_t t = nodes_[node].token;
        if (t >= 0 && allow(t)) {
          best = t;
          best_end = j + 1;
        }
      }
      if (best >= 0) {
        *m = {i, best_end, best};
        return true;
      }
    }
    return false;
  }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;
  };
  int32_t child(int32_t node, uint8_t b, bool create) {
    auto& ch = nodes_[node].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t{-1}),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    if (it != ch.end() && it->first == b) return it->second;
    if (!create) return -1;
    const auto id = static_cast<int32_t>(nodes_.size());
    ch.insert(it, {b, id});
    nodes_.push_back(Node{});
    return id;
  }
  int32_t child_const(int32_t node, uint8_t b) const {
    const auto& ch = nodes_[node].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t{-1}),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    return (it != ch.end() && it->first == b) ? it->second : -1;
  }
  std::vector<Node> nodes_;
  std::array<bool, 256> first_{};
  bool empty_ = true;
};

bool is_word_char(uint32_t c) { return c == '_' || cpt_is_alnum(c); }

uint32_t last_cpt(std::string_view s) {
  size_t b = s.size() - 1;
  while (b > 0 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b;
  uint32_t c = 0;
  utf8_next(s, b, &c);
  return c;
}

struct Segment {
  size_t begin, end;
  int32_t id;  // -1: text
};

class PipelineTokenizer final : public Tokenizer {
 public:
  explicit PipelineTokenizer(TokenizerSpec spec) : s_(std::move(spec)) {
    BRISK_CHECK(s_.model, "tokenizer has no model");
    BRISK_CHECK(s_.special.size() == s_.tokens.size(), "tokenizer special flags do not match vocab");
    raw_matcher_.build(s_.added, false);
    norm_matcher_.build(s_.added, true);
  }

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opt) const override {
    std::string valid;
    if (!utf8_is_valid(text)) {
      valid = utf8_sanitize(text);
      text = valid;
    }
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 8);
    if (opt.add_special) ids.insert(ids.end(), s_.add_prefix.begin(), s_.add_prefix.end());
    std::vector<Segment> segs;
    split_added(raw_matcher_, text, opt.parse_special, segs);
    std::vector<Segment> sub;
    std::vector<Piece> pieces;
    for (const auto& seg : segs) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        continue;
      }
      const std::string normalized =
          normalize(s_.normalizer, std::string(text.substr(seg.begin, seg.end - seg.begin)));
      split_added(norm_matcher_, normalized, opt.parse_special, sub);
      for (const auto& part : sub) {
        if (part.id >= 0) {
          ids.push_back(part.id);
          continue;
        }
        pieces.clear();
        pieces.push_back({normalized.substr(part.begin, part.end - part.begin),
                          seg.begin == 0 && part.begin == 0});
        pre_tokenize(s_.pre_tokenizer, pieces);
        for (const auto& p : pieces) s_.model->tokenize(p.text, ids);
      }
    }
    if (opt.add_special) ids.insert(ids.end(), s_.add_suffix.begin(), s_.add_suffix.end());
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    return run_decoder(s_.decoder, token_strings(ids, skip_special), false);
  }
  std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special) const override {
    return run_decoder(s_.decoder, token_strings(ids, skip_special), true);
  }

  int32_t vocab_size() const override { return static_cast<int32_t>(s_.tokens.size()); }
  std::string token_text(int32_t id) const override {
    check_id(id);
    return s_.tokens[id];
  }
  bool is_special(int32_t id) const override {
    check_id(id);
    return s_.special[id] != 0;
  }
  int32_t bos_id() const override { return s_.bos; }
  int32_t eos_id() const override { return s_.eos; }
  std::vector<int32_t> end_of_generation_ids() const override { return s_.end_of_generation; }
  int32_t token_id(std::string_view text) const override { return token_index_find(s_.index, text); }

 private:
  void check_id(int32_t id) const {
    BRISK_CHECK(id >= 0 && id < vocab_size(), "token id ", id, " is out of range (vocab size ",
                vocab_size(), ")");
  }

  std::vector<std::string> token_strings(const std::vector<int32_t>& ids, bool skip_special) const {
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (int32_t id : ids) {
      check_id(id);
      if (skip_special && s_.special[id]) continue;
      out.push_back(s_.tokens[id]);
    }
    return out;
  }

  // Splits `text` at added tokens (with their strip / single-word rules).
  void split_added(const AddedMatcher& matcher, std::string_view text, bool parse_special,
                   std::vector<Segment>& out) const {
    out.clear();
    if (matcher.empty()) {
      if (!text.empty()) out.push_back({0, text.size(), -1});
      return;
    }
    auto allow = [&](int32_t t) { return parse_special || !s_.added[t].special; };
    size_t done = 0, from = 0;
    AddedMatcher::Match m{};
    while (from < text.size() && matcher.find(text, from, allow, &m)) {
      const AddedToken& tok = s_.added[m.token];
      size_t b = m.begin, e = m.end;
      if (tok.single_word) {
        const bool start_ok = b == 0 || !is_word_char(last_cpt(text.substr(0, b)));
        uint32_t next = 0;
        if (e < text.size()) utf8_next(text, e, &next);
        const bool stop_ok = e == text.size() || !is_word_char(next);
        if (!start_ok || !stop_ok) {
          from = m.end;
          continue;
        }
      }
      if (tok.lstrip) {
        while (b > done) {
          size_t p = b - 1;
          while (p > done && (static_cast<uint8_t>(text[p]) & 0xC0) == 0x80) --p;
          uint32_t c = 0;
          utf8_next(text, p, &c);
          if (!cpt_is_whitespace(c)) break;
          b = p;
        }
      }
      if (tok.rstrip) {
        while (e < text.size()) {
          uint32_t c = 0;
          const size_t n = utf8_next(text, e, &c);
          if (!cpt_is_whitespace(c)) break;
          e += n;
        }
      }
      if (b > done) out.push_back({done, b, -1});
      out.push_back({b, e, tok.id});
      done = from = e;
    }
    if (done < text.size()) out.push_back({done, text.size(), -1});
  }

  TokenizerSpec s_;
  AddedMatcher raw_matcher_, norm_matcher_;
};

// HF ByteFallback: a run of <0xXX> tokens becomes its bytes when they form valid UTF-8,
// otherwise one U+FFFD per byte.
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

std::string wordpiece_cleanup(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) {
    std::string out;
    const std::string f = from;
    size_t pos = 0;
    while (true) {
      const size_t hit = s.find(f, pos);
      if (hit == std::string::npos) break;
      out.append(s, pos, hit - pos);
      out += to;
      pos = hit + f.size();
    }
    out.append(s, pos, std::string::npos);
    s = std::move(out);
  }
  return s;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
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

}  // namespace

std::string run_decoder(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens,
                        bool raw) {
  using K = DecoderStep::Kind;
  if (steps.empty()) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return raw ? out : utf8_sanitize(out);
  }
  for (const auto& st : steps) {
    switch (st.kind) {
      case K::byte_level: {
        std::string bytes;
        for (const auto& t : tokens) {
          const size_t mark = bytes.size();
          if (!byte_level_decode(t, bytes)) {
            bytes.resize(mark);
            bytes += t;
          }
        }
        tokens.assign(1, raw ? bytes : utf8_sanitize(bytes));
        break;
      }
      case K::replace:
        for (auto& t : tokens) t = replace_all(t, st.pattern, st.content);
        break;
      case K::byte_fallback: {
        std::vector<std::string> out;
        std::string run;
        size_t run_len = 0;
        auto flush = [&] {
          if (run_len == 0) return;
          if (raw || utf8_is_valid(run)) {
            out.push_back(run);
          } else {
            for (size_t k = 0; k < run_len; ++k) out.push_back("\xEF\xBF\xBD");
          }
          run.clear();
          run_len = 0;
        };
        for (auto& t : tokens) {
          const int b = parse_byte_token(t);
          if (b >= 0) {
            run += static_cast<char>(b);
            ++run_len;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case K::fuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case K::strip:
        for (auto& t : tokens) {
          size_t b = 0;
          for (int k = 0; k < st.strip_start && t.compare(b, st.content.size(), st.content) == 0 &&
                          !st.content.empty(); ++k)
            b += st.content.size();
          size_t e = t.size();
          for (int k = 0; k < st.strip_stop && e >= b + st.content.size() && !st.content.empty() &&
                          t.compare(e - st.content.size(), st.content.size(), st.content) == 0; ++k)
            e -= st.content.size();
          t = t.substr(b, e - b);
        }
        break;
      case K::metaspace:
        for (size_t i = 0; i < tokens.size(); ++i)
          tokens[i] = replace_all(tokens[i], st.content,
                                  (i == 0 && st.metaspace_prepend) ? std::string() : std::string(" "));
        break;
      case K::wordpiece:
        for (size_t i = 0; i < tokens.size(); ++i) {
          auto& t = tokens[i];
          if (i != 0) {
            if (t.compare(0, st.prefix.size(), st.prefix) == 0) t.erase(0, st.prefix.size());
            else t = " " + t;
          }
          if (st.cleanup) t = wordpiece_cleanup(t);
        }
        break;
      case K::bpe_suffix:
        for (size_t i = 0; i < tokens.size(); ++i)
          tokens[i] = replace_all(tokens[i], st.suffix, i + 1 == tokens.size() ? "" : " ");
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return (raw || utf8_is_valid(out)) ? out : utf8_sanitize(out);
}

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(TokenizerSpec spec) {
  return std::make_unique<PipelineTokenizer>(std::move(spec));
}

void add_end_of_generation_defaults(TokenizerSpec& spec) {
  auto add = [&](int32_t id) {
    if (id < 0) return;
    if (std::find(spec.end_of_generation.begin(), spec.end_of_generation.end(), id) ==
        spec.end_of_generation.end())
      spec.end_of_generation.push_back(id);
  };
  add(spec.eos);
  // Gemma 4 ends a turn with <turn|>, and a turn that called a tool with <|tool_response>
  // (the caller's answer follows).
  for (const char* name : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>",
                           "<|endoftext|>", "<|end|>", "<turn|>", "<|tool_response>"}) {
    const int32_t id = token_index_find(spec.index, name);
    if (id >= 0 && spec.special[id]) add(id);
  }
}

}  // namespace brisk::text
