// JSON Schema constrained decoding (response_format json_schema): a byte-level recognizer
// that accepts exactly the prefixes of JSON texts that conform to a compiled schema, for
// TokenMask (json_constraint.h) to turn into allowed-token masks.
//
// Enforced subset (everything the recognizer lets through validates against the schema):
//   type (one or a list; integer excludes fractions and exponents), enum, const, nullable,
//   properties + required + additionalProperties (absent or false: only the listed
//   properties, each at most once, in any order; a schema or true with no properties: a map
//   whose values follow it), items, prefixItems (and draft-4 tuple `items`), minItems,
//   maxItems, minLength, maxLength (code points), anyOf / oneOf (the first alternative whose
//   type admits the value's first byte; alternatives that are plain type sets are merged; for
//   oneOf a value that also fits a later alternative is not excluded),
//   allOf of one schema, $ref to "#" or a JSON pointer into the same document ($defs,
//   definitions), boolean schemas.
// Accepted but not enforced (annotations or value checks the grammar does not express):
//   pattern, format, minimum / maximum / exclusive bounds, multipleOf, uniqueItems,
//   minProperties / maxProperties, propertyNames, dependencies, not, if / then / else.
// Keys and enum / const values are matched in their compact JSON spelling (nlohmann's
// dump()); whitespace between tokens is free up to a run limit.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/json_constraint.h"
#include "runtime/schema_bounds.h"

namespace brisk {

struct CompiledSchema;

// Compiles a JSON Schema; throws brisk::Error naming the offending keyword for schemas that are
// malformed, unsatisfiable for the recognizer (false, empty enum, minItems > maxItems, a required
// property that cannot be written) or larger than the limits (64 properties per object, 4096
// nodes, 16384 enum / const values).
std::shared_ptr<const CompiledSchema> compile_json_schema(const nlohmann::json& schema);
// A subschema of `root` (e.g. one property's), its $refs resolved against `root`.
std::shared_ptr<const CompiledSchema> compile_json_schema(const nlohmann::json& root, const nlohmann::json& sub);
// Whether every conforming value is a JSON object (a tool's parameters schema should be).
bool json_schema_requires_object(const CompiledSchema& schema);
// Whether a string can conform.
bool json_schema_admits_string(const CompiledSchema& schema);
// Whether a conforming JSON text can start with `byte`.
bool json_schema_admits_first_byte(const CompiledSchema& schema, uint8_t byte);
// Whether the numbers that conform are integers only (no fraction or exponent is written).
bool json_schema_integer_only(const CompiledSchema& schema);
// When the schema is an enum / const of strings only: those strings (decoded), sorted.
std::optional<std::vector<std::string>> json_schema_string_choices(const CompiledSchema& schema);

class SchemaConstraint {
 public:
  // max_whitespace_run > 0: at most that many whitespace bytes in a row outside strings.
  explicit SchemaConstraint(std::shared_ptr<const CompiledSchema> schema, int32_t max_whitespace_run = 4);
  // A recognizer that does not own `schema` (the caller keeps it alive).
  static SchemaConstraint unowned(const CompiledSchema* schema, int32_t max_whitespace_run);
  SchemaConstraint(const SchemaConstraint& o) : SchemaConstraint(o, Borrow{}) { owner_ = o.owner_; }
  SchemaConstraint& operator=(const SchemaConstraint& o);

  bool accepts(std::string_view piece) const;
  void advance(std::string_view piece);  // throws brisk::Error when !accepts(piece)
  bool complete() const;                 // a whole conforming value has been read
  // Inside a free string (no length limit, not a key or enum value) with nothing pending:
  // every plain string byte is accepted.
  bool in_plain_string() const;
  bool accepts_any_text() const { return false; }
  SchemaConstraint borrowed_copy() const;  // for TokenMask: shares the compiled schema unowned
  bool step(uint8_t byte);                 // one byte; on false the state is unusable

  static constexpr int kMaxDepth = 32;  // nested objects / arrays the schema tracks

 private:
  SchemaConstraint() = default;
  struct Borrow {};
  SchemaConstraint(const SchemaConstraint& o, Borrow);  // every field but owner_; live frames only
  friend class ToolCallConstraint;     // hold one, default-made, until a name picks the schema
  friend class XmlToolCallConstraint;
  enum class Mode : uint8_t { kValue, kLex, kLiteral, kKey, kFrame, kDone };
  enum class Phase : uint8_t { kObjFirst, kObjKey, kColon, kObjAfter, kArrFirst, kArrItem, kArrAfter };
  struct Frame {  // trivial: only frames_[0, depth_) are ever read, and copies copy those
    uint64_t seen;  // object: properties written (bit = sorted property index)
    int32_t node;   // the container's schema node
    int32_t child;  // object: the node of the value after the current key
    uint32_t count; // array: items written
    Phase phase;
    bool array;
    bool map;       // object whose keys are free strings (additionalProperties schema)
  };
  bool begin_value(int32_t node, uint8_t byte);
  bool begin_leaf(int32_t node, uint8_t byte, bool is_key);
  bool step_lex(uint8_t byte);
  bool step_literal(uint8_t byte);
  bool step_key(uint8_t byte);
  bool step_frame(uint8_t byte);
  bool end_value();  // the innermost value is complete
  bool bounded_number_byte(uint8_t byte);
  bool number_in_bounds() const;
  NumberPrefix number_prefix() const;
  bool whitespace(uint8_t byte);
  int32_t item_node(const Frame& f) const;

  std::shared_ptr<const CompiledSchema> owner_;  // null in borrowed copies
  const CompiledSchema* schema_ = nullptr;
  int32_t max_ws_ = 4;
  int32_t ws_run_ = 0;
  Mode mode_ = Mode::kValue;
  int32_t value_node_ = 0;  // kValue: the node of the value to come
  // kLex: a free leaf (string, number, literal, or an unconstrained subtree) read by `lex_`.
  JsonConstraint lex_;
  int32_t leaf_node_ = 0;
  bool leaf_is_key_ = false;     // the free key of a map object
  bool leaf_integer_ = false;    // number without fraction or exponent
  bool leaf_number_ = false;     // no closing byte: ends at the first byte that cannot continue it
  bool leaf_string_ = false;     // track code points for min / maxLength
  uint8_t esc_ = 0;              // string escape state: 0 none, 1 after '\', 2..5 hex digits left
  bool esc_high_ = false;        // the \u escape being read is a high surrogate
  int64_t str_len_ = 0;          // code points so far
  // A number with bounds (minimum / maximum ...): its digits so far, integer part first.
  struct NumberState {
    std::array<char, 40> digits;
    uint8_t int_len = 0, len = 0;
    bool neg = false, dot = false;
  };
  bool leaf_bounded_ = false;
  NumberState num_;
  // kLiteral (enum / const of leaf_node_) and kKey (property names of the top frame's node):
  // candidates [lo_, hi_) of the sorted spellings share the first pos_ bytes.
  uint32_t lo_ = 0, hi_ = 0, pos_ = 0;
  int32_t depth_ = 0;
  std::array<Frame, kMaxDepth> frames_;
};

}  // namespace brisk
