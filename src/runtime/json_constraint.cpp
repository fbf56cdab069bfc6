// JSON recognizer, tool-call constraint and token mask (see json_constraint.h).
#include "runtime/json_constraint.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "runtime/constraint_steps.h"
#include "runtime/schema_constraint.h"
#include "runtime/tool_call_constraint.h"
#include "runtime/gemma4_tool_call_constraint.h"
#include "runtime/xml_tool_call_constraint.h"

namespace brisk {
namespace {

constexpr int32_t kMaxDepthLimit = 256;
constexpr std::string_view kLiterals[3] = {"true", "false", "null"};

int hex_digit(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

// Lead byte of a multi-byte UTF-8 sequence: continuation count and the range of the first
// continuation byte (excludes overlong forms, surrogates and code points above U+10FFFF).
bool utf8_lead(uint8_t b, uint8_t& left, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    left = 1;
  } else if (b == 0xE0) {
    left = 2;
    lo = 0xA0;
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    left = 2;
  } else if (b == 0xED) {
    left = 2;
    hi = 0x9F;
  } else if (b == 0xF0) {
    left = 3;
    lo = 0x90;
  } else if (b >= 0xF1 && b <= 0xF3) {
    left = 3;
  } else if (b == 0xF4) {
    left = 3;
    hi = 0x8F;
  } else {
    return false;
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// JsonConstraint

JsonConstraint::JsonConstraint(JsonConstraintOptions options) : options_(options) {
  BRISK_CHECK(options_.max_depth >= 1 && options_.max_depth <= kMaxDepthLimit,
              "json constraint: max_depth must be in [1, ", kMaxDepthLimit, "], got ",
              options_.max_depth);
  BRISK_CHECK(options_.max_whitespace_run >= 0,
              "json constraint: max_whitespace_run must be >= 0");
}

void JsonConstraint::reset() { *this = JsonConstraint(options_); }

bool JsonConstraint::accepts(std::string_view piece) const {
  JsonConstraint copy = *this;
  for (char c : piece) {
    if (!copy.step(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

void JsonConstraint::advance(std::string_view piece) {
  JsonConstraint copy = *this;
  for (size_t i = 0; i < piece.size(); ++i) {
    BRISK_CHECK(copy.step(static_cast<uint8_t>(piece[i])), "json constraint: byte ", i,
                " of the appended piece (0x", std::hex, static_cast<int>(static_cast<uint8_t>(piece[i])),
                ") does not continue a valid JSON text");
  }
  *this = copy;
}

bool JsonConstraint::complete() const {
  if (mode_ == Mode::kDone) return true;
  // A top-level number has no closing byte: it is complete in any accepting number state.
  return depth_ == 0 && (mode_ == Mode::kNumZero || mode_ == Mode::kNumInt ||
                         mode_ == Mode::kNumFrac || mode_ == Mode::kNumExp);
}

bool JsonConstraint::whitespace(uint8_t byte) {
  if (!is_json_ws(byte)) return false;
  ++whitespace_run_;
  return options_.max_whitespace_run == 0 || whitespace_run_ <= options_.max_whitespace_run;
}

bool JsonConstraint::push(bool is_object) {
  if (depth_ >= options_.max_depth) return false;
  uint64_t& word = stack_[depth_ / 64];
  const uint64_t bit = uint64_t{1} << (depth_ % 64);
  word = is_object ? (word | bit) : (word & ~bit);
  ++depth_;
  return true;
}

void JsonConstraint::finish_value() { mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue; }

bool JsonConstraint::step_value_start(uint8_t b) {
  if (depth_ == 0 && options_.require_object && b != '{') return false;
  switch (b) {
    case '{':
      if (!push(true)) return false;
      mode_ = Mode::kObjectFirst;
      return true;
    case '[':
      if (!push(false)) return false;
      mode_ = Mode::kArrayFirst;
      return true;
    case '"':
      mode_ = Mode::kString;
      string_is_key_ = false;
      return true;
    case '-':
      mode_ = Mode::kNumMinus;
      number_bytes_ = 1;
      exponent_digits_ = 0;
      return true;
    case '0':
      mode_ = Mode::kNumZero;
      number_bytes_ = 1;
      exponent_digits_ = 0;
      return true;
    case 't':
    case 'f':
    case 'n':
      literal_ = b == 't' ? 0 : b == 'f' ? 1 : 2;
      literal_pos_ = 1;
      mode_ = Mode::kLiteral;
      return true;
    default:
      if (b >= '1' && b <= '9') {
        mode_ = Mode::kNumInt;
        number_bytes_ = 1;
        exponent_digits_ = 0;
        return true;
      }
      return false;
  }
}

bool JsonConstraint::number_byte(bool exponent_digit) {
  if (!options_.finite_numbers) return true;
  if (++number_bytes_ > 40) return false;
  return !exponent_digit || ++exponent_digits_ <= 2;
}

bool JsonConstraint::step(uint8_t b) {
  // Whitespace runs are counted outside strings only.
  if (mode_ != Mode::kString && mode_ != Mode::kEscape && mode_ != Mode::kUnicode &&
      mode_ != Mode::kUtf8 && mode_ != Mode::kLowBackslash && mode_ != Mode::kLowU &&
      !is_json_ws(b)) {
    whitespace_run_ = 0;
  }
  while (true) {  // loops only when a number ends and the byte is read again
    switch (mode_) {
      case Mode::kValue:
        return whitespace(b) || step_value_start(b);
      case Mode::kArrayFirst:
        if (b == ']') {
          --depth_;
          finish_value();
          return true;
        }
        return whitespace(b) || step_value_start(b);
      case Mode::kObjectFirst:
        if (b == '}') {
          --depth_;
          finish_value();
          return true;
        }
        [[fallthrough]];
      case Mode::kObjectKey:
        if (b == '"') {
          mode_ = Mode::kString;
          string_is_key_ = true;
          return true;
        }
        return whitespace(b);
      case Mode::kColon:
        if (b == ':') {
          mode_ = Mode::kValue;
          return true;
        }
        return whitespace(b);
      case Mode::kAfterValue:
        if (b == ',') {
          mode_ = top_is_object() ? Mode::kObjectKey : Mode::kValue;
          return true;
        }
        if ((b == '}' && top_is_object()) || (b == ']' && !top_is_object())) {
          --depth_;
          finish_value();
          return true;
        }
        return whitespace(b);
      case Mode::kDone:
        return whitespace(b);

      case Mode::kString:
        if (b == '"') {
          if (string_is_key_) {
            mode_ = Mode::kColon;
          } else {
            finish_value();
          }
          return true;
        }
        if (b == '\\') {
          mode_ = Mode::kEscape;
          return true;
        }
        if (b < 0x20) return false;
        if (b < 0x80) return true;
        if (!utf8_lead(b, utf8_left_, utf8_lo_, utf8_hi_)) return false;
        mode_ = Mode::kUtf8;
        return true;
      case Mode::kUtf8:
        if (b < utf8_lo_ || b > utf8_hi_) return false;
        utf8_lo_ = 0x80;
        utf8_hi_ = 0xBF;
        if (--utf8_left_ == 0) mode_ = Mode::kString;
        return true;
      case Mode::kEscape:
        switch (b) {
          case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            mode_ = Mode::kString;
            return true;
          case 'u':
            mode_ = Mode::kUnicode;
            hex_left_ = 4;
            hex_value_ = 0;
            after_high_surrogate_ = false;
            return true;
          default:
            return false;
        }
      case Mode::kUnicode: {
        const int d = hex_digit(b);
        if (d < 0) return false;
        const uint32_t value = hex_value_ * 16u + static_cast<uint32_t>(d);
        const uint32_t left = hex_left_ - 1u;
        // Code points this escape can still become: [lo, hi].
        const uint32_t lo = value << (4 * left);
        const uint32_t hi = lo + (1u << (4 * left)) - 1u;
        if (after_high_surrogate_) {
          if (hi < 0xDC00 || lo > 0xDFFF) return false;  // must be a low surrogate
        } else if (lo >= 0xDC00 && hi <= 0xDFFF) {
          return false;  // a low surrogate without a high one before it
        }
        hex_value_ = static_cast<uint16_t>(value);
        hex_left_ = static_cast<uint8_t>(left);
        if (left == 0) {
          mode_ = (!after_high_surrogate_ && value >= 0xD800 && value <= 0xDBFF)
                      ? Mode::kLowBackslash
                      : Mode::kString;
        }
        return true;
      }
      case Mode::kLowBackslash:
        if (b != '\\') return false;
        mode_ = Mode::kLowU;
        return true;
      case Mode::kLowU:
        if (b != 'u') return false;
        mode_ = Mode::kUnicode;
        hex_left_ = 4;
        hex_value_ = 0;
        after_high_surrogate_ = true;
        return true;

      case Mode::kNumMinus:
        if (b == '0') {
          mode_ = Mode::kNumZero;
          return number_byte(false);
        }
        if (b >= '1' && b <= '9') {
          mode_ = Mode::kNumInt;
          return number_byte(false);
        }
        return false;
      case Mode::kNumZero:
      case Mode::kNumInt:
        if (is_ascii_digit(b)) return mode_ == Mode::kNumInt && number_byte(false);  // no leading zeros
        if (b == '.') {
          mode_ = Mode::kNumDot;
          return number_byte(false);
        }
        if (b == 'e' || b == 'E') {
          mode_ = Mode::kNumE;
          return number_byte(false);
        }
        finish_value();
        continue;
      case Mode::kNumDot:
        if (!is_ascii_digit(b)) return false;
        mode_ = Mode::kNumFrac;
        return number_byte(false);
      case Mode::kNumFrac:
        if (is_ascii_digit(b)) return number_byte(false);
        if (b == 'e' || b == 'E') {
          mode_ = Mode::kNumE;
          return number_byte(false);
        }
        finish_value();
        continue;
      case Mode::kNumE:
        if (b == '+' || b == '-') {
          mode_ = Mode::kNumESign;
          return number_byte(false);
        }
        [[fallthrough]];
      case Mode::kNumESign:
        if (!is_ascii_digit(b)) return false;
        mode_ = Mode::kNumExp;
        return number_byte(true);
      case Mode::kNumExp:
        if (is_ascii_digit(b)) return number_byte(true);
        finish_value();
        continue;

      case Mode::kLiteral: {
        const std::string_view lit = kLiterals[literal_];
        if (b != static_cast<uint8_t>(lit[literal_pos_])) return false;
        if (++literal_pos_ == lit.size()) finish_value();
        return true;
      }
    }
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// TokenMask

namespace {

// True when every byte of `text` can appear unescaped inside a JSON string and the UTF-8 is
// complete and valid, so the token is accepted in any plain string state.
bool is_plain_string_text(const std::string& text) {
  if (text.empty()) return false;
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t b = static_cast<uint8_t>(text[i]);
    if (b < 0x20 || b == '"' || b == '\\') return false;
    if (b < 0x80) {
      ++i;
      continue;
    }
    uint8_t left, lo, hi;
    if (!utf8_lead(b, left, lo, hi)) return false;
    if (text.size() - i <= left) return false;  // sequence cut off
    for (uint8_t k = 1; k <= left; ++k) {
      const uint8_t c = static_cast<uint8_t>(text[i + k]);
      if (c < lo || c > hi) return false;
      lo = 0x80;
      hi = 0xBF;
    }
    i += 1u + left;
  }
  return true;
}

}  // namespace

void TokenMask::Trie::build(const std::vector<std::string>& vocab,
                            const std::vector<int32_t>& ids) {
  // Build with ordered child maps, then flatten breadth-first into contiguous arrays.
  struct BuildNode {
    std::map<uint8_t, uint32_t> children;
    std::vector<int32_t> tokens;
  };
  std::vector<BuildNode> tmp(1);
  for (int32_t id : ids) {
    uint32_t node = 0;
    for (char c : vocab[static_cast<size_t>(id)]) {
      const uint8_t b = static_cast<uint8_t>(c);
      auto it = tmp[node].children.find(b);
      if (it == tmp[node].children.end()) {
        tmp.emplace_back();
        const uint32_t child = static_cast<uint32_t>(tmp.size() - 1);
        tmp[node].children.emplace(b, child);
        node = child;
      } else {
        node = it->second;
      }
    }
    tmp[node].tokens.push_back(id);
  }
  nodes.assign(tmp.size(), Node{});
  edges.clear();
  tokens.clear();
  for (size_t n = 0; n < tmp.size(); ++n) {
    nodes[n].edge_begin = static_cast<uint32_t>(edges.size());
    for (const auto& [b, child] : tmp[n].children) edges.push_back(Edge{b, child});
    nodes[n].edge_end = static_cast<uint32_t>(edges.size());
    nodes[n].token_begin = static_cast<uint32_t>(tokens.size());
    tokens.insert(tokens.end(), tmp[n].tokens.begin(), tmp[n].tokens.end());
    nodes[n].token_end = static_cast<uint32_t>(tokens.size());
  }
}

TokenMask::TokenMask(const std::vector<std::string>& vocab, std::vector<int32_t> end_tokens)
    : end_tokens_(std::move(end_tokens)) {
  BRISK_CHECK(vocab.size() <= static_cast<size_t>(INT32_MAX), "token mask: vocabulary too large");
  n_vocab_ = static_cast<int32_t>(vocab.size());
  for (int32_t id : end_tokens_) {
    BRISK_CHECK(id >= 0 && id < n_vocab_, "token mask: end token id ", id,
                " is outside the vocabulary [0, ", n_vocab_, ")");
  }
  std::vector<int32_t> plain_ids, rest_ids;
  plain_mask_.assign(vocab.size(), false);
  nonempty_mask_.assign(vocab.size(), false);
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const std::string& t = vocab[static_cast<size_t>(i)];
    if (t.empty()) continue;
    nonempty_mask_[static_cast<size_t>(i)] = true;
    if (is_plain_string_text(t)) {
      plain_ids.push_back(i);
      plain_mask_[static_cast<size_t>(i)] = true;
    } else {
      rest_ids.push_back(i);
    }
  }
  plain_.build(vocab, plain_ids);
  rest_.build(vocab, rest_ids);
}

template <class C>
void TokenMask::walk(const Trie& trie, const C& start, std::vector<bool>& allowed) const {
  // Depth-first; each frame owns the constraint state reached at its node.
  struct Frame {
    uint32_t node;
    C state;
  };
  std::vector<Frame> stack;
  stack.push_back(Frame{0, start.borrowed_copy()});
  while (!stack.empty()) {
    Frame f = std::move(stack.back());
    stack.pop_back();
    const Node& node = trie.nodes[f.node];
    for (uint32_t e = node.edge_begin; e < node.edge_end; ++e) {
      const Edge& edge = trie.edges[e];
      C next = f.state.borrowed_copy();
      if (!next.step(edge.byte)) continue;
      const Node& child = trie.nodes[edge.child];
      for (uint32_t t = child.token_begin; t < child.token_end; ++t) {
        allowed[static_cast<size_t>(trie.tokens[t])] = true;
      }
      if (child.edge_begin != child.edge_end) stack.push_back(Frame{edge.child, std::move(next)});
    }
  }
}

template <class C>
void TokenMask::compute_any(const C& constraint, std::vector<bool>& allowed) const {
  if (constraint.accepts_any_text()) {
    allowed = nonempty_mask_;
  } else if (constraint.in_plain_string()) {
    allowed = plain_mask_;
  } else {
    allowed.assign(static_cast<size_t>(n_vocab_), false);
    walk(plain_, constraint, allowed);
  }
  if (!constraint.accepts_any_text()) walk(rest_, constraint, allowed);
  const bool done = constraint.complete();
  for (int32_t id : end_tokens_) allowed[static_cast<size_t>(id)] = done;
}

void TokenMask::compute(const JsonConstraint& constraint, std::vector<bool>& allowed) const {
  compute_any(constraint, allowed);
}

void TokenMask::compute(const ToolCallConstraint& constraint, std::vector<bool>& allowed) const {
  compute_any(constraint, allowed);
}

void TokenMask::compute(const SchemaConstraint& constraint, std::vector<bool>& allowed) const {
  compute_any(constraint, allowed);
}

void TokenMask::compute(const XmlToolCallConstraint& constraint, std::vector<bool>& allowed) const {
  compute_any(constraint, allowed);
}

void TokenMask::compute(const Gemma4ToolCallConstraint& constraint, std::vector<bool>& allowed) const {
  compute_any(constraint, allowed);
}

}  // namespace brisk
