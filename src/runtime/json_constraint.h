// Constrained decoding: byte-level recognizers that say which continuations keep the output a
// valid prefix, and a token mask built from them.
//
// JsonConstraint is a pushdown automaton over bytes for RFC 8259 JSON (strict: no trailing
// commas, no leading zeros, strings valid UTF-8 without raw control bytes, \u escapes with
// paired surrogates, so that every completed text parses with any conforming parser).
// Its state is a small fixed-size value (the container stack is a bitset), so copying it is
// cheap: the token mask copies it at every trie node it visits.
//
// TokenMask turns a constraint (this one, SchemaConstraint of schema_constraint.h or
// ToolCallConstraint of tool_call_constraint.h) into a per-token allowed mask: a trie over the decoded
// token texts is walked with the constraint's state, pruning a subtree at the first byte that
// is rejected. Inside a JSON string (the common state) tokens made only of plain string bytes
// are allowed without walking (a precomputed mask), and only the rest of the vocabulary is
// walked.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>


namespace brisk {

class SchemaConstraint;    // schema_constraint.h
class ToolCallConstraint;  // tool_call_constraint.h
class XmlToolCallConstraint;  // xml_tool_call_constraint.h
class Gemma4ToolCallConstraint;  // gemma4_tool_call_constraint.h

struct JsonConstraintOptions {
  bool require_object = false;     // response_format json_object: the top level is an object
  int32_t max_depth = 64;          // nesting limit, at most 256
  int32_t max_whitespace_run = 0;  // > 0: at most this many whitespace bytes in a row outside
                                   // strings (stops a model from emitting blank lines forever)
  bool finite_numbers = false;     // numbers of at most 40 bytes and 2 exponent digits, which
                                   // every double parser reads as finite (below 1e140)
};

class JsonConstraint {
 public:
  explicit JsonConstraint(JsonConstraintOptions options = {});

  bool accepts(std::string_view piece) const;  // would appending keep a valid JSON prefix
  void advance(std::string_view piece);        // throws brisk::Error when !accepts(piece)
  bool complete() const;                       // a whole JSON value has been read
  void reset();
  // Inside a string with no escape or UTF-8 sequence pending: every plain byte is accepted.
  bool in_plain_string() const { return mode_ == Mode::kString; }
  bool accepts_any_text() const { return false; }
  JsonConstraint borrowed_copy() const { return *this; }  // for TokenMask (a plain copy)
  bool step(uint8_t byte);  // one byte; on false the state is unusable (accepts() works on a copy)

 private:
  enum class Mode : uint8_t {
    kValue, kArrayFirst, kObjectFirst, kObjectKey, kColon, kAfterValue,
    kString, kEscape, kUnicode, kLowBackslash, kLowU, kUtf8,
    kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumESign, kNumExp,
    kLiteral, kDone,
  };
  bool step_value_start(uint8_t byte);
  void finish_value();
  bool top_is_object() const { return (stack_[(depth_ - 1) / 64] >> ((depth_ - 1) % 64)) & 1; }
  bool push(bool is_object);
  bool whitespace(uint8_t byte);
  bool number_byte(bool exponent_digit);  // finite_numbers: the current number may grow

  JsonConstraintOptions options_;
  Mode mode_ = Mode::kValue;
  bool string_is_key_ = false;
  bool after_high_surrogate_ = false;
  uint8_t utf8_left_ = 0, utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
  uint8_t hex_left_ = 0;
  uint8_t literal_ = 0, literal_pos_ = 0;
  uint16_t hex_value_ = 0;
  int32_t depth_ = 0;
  int32_t whitespace_run_ = 0;
  uint8_t number_bytes_ = 0, exponent_digits_ = 0;  // finite_numbers: of the current number
  std::array<uint64_t, 4> stack_{};  // bit d: container at depth d+1 is an object
};

// Allowed-token masks for a vocabulary. vocab[i] is the decoded text of token i (raw bytes;
// may be a partial UTF-8 sequence). Empty texts are never allowed; `end_tokens` (EOS,
// end-of-turn) are allowed exactly when the constraint is complete.
class TokenMask {
 public:
  explicit TokenMask(const std::vector<std::string>& vocab, std::vector<int32_t> end_tokens = {});
  int32_t n_vocab() const { return n_vocab_; }
  // allowed: resized to n_vocab.
  void compute(const JsonConstraint& constraint, std::vector<bool>& allowed) const;
  void compute(const ToolCallConstraint& constraint, std::vector<bool>& allowed) const;
  void compute(const SchemaConstraint& constraint, std::vector<bool>& allowed) const;
  void compute(const XmlToolCallConstraint& constraint, std::vector<bool>& allowed) const;
  void compute(const Gemma4ToolCallConstraint& constraint, std::vector<bool>& allowed) const;

 private:
  struct Node {
    uint32_t edge_begin = 0, edge_end = 0;    // into edges_
    uint32_t token_begin = 0, token_end = 0;  // into tokens_
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  struct Trie {
    std::vector<Node> nodes;  // nodes[0] is the root
    std::vector<Edge> edges;
    std::vector<int32_t> tokens;
    void build(const std::vector<std::string>& vocab, const std::vector<int32_t>& ids);
  };
  template <class C>
  void walk(const Trie& trie, const C& start, std::vector<bool>& allowed) const;
  template <class C>
  void compute_any(const C& constraint, std::vector<bool>& allowed) const;

  int32_t n_vocab_ = 0;
  Trie plain_;                      // tokens of plain string bytes only (complete UTF-8)
  Trie rest_;                       // every other non-empty token
  std::vector<bool> plain_mask_;    // [n_vocab] membership of plain_
  std::vector<bool> nonempty_mask_; // [n_vocab] every non-empty token
  std::vector<int32_t> end_tokens_;
};

}  // namespace brisk
