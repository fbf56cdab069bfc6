// The compiled form of a JSON Schema, shared by its compiler (schema_compile.cpp) and its
// recognizer (schema_constraint.cpp): a table of nodes, each a free value, a typed value with
// its constraints, a set of literal spellings or a union of alternatives.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/constraint_steps.h"
#include "runtime/schema_bounds.h"

namespace brisk {

namespace schema_detail {

enum TypeBit : uint8_t {
  kObject = 1, kArray = 2, kString = 4, kNumber = 8, kInteger = 16, kBoolean = 32, kNull = 64,
};
constexpr int32_t kAnyNode = 0;
constexpr size_t kMaxNodes = 4096;
constexpr size_t kMaxLiterals = 16384;
constexpr size_t kMaxProperties = 64;
constexpr int kMaxCompileDepth = 64;
constexpr int kMaxResolveDepth = 256;  // unions and $ref links in a row (compile nesting is at most 64)


// The type a value starting with `b` has (number covers integer); 0: no value starts so.
inline uint8_t type_of_first_byte(uint8_t b) {
  switch (b) {
    case '{': return kObject;
    case '[': return kArray;
    case '"': return kString;
    case 't': case 'f': return kBoolean;
    case 'n': return kNull;
    default: return (b == '-' || is_ascii_digit(b)) ? uint8_t(kNumber | kInteger) : 0;
  }
}

inline bool is_number_spelling(const std::string& s) {
  return !s.empty() && (s[0] == '-' || is_ascii_digit(uint8_t(s[0])));
}

}  // namespace schema_detail

struct SchemaNode {
  enum class Kind : uint8_t { kAny, kTyped, kLiteral, kUnion };
  Kind kind = Kind::kAny;
  uint8_t types = 0;  // kTyped: TypeBit set
  // Objects. keys: property names in JSON spelling ("\"name\""), sorted; key_nodes parallel.
  std::vector<std::string> keys;
  std::vector<int32_t> key_nodes;
  uint64_t required = 0;     // bit i: keys[i] is required
  int32_t additional = -1;   // >= 0: free keys (no properties) whose values follow this node
  bool any_object = true;    // no properties and additional properties allowed: free object
  bool closed = false;       // additionalProperties false: no key beyond `keys` is valid
  // Arrays.
  std::vector<int32_t> prefix_items;
  int32_t items = schema_detail::kAnyNode;  // node of items after the prefix; -1: none
  uint32_t min_items = 0, max_items = UINT32_MAX;
  bool any_array = true;
  uint32_t min_props = 0, max_props = UINT32_MAX;  // members written
  // Strings (code points); max_length < 0: unbounded.
  int64_t min_length = 0, max_length = -1;
  // Numbers: minimum / maximum / exclusive bounds (decided digit by digit, schema_bounds.h).
  NumberBounds bounds;
  // kLiteral: compact spellings, sorted.
  std::vector<std::string> literals;
  // kUnion: alternatives in the schema's order.
  std::vector<int32_t> alternatives;
};

struct CompiledSchema {
  using ByteSet = std::array<uint64_t, 4>;
  std::vector<SchemaNode> nodes;  // nodes[0]: any value
  std::vector<ByteSet> first;     // [nodes]: the bytes a conforming value can start with
  int32_t root = 0;

  // Whether a value starting with `b` can conform to node n.
  bool admits(int32_t n, uint8_t b) const { return (first[size_t(n)][b >> 6] >> (b & 63)) & 1; }

  // first[] as a fixpoint: unions (possibly cyclic through $ref) take their alternatives' bytes.
  void compute_first_bytes() {
    first.assign(nodes.size(), ByteSet{});
    const auto add = [](ByteSet& s, uint8_t b) { s[b >> 6] |= uint64_t{1} << (b & 63); };
    for (size_t i = 0; i < nodes.size(); ++i) {
      const SchemaNode& s = nodes[i];
      if (s.kind == SchemaNode::Kind::kLiteral) {
        for (const std::string& l : s.literals) add(first[i], uint8_t(l[0]));
      } else if (s.kind != SchemaNode::Kind::kUnion) {
        using namespace schema_detail;
        const uint8_t types = s.kind == SchemaNode::Kind::kAny ? uint8_t(127) : s.types;
        for (int b = 0; b < 256; ++b)
          if (types & type_of_first_byte(uint8_t(b))) add(first[i], uint8_t(b));
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i].kind != SchemaNode::Kind::kUnion) continue;
        for (int32_t a : nodes[i].alternatives) {
          for (int w = 0; w < 4; ++w) {
            const uint64_t merged = first[i][size_t(w)] | first[size_t(a)][size_t(w)];
            changed = changed || merged != first[i][size_t(w)];
            first[i][size_t(w)] = merged;
          }
        }
      }
    }
  }
  // The non-union node a value starting with `b` follows: the first admitting alternative.
  int32_t resolve(int32_t n, uint8_t b) const {
    for (int depth = 0; depth <= schema_detail::kMaxResolveDepth; ++depth) {
      const SchemaNode& s = nodes[size_t(n)];
      if (s.kind != SchemaNode::Kind::kUnion) return admits(n, b) ? n : -1;
      if (!admits(n, b)) return -1;
      int32_t next = -1;
      for (int32_t a : s.alternatives) {
        if (admits(a, b)) {
          next = a;
          break;
        }
      }
      if (next < 0) return -1;
      n = next;
    }
    return -1;
  }
};

}  // namespace brisk
