// JSON Schema compiler and recognizer (see schema_constraint.h).
#include "runtime/schema_constraint.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/constraint_steps.h"

namespace brisk {

namespace {

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
uint8_t type_of_first_byte(uint8_t b) {
  switch (b) {
    case '{': return kObject;
    case '[': return kArray;
    case '"': return kString;
    case 't': case 'f': return kBoolean;
    case 'n': return kNull;
    default: return (b == '-' || is_ascii_digit(b)) ? uint8_t(kNumber | kInteger) : 0;
  }
}

bool is_number_spelling(const std::string& s) { return !s.empty() && (s[0] == '-' || is_ascii_digit(uint8_t(s[0]))); }

}  // namespace

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
  // Arrays.
  std::vector<int32_t> prefix_items;
  int32_t items = kAnyNode;  // node of items after the prefix; -1: none
  uint32_t min_items = 0, max_items = UINT32_MAX;
  bool any_array = true;
  // Strings (code points); max_length < 0: unbounded.
  int64_t min_length = 0, max_length = -1;
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
    for (int depth = 0; depth <= kMaxResolveDepth; ++depth) {
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

// ---------------------------------------------------------------------------------------------
// Compiler

namespace {

using json = nlohmann::json;

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) { nodes_.emplace_back(); }  // node 0: any

  std::shared_ptr<const CompiledSchema> run() { return run(root_); }
  std::shared_ptr<const CompiledSchema> run(const json& top) {
    auto out = std::make_shared<CompiledSchema>();
    out->root = compile(top, 0, "schema");
    out->nodes = std::move(nodes_);
    out->compute_first_bytes();
    return out;
  }

 private:
  [[noreturn]] static void bad(const std::string& where, const std::string& what) {
    fail("json schema: ", where, ": ", what);
  }

  int32_t add(SchemaNode n) {
    if (nodes_.size() >= kMaxNodes) bad("schema", "more than 4096 subschemas");
    nodes_.push_back(std::move(n));
    return int32_t(nodes_.size() - 1);
  }

  static uint32_t count_field(const json& s, const char* key, const std::string& where) {
    const json& v = s.at(key);
    if (v.is_number_unsigned()) return uint32_t(std::min<uint64_t>(v.get<uint64_t>(), UINT32_MAX - 1));
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint32_t(std::min<int64_t>(v.get<int64_t>(), UINT32_MAX - 1));
    if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() < 4e9 && v.get<double>() == double(int64_t(v.get<double>())))
      return uint32_t(v.get<double>());
    bad(where + "." + key, "must be a non-negative integer");
  }

  static uint8_t type_bit(const json& t, const std::string& where) {
    if (!t.is_string()) bad(where + ".type", "must be a string or an array of strings");
    const std::string& s = t.get_ref<const std::string&>();
    if (s == "object") return kObject;
    if (s == "array") return kArray;
    if (s == "string") return kString;
    if (s == "number") return kNumber;
    if (s == "integer") return kInteger;
    if (s == "boolean") return kBoolean;
    if (s == "null") return kNull;
    bad(where + ".type", "unknown type '" + s + "'");
  }

