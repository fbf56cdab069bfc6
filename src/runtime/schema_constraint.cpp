// JSON Schema recognizer (see schema_constraint.h); the compiler is schema_compile.cpp.
#include "runtime/schema_constraint.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/constraint_steps.h"
#include "runtime/schema_nodes.h"

namespace brisk {

SchemaConstraint SchemaConstraint::unowned(const CompiledSchema* schema, int32_t max_whitespace_run) {
  BRISK_CHECK(schema != nullptr && max_whitespace_run >= 0, "json schema constraint: bad arguments");
  SchemaConstraint c;
  c.schema_ = schema;
  c.max_ws_ = max_whitespace_run;
  c.value_node_ = schema->root;
  return c;
}

SchemaConstraint::SchemaConstraint(std::shared_ptr<const CompiledSchema> schema, int32_t max_whitespace_run)
    : owner_(std::move(schema)), max_ws_(max_whitespace_run) {
  BRISK_CHECK(owner_ != nullptr, "json schema constraint: no schema");
  BRISK_CHECK(max_ws_ >= 0, "json schema constraint: max_whitespace_run must be >= 0");
  schema_ = owner_.get();
  value_node_ = schema_->root;
}

SchemaConstraint& SchemaConstraint::operator=(const SchemaConstraint& o) {
  if (this == &o) return *this;
  owner_ = o.owner_;
  schema_ = o.schema_;
  max_ws_ = o.max_ws_;
  ws_run_ = o.ws_run_;
  mode_ = o.mode_;
  value_node_ = o.value_node_;
  lex_ = o.lex_;
  leaf_node_ = o.leaf_node_;
  leaf_is_key_ = o.leaf_is_key_;
  leaf_integer_ = o.leaf_integer_;
  leaf_number_ = o.leaf_number_;
  leaf_string_ = o.leaf_string_;
  esc_ = o.esc_;
  esc_high_ = o.esc_high_;
  str_len_ = o.str_len_;
  leaf_bounded_ = o.leaf_bounded_;
  num_ = o.num_;
  lo_ = o.lo_;
  hi_ = o.hi_;
  pos_ = o.pos_;
  depth_ = o.depth_;
  std::copy_n(o.frames_.begin(), o.depth_, frames_.begin());  // frames above depth_ are dead
  return *this;
}

SchemaConstraint::SchemaConstraint(const SchemaConstraint& o, Borrow)
    : schema_(o.schema_),
      max_ws_(o.max_ws_),
      ws_run_(o.ws_run_),
      mode_(o.mode_),
      value_node_(o.value_node_),
      lex_(o.lex_),
      leaf_node_(o.leaf_node_),
      leaf_is_key_(o.leaf_is_key_),
      leaf_integer_(o.leaf_integer_),
      leaf_number_(o.leaf_number_),
      leaf_string_(o.leaf_string_),
      esc_(o.esc_),
      esc_high_(o.esc_high_),
      str_len_(o.str_len_),
      leaf_bounded_(o.leaf_bounded_),
      num_(o.num_),
      lo_(o.lo_),
      hi_(o.hi_),
      pos_(o.pos_),
      depth_(o.depth_) {
  std::copy_n(o.frames_.begin(), o.depth_, frames_.begin());  // frames above depth_ are dead
}

// A copy for one mask computation: no reference count traffic.
SchemaConstraint SchemaConstraint::borrowed_copy() const { return SchemaConstraint(*this, Borrow{}); }

bool SchemaConstraint::accepts(std::string_view piece) const { return steps_accept(*this, piece); }

void SchemaConstraint::advance(std::string_view piece) {
  SchemaConstraint next = steps_advance(*this, piece, "json schema constraint");
  std::shared_ptr<const CompiledSchema> keep = std::move(owner_);
  *this = next;
  owner_ = std::move(keep);
}

bool SchemaConstraint::complete() const {
  if (mode_ == Mode::kDone) return true;
  if (depth_ != 0) return false;
  if (mode_ == Mode::kLex) return leaf_number_ && lex_.complete() && number_in_bounds();
  if (mode_ == Mode::kLiteral) {
    const std::string& l = schema_->nodes[size_t(leaf_node_)].literals[lo_];
    return l.size() == pos_ && schema_detail::is_number_spelling(l);
  }
  return false;
}

bool SchemaConstraint::in_plain_string() const {
  return mode_ == Mode::kLex && !leaf_number_ && !leaf_string_ && lex_.in_plain_string();
}

bool SchemaConstraint::whitespace(uint8_t b) {
  if (!is_json_ws(b)) return false;
  ++ws_run_;
  return max_ws_ == 0 || ws_run_ <= max_ws_;
}

int32_t SchemaConstraint::item_node(const Frame& f) const {
  const SchemaNode& n = schema_->nodes[size_t(f.node)];
  if (f.count < n.prefix_items.size()) return n.prefix_items[f.count];
  return n.items;
}

bool SchemaConstraint::end_value() {
  if (mode_ == Mode::kLex && leaf_is_key_) {  // a map object's key: its value comes next
    Frame& f = frames_[size_t(depth_ - 1)];
    f.child = schema_->nodes[size_t(f.node)].additional;
    f.phase = Phase::kColon;
    mode_ = Mode::kFrame;
    return true;
  }
  if (depth_ == 0) {
    mode_ = Mode::kDone;
    return true;
  }
  Frame& f = frames_[size_t(depth_ - 1)];
  ++f.count;  // items, or members
  f.phase = f.array ? Phase::kArrAfter : Phase::kObjAfter;
  mode_ = Mode::kFrame;
  return true;
}

bool SchemaConstraint::begin_leaf(int32_t node, uint8_t b, bool is_key) {
  lex_ = JsonConstraint({.require_object = false, .max_depth = 64, .max_whitespace_run = max_ws_, .finite_numbers = true});
  const SchemaNode& n = schema_->nodes[size_t(node)];
  leaf_node_ = node;
  leaf_is_key_ = is_key;
  leaf_number_ = b == '-' || is_ascii_digit(b);
  leaf_integer_ = leaf_number_ && n.kind == SchemaNode::Kind::kTyped && (n.types & schema_detail::kInteger) && !(n.types & schema_detail::kNumber);
  leaf_string_ = b == '"' && !is_key && n.kind == SchemaNode::Kind::kTyped && (n.min_length > 0 || n.max_length >= 0);
  esc_ = 0;
  esc_high_ = false;
  str_len_ = 0;
  leaf_bounded_ = leaf_number_ && n.kind == SchemaNode::Kind::kTyped && n.bounds.any();
  num_ = NumberState{};
  if (!lex_.step(b)) return false;
  if (leaf_bounded_ && !bounded_number_byte(b)) return false;
  mode_ = Mode::kLex;
  return true;
}

NumberPrefix SchemaConstraint::number_prefix() const {
  return NumberPrefix{.neg = num_.neg,
                      .int_digits = std::string_view(num_.digits.data(), num_.int_len),
                      .dot = num_.dot,
                      .frac_digits = std::string_view(num_.digits.data() + num_.int_len, size_t(num_.len - num_.int_len))};
}

bool SchemaConstraint::number_in_bounds() const {
  return !leaf_bounded_ || number_prefix_in_bounds(schema_->nodes[size_t(leaf_node_)].bounds, number_prefix());
}

// A byte of a bounded number (the JSON grammar already accepted it): written without exponent,
// within the digit limits, and still able to end inside the bounds.
bool SchemaConstraint::bounded_number_byte(uint8_t b) {
  const NumberBounds& bounds = schema_->nodes[size_t(leaf_node_)].bounds;
  if (b == '-') {
    num_.neg = true;
  } else if (b == '.') {
    num_.dot = true;
  } else if (is_ascii_digit(b)) {
    if (!num_.dot) {
      if (num_.int_len >= (bounds.integer ? kMaxBoundedIntegerDigits : kMaxIntegerDigits)) return false;
      ++num_.int_len;
    } else if (num_.len - num_.int_len >= kMaxFractionDigits) {
      return false;
    }
    num_.digits[num_.len++] = char(b);
  } else {
    return false;  // exponent
  }
  return number_prefix_feasible(bounds, number_prefix());
}

bool SchemaConstraint::begin_value(int32_t node, uint8_t b) {
  node = schema_->resolve(node, b);
  if (node < 0) return false;
  const SchemaNode& n = schema_->nodes[size_t(node)];
  if (n.kind == SchemaNode::Kind::kLiteral) {
    const auto [lo, hi] = narrow_candidates(n.literals, 0, uint32_t(n.literals.size()), 0, b);
    if (lo == hi) return false;
    leaf_node_ = node;
    lo_ = lo;
    hi_ = hi;
    pos_ = 1;
    mode_ = Mode::kLiteral;
    return true;
  }
  const bool frame_object = b == '{' && n.kind == SchemaNode::Kind::kTyped && !n.any_object;
  const bool frame_array = b == '[' && n.kind == SchemaNode::Kind::kTyped && !n.any_array;
  if (!frame_object && !frame_array) return begin_leaf(node, b, false);
  if (depth_ >= kMaxDepth) return false;
  frames_[size_t(depth_++)] = Frame{.seen = 0,
                                    .node = node,
                                    .child = 0,
                                    .count = 0,
                                    .phase = frame_object ? Phase::kObjFirst : Phase::kArrFirst,
                                    .array = frame_array,
                                    .map = frame_object && n.additional >= 0};
  mode_ = Mode::kFrame;
  return true;
}

// A free leaf's byte: string length limits, then the JSON grammar.
bool SchemaConstraint::step_lex(uint8_t b) {
  if (leaf_string_) {
    const SchemaNode& n = schema_->nodes[size_t(leaf_node_)];
    if (esc_ == 1) {
      esc_ = b == 'u' ? 2 : 0;
      esc_high_ = false;
    } else if (esc_ >= 2) {
      const int digit = esc_ - 2;
      if (digit == 0) esc_high_ = b == 'd' || b == 'D';
      if (digit == 1 && esc_high_) {
        esc_high_ = (b >= '8' && b <= '9') || (b >= 'a' && b <= 'b') || (b >= 'A' && b <= 'B');
        if (esc_high_) --str_len_;  // a high surrogate: the pair counts once, at the low half
      }
      esc_ = digit == 3 ? 0 : uint8_t(esc_ + 1);
    } else if (b == '"') {
      if (str_len_ < n.min_length) return false;
    } else if (b == '\\' || (b & 0xC0) != 0x80) {
      if (n.max_length >= 0 && str_len_ >= n.max_length) return false;
      ++str_len_;
      if (b == '\\') esc_ = 1;
    }
  }
  if (!lex_.step(b)) return false;
  if (lex_.complete()) return end_value();  // strings, literals and containers end on their last byte
  return true;
}

bool SchemaConstraint::step_literal(uint8_t b) {
  const std::vector<std::string>& lits = schema_->nodes[size_t(leaf_node_)].literals;
  const auto [lo, hi] = narrow_candidates(lits, lo_, hi_, pos_, b);
  if (lo == hi) return false;
  lo_ = lo;
  hi_ = hi;
  ++pos_;
  if (lits[lo_].size() == pos_ && !schema_detail::is_number_spelling(lits[lo_])) return end_value();
  return true;
}

bool SchemaConstraint::step_key(uint8_t b) {
  Frame& f = frames_[size_t(depth_ - 1)];
  const SchemaNode& n = schema_->nodes[size_t(f.node)];
  const auto [lo, hi] = narrow_candidates(n.keys, lo_, hi_, pos_, b);
  bool open = false;  // an unwritten property still matches
  for (uint32_t i = lo; i < hi; ++i) open = open || !((f.seen >> i) & 1);
  if (!open) return false;
  lo_ = lo;
  hi_ = hi;
  ++pos_;
  if (n.keys[lo_].size() == pos_ && !((f.seen >> lo_) & 1)) {  // the whole name, closing quote included
    f.seen |= uint64_t{1} << lo_;
    f.child = n.key_nodes[lo_];
    f.phase = Phase::kColon;
    mode_ = Mode::kFrame;
  }
  return true;
}

bool SchemaConstraint::step_frame(uint8_t b) {
  if (is_json_ws(b)) return whitespace(b);
  ws_run_ = 0;
  Frame& f = frames_[size_t(depth_ - 1)];
  const SchemaNode& n = schema_->nodes[size_t(f.node)];
  const auto close = [&] {
    --depth_;
    return end_value();
  };
  const auto start_key = [&] {
    if (f.map) return begin_leaf(schema_detail::kAnyNode, b, true);
    lo_ = 0;
    hi_ = uint32_t(n.keys.size());
    pos_ = 0;
    mode_ = Mode::kKey;
    return step_key(b);
  };
  switch (f.phase) {
    case Phase::kObjFirst:
      if (b == '}') return n.required == 0 && n.min_props == 0 && close();
      return b == '"' && n.max_props > 0 && start_key();
    case Phase::kObjKey:
      return b == '"' && start_key();
    case Phase::kColon:
      if (b != ':') return false;
      value_node_ = f.child;
      mode_ = Mode::kValue;
      return true;
    case Phase::kObjAfter:
      if (b == '}') return (n.required & ~f.seen) == 0 && f.count >= n.min_props && close();
      if (b != ',' || f.count >= n.max_props) return false;
      if (!f.map && uint32_t(__builtin_popcountll(f.seen)) >= n.keys.size()) return false;
      f.phase = Phase::kObjKey;
      return true;
    case Phase::kArrFirst: {
      if (b == ']') return n.min_items == 0 && close();
      if (n.max_items == 0) return false;
      const int32_t item = item_node(f);
      if (item < 0) return false;
      f.phase = Phase::kArrItem;
      return begin_value(item, b);
    }
    case Phase::kArrItem:
      return false;  // not reached: the item's value is read in another mode
    case Phase::kArrAfter: {
      if (b == ']') return f.count >= n.min_items && close();
      if (b != ',' || f.count >= n.max_items) return false;
      const int32_t item = item_node(f);
      if (item < 0) return false;
      f.phase = Phase::kArrItem;
      value_node_ = item;
      mode_ = Mode::kValue;
      return true;
    }
  }
  return false;
}

bool SchemaConstraint::step(uint8_t b) {
  switch (mode_) {
    case Mode::kValue:
      if (is_json_ws(b)) return whitespace(b);
      ws_run_ = 0;
      return begin_value(value_node_, b);
    case Mode::kLex:
      if (leaf_number_) {
        const bool number_byte = is_ascii_digit(b) || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E';
        if (!number_byte) {  // the number ends before this byte
          if (!lex_.complete() || !number_in_bounds() || !end_value()) return false;
          return step(b);
        }
        if (leaf_integer_ && (b == '.' || b == 'e' || b == 'E')) return false;
        if (!lex_.step(b)) return false;
        return !leaf_bounded_ || bounded_number_byte(b);
      }
      return step_lex(b);
    case Mode::kLiteral: {
      const std::string& first = schema_->nodes[size_t(leaf_node_)].literals[lo_];
      if (first.size() == pos_ && schema_detail::is_number_spelling(first)) {
        // A whole number literal; a byte that extends no candidate ends it.
        SchemaConstraint probe = borrowed_copy();
        if (probe.step_literal(b)) return step_literal(b);
        if (!end_value()) return false;
        return step(b);
      }
      return step_literal(b);
    }
    case Mode::kKey:
      return step_key(b);
    case Mode::kFrame:
      return step_frame(b);
    case Mode::kDone:
      return whitespace(b);
  }
  return false;
}

}  // namespace brisk