  int32_t compile_ref(const std::string& ref, int depth, const std::string& where) {
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref != "#" && ref.rfind("#/", 0) != 0)
      bad(where + ".$ref", "only references into the same document ('#' or '#/...') are supported, got '" + ref + "'");
    const json* target = &root_;
    if (ref != "#") {
      try {
        target = &root_.at(json::json_pointer(ref.substr(1)));
      } catch (const json::exception&) {
        bad(where + ".$ref", "'" + ref + "' does not resolve");
      }
    }
    // Reserve the node first so that recursive references find it.
    SchemaNode link;
    link.kind = SchemaNode::Kind::kUnion;
    const int32_t id = add(std::move(link));
    refs_[ref] = id;
    const int32_t t = compile(*target, depth + 1, ref);
    nodes_[size_t(id)].alternatives = {t};
    return id;
  }

  int32_t compile(const json& s, int depth, const std::string& where) {
    if (depth > kMaxCompileDepth) bad(where, "nested more than 64 levels");
    if (s.is_boolean()) {
      if (s.get<bool>()) return kAnyNode;
      bad(where, "the schema 'false' admits no value");
    }
    if (!s.is_object()) bad(where, "a schema must be an object or a boolean");
    if (auto it = s.find("$ref"); it != s.end()) {
      if (!it->is_string()) bad(where + ".$ref", "must be a string");
      return compile_ref(it->get<std::string>(), depth, where);
    }
    if (auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->empty()) bad(where + ".allOf", "must be a non-empty array");
      if (it->size() > 1) bad(where + ".allOf", "more than one schema is not supported");
      return compile((*it)[0], depth + 1, where + ".allOf[0]");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto it = s.find(key); it != s.end()) {
        if (!it->is_array() || it->empty()) bad(where + "." + key, "must be a non-empty array");
        return compile_union(*it, depth, where + "." + key, std::string_view(key) == "oneOf");
      }
    }
    if (s.contains("enum") || s.contains("const")) return compile_literals(s, where);

    uint8_t types = 0;
    if (auto it = s.find("type"); it != s.end()) {
      if (it->is_array()) {
        if (it->empty()) bad(where + ".type", "must not be empty");
        for (const json& t : *it) types |= type_bit(t, where);
      } else {
        types = type_bit(*it, where);
      }
    } else {
      for (const char* k : {"properties", "additionalProperties", "required"})
        if (s.contains(k)) types |= kObject;
      for (const char* k : {"items", "prefixItems", "minItems", "maxItems"})
        if (s.contains(k)) types |= kArray;
      for (const char* k : {"minLength", "maxLength"})
        if (s.contains(k)) types |= kString;
      if (types == 0) return kAnyNode;  // annotations only
    }
    if (auto it = s.find("nullable"); it != s.end() && it->is_boolean() && it->get<bool>()) types |= kNull;

    SchemaNode n;
    n.kind = SchemaNode::Kind::kTyped;
    n.types = types;
    if (types & kObject) compile_object(s, n, depth, where);
    if (types & kArray) compile_array(s, n, depth, where);
    if (types & kString) {
      if (s.contains("minLength")) n.min_length = count_field(s, "minLength", where);
      if (s.contains("maxLength")) n.max_length = count_field(s, "maxLength", where);
      if (n.max_length >= 0 && n.min_length > n.max_length) bad(where, "minLength is above maxLength");
    }
    return add(std::move(n));
  }

  void compile_object(const json& s, SchemaNode& n, int depth, const std::string& where) {
    std::vector<std::pair<std::string, int32_t>> props;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) bad(where + ".properties", "must be an object");
      if (it->size() > kMaxProperties) bad(where + ".properties", "more than 64 properties");
      for (auto p = it->begin(); p != it->end(); ++p) {
        props.emplace_back(json(p.key()).dump(), compile(p.value(), depth + 1, where + ".properties." + p.key()));
      }
    }
    std::sort(props.begin(), props.end());
    for (auto& [k, node] : props) {
      n.keys.push_back(k);
      n.key_nodes.push_back(node);
    }
    const json* add_props = nullptr;
    if (auto it = s.find("additionalProperties"); it != s.end()) add_props = &*it;
    const bool additional_allowed = !add_props || !add_props->is_boolean() || add_props->get<bool>();
    if (n.keys.empty() && additional_allowed) {
      if (add_props && add_props->is_object() && !add_props->empty()) {
        n.any_object = false;
        n.additional = compile(*add_props, depth + 1, where + ".additionalProperties");
      }
    } else {
      n.any_object = false;  // only the listed properties (none when additionalProperties is false)
    }
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) bad(where + ".required", "must be an array of strings");
      for (const json& r : *it) {
        if (!r.is_string()) bad(where + ".required", "must be an array of strings");
        const std::string spelled = r.dump();
        const auto k = std::find(n.keys.begin(), n.keys.end(), spelled);
        if (k == n.keys.end()) {
          if (n.any_object || n.additional >= 0)
            bad(where + ".required", "required properties must be listed in properties");
          bad(where + ".required", "property " + spelled + " is required but not in properties");
        }
        n.required |= uint64_t{1} << (k - n.keys.begin());
      }
    }
  }

  void compile_array(const json& s, SchemaNode& n, int depth, const std::string& where) {
    const json* prefix = nullptr;
    if (auto it = s.find("prefixItems"); it != s.end()) prefix = &*it;
    auto items = s.find("items");
    if (!prefix && items != s.end() && items->is_array()) prefix = &*items;  // draft-4 tuple
    if (prefix) {
      if (!prefix->is_array()) bad(where + ".prefixItems", "must be an array");
      for (size_t i = 0; i < prefix->size(); ++i)
        n.prefix_items.push_back(compile((*prefix)[i], depth + 1, where + ".prefixItems[" + std::to_string(i) + "]"));
    }
    if (items != s.end() && !items->is_array()) {
      if (items->is_boolean() && !items->get<bool>()) n.items = -1;
      else n.items = compile(*items, depth + 1, where + ".items");
    } else if (items != s.end() && items->is_array()) {
      if (auto ai = s.find("additionalItems"); ai != s.end()) {
        if (ai->is_boolean() && !ai->get<bool>()) n.items = -1;
        else n.items = compile(*ai, depth + 1, where + ".additionalItems");
      }
    }
    if (s.contains("minItems")) n.min_items = count_field(s, "minItems", where);
    if (s.contains("maxItems")) n.max_items = count_field(s, "maxItems", where);
    if (n.min_items > n.max_items) bad(where, "minItems is above maxItems");
    if (n.items < 0 && n.min_items > n.prefix_items.size())
      bad(where, "minItems is above the number of items allowed");
    n.any_array = n.prefix_items.empty() && n.items == kAnyNode && n.min_items == 0 && n.max_items == UINT32_MAX;
  }

  int32_t compile_literals(const json& s, const std::string& where) {
    SchemaNode n;
    n.kind = SchemaNode::Kind::kLiteral;
    if (auto it = s.find("const"); it != s.end()) {
      n.literals.push_back(it->dump());
    } else {
      const json& e = s.at("enum");
      if (!e.is_array() || e.empty()) bad(where + ".enum", "must be a non-empty array");
      if (e.size() > kMaxLiterals) bad(where + ".enum", "more than 16384 values");
      for (const json& v : e) n.literals.push_back(v.dump());
    }
    literal_count_ += n.literals.size();
    if (literal_count_ > kMaxLiterals) bad(where, "more than 16384 enum / const values in the schema");
    std::sort(n.literals.begin(), n.literals.end());
    n.literals.erase(std::unique(n.literals.begin(), n.literals.end()), n.literals.end());
    return add(std::move(n));
  }

  int32_t compile_union(const json& alts, int depth, const std::string& where, bool one_of) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < alts.size(); ++i)
      ids.push_back(compile(alts[i], depth + 1, where + "[" + std::to_string(i) + "]"));
    // Plain type sets (no constraint beyond the type) merge into one node: anyOf [integer,
    // number] then admits 1.5 whichever comes first.
    const auto plain = [&](int32_t id) {
      const SchemaNode& a = nodes_[size_t(id)];
      return a.kind == SchemaNode::Kind::kTyped && a.any_object && a.additional < 0 && a.any_array &&
             a.min_length == 0 && a.max_length < 0;
    };
    // For oneOf only types no two alternatives share (integer counts as a number), so that a
    // value still matches exactly one.
    uint8_t seen = 0;
    bool disjoint = true;
    for (int32_t id : ids) {
      uint8_t t = nodes_[size_t(id)].types;
      if (t & (kNumber | kInteger)) t |= kNumber | kInteger;
      disjoint = disjoint && (seen & t) == 0;
      seen |= t;
    }
    if (std::all_of(ids.begin(), ids.end(), plain) && (!one_of || disjoint)) {
      SchemaNode merged;
      merged.kind = SchemaNode::Kind::kTyped;
      for (int32_t id : ids) merged.types |= nodes_[size_t(id)].types;
      return add(std::move(merged));
    }
    if (std::find(ids.begin(), ids.end(), kAnyNode) != ids.end()) return kAnyNode;
    SchemaNode u;
    u.kind = SchemaNode::Kind::kUnion;
    u.alternatives = std::move(ids);
    return add(std::move(u));
  }

  const json& root_;
  std::vector<SchemaNode> nodes_;
  std::map<std::string, int32_t> refs_;
  size_t literal_count_ = 0;
};

}  // namespace

std::shared_ptr<const CompiledSchema> compile_json_schema(const nlohmann::json& schema) {
  return SchemaCompiler(schema).run();
}

std::shared_ptr<const CompiledSchema> compile_json_schema(const nlohmann::json& root, const nlohmann::json& sub) {
  return SchemaCompiler(root).run(sub);
}

bool json_schema_admits_string(const CompiledSchema& schema) { return schema.admits(schema.root, '"'); }

bool json_schema_admits_first_byte(const CompiledSchema& schema, uint8_t byte) {
  return schema.admits(schema.root, byte);
}

bool json_schema_integer_only(const CompiledSchema& schema) {
  const int32_t n = schema.resolve(schema.root, '1');
  if (n < 0) return false;
  const SchemaNode& s = schema.nodes[size_t(n)];
  return s.kind == SchemaNode::Kind::kTyped && (s.types & kInteger) && !(s.types & kNumber);
}

std::optional<std::vector<std::string>> json_schema_string_choices(const CompiledSchema& schema) {
  int32_t n = schema.root;
  for (int i = 0; i <= kMaxResolveDepth; ++i) {
    const SchemaNode& s = schema.nodes[size_t(n)];
    if (s.kind == SchemaNode::Kind::kLiteral) {
      std::vector<std::string> out;
      for (const std::string& l : s.literals) {
        if (l[0] != '"') return std::nullopt;
        out.push_back(nlohmann::json::parse(l).get<std::string>());
      }
      std::sort(out.begin(), out.end());
      return out;
    }
    if (s.kind != SchemaNode::Kind::kUnion || s.alternatives.size() != 1) return std::nullopt;
    n = s.alternatives[0];
  }
  return std::nullopt;
}

bool json_schema_requires_object(const CompiledSchema& schema) {
  int32_t n = schema.root;
  for (int i = 0; i <= kMaxResolveDepth; ++i) {
    const SchemaNode& s = schema.nodes[size_t(n)];
    if (s.kind == SchemaNode::Kind::kTyped) return s.types == kObject;
    if (s.kind != SchemaNode::Kind::kUnion || s.alternatives.size() != 1) return false;
    n = s.alternatives[0];  // a $ref
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Recognizer

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
  if (mode_ == Mode::kLex) return leaf_number_ && lex_.complete();
  if (mode_ == Mode::kLiteral) {
    const std::string& l = schema_->nodes[size_t(leaf_node_)].literals[lo_];
    return l.size() == pos_ && is_number_spelling(l);
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
  if (f.array) {
    ++f.count;
    f.phase = Phase::kArrAfter;
  } else {
    f.phase = Phase::kObjAfter;
  }
  mode_ = Mode::kFrame;
  return true;
}

bool SchemaConstraint::begin_leaf(int32_t node, uint8_t b, bool is_key) {
  lex_ = JsonConstraint({.require_object = false, .max_depth = 64, .max_whitespace_run = max_ws_, .finite_numbers = true});
  const SchemaNode& n = schema_->nodes[size_t(node)];
  leaf_node_ = node;
  leaf_is_key_ = is_key;
  leaf_number_ = b == '-' || is_ascii_digit(b);
  leaf_integer_ = leaf_number_ && n.kind == SchemaNode::Kind::kTyped && (n.types & kInteger) && !(n.types & kNumber);
  leaf_string_ = b == '"' && !is_key && n.kind == SchemaNode::Kind::kTyped && (n.min_length > 0 || n.max_length >= 0);
  esc_ = 0;
  esc_high_ = false;
  str_len_ = 0;
  if (!lex_.step(b)) return false;
  mode_ = Mode::kLex;
  return true;
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
  if (lits[lo_].size() == pos_ && !is_number_spelling(lits[lo_])) return end_value();
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
    if (f.map) return begin_leaf(kAnyNode, b, true);
    lo_ = 0;
    hi_ = uint32_t(n.keys.size());
    pos_ = 0;
    mode_ = Mode::kKey;
    return step_key(b);
  };
  switch (f.phase) {
    case Phase::kObjFirst:
      if (b == '}') return n.required == 0 && close();
      return b == '"' && start_key();
    case Phase::kObjKey:
      return b == '"' && start_key();
    case Phase::kColon:
      if (b != ':') return false;
      value_node_ = f.child;
      mode_ = Mode::kValue;
      return true;
    case Phase::kObjAfter:
      if (b == '}') return (n.required & ~f.seen) == 0 && close();
      if (b != ',') return false;
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
          if (!lex_.complete() || !end_value()) return false;
          return step(b);
        }
        if (leaf_integer_ && (b == '.' || b == 'e' || b == 'E')) return false;
        return lex_.step(b);
      }
      return step_lex(b);
    case Mode::kLiteral: {
      const std::string& first = schema_->nodes[size_t(leaf_node_)].literals[lo_];
      if (first.size() == pos_ && is_number_spelling(first)) {
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
