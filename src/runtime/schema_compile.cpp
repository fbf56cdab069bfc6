// JSON Schema compiler (see schema_constraint.h): a schema becomes a table of SchemaNodes,
// or an error naming the keyword and its place (a JSON pointer into the schema) when the
// schema is malformed, cannot be satisfied, or asks for something the recognizer does not
// enforce. Every keyword is one of: enforced, an annotation (no effect on validity), or
// refused; nothing is accepted and then ignored.
#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/schema_constraint.h"
#include "runtime/schema_nodes.h"

namespace brisk {

namespace {

using json = nlohmann::json;
constexpr size_t kMaxNodes = 4096;
constexpr size_t kMaxLiterals = 16384;
constexpr size_t kMaxProperties = 64;
constexpr int kMaxCompileDepth = 64;

// Keywords without assertion semantics (JSON Schema 2020-12 annotations, OpenAPI extras).
// `format` is an annotation in 2020-12 (its format-annotation vocabulary): strings are not
// checked against it. Keywords not listed anywhere are unknown, which JSON Schema ignores.
bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "$schema", "$id", "$anchor", "$dynamicAnchor", "$comment", "$defs", "definitions", "$vocabulary",
      "title", "description", "default", "examples", "example", "deprecated", "readOnly", "writeOnly",
      "contentEncoding", "contentMediaType", "contentSchema", "format", "discriminator", "strict", "xml",
      "externalDocs", "then", "else"};  // then / else without if have no effect
  return kAnnotations.count(k) || k.rfind("x-", 0) == 0;
}

// Keywords the recognizer cannot decide byte by byte (or does not yet): refused.
const char* refusal_reason(const std::string& k, const json& v) {
  if (k == "not") return "'not' is not enforced: the recognizer cannot exclude what a subschema admits";
  if (k == "if") return "'if' / 'then' / 'else' are not enforced: a condition on the whole value cannot be decided while it is written";
  if (k == "patternProperties" && !(v.is_object() && v.empty())) return "'patternProperties' is not enforced (regular expressions are not supported)";
  if (k == "pattern") return "'pattern' is not enforced (regular expressions are not supported)";
  if (k == "propertyNames" && !(v == true || (v.is_object() && v.empty()))) return "'propertyNames' is not enforced";
  if ((k == "dependentRequired" || k == "dependentSchemas" || k == "dependencies") && !(v.is_object() && v.empty()))
    return "dependencies between properties are not enforced";
  if (k == "contains" || k == "minContains" || k == "maxContains") return "'contains' is not enforced";
  if (k == "multipleOf" && !(v.is_number() && v == 1)) return "'multipleOf' is not enforced";
  if (k == "uniqueItems" && v == true) return "'uniqueItems' is not enforced";
  if (k == "unevaluatedProperties" && v != false && v != true) return "'unevaluatedProperties' with a schema is not enforced";
  if (k == "unevaluatedItems" && v != false && v != true) return "'unevaluatedItems' with a schema is not enforced";
  if (k == "$dynamicRef" || k == "$recursiveRef" || k == "$recursiveAnchor") return "dynamic references are not supported";
  return nullptr;
}

// Keywords that constrain a value on their own (what may not sit next to $ref, allOf, anyOf,
// oneOf, which are compiled as a whole).
bool is_assertion(const std::string& k) {
  static const std::set<std::string> kAssertions = {
      "type", "enum", "const", "nullable", "properties", "required", "additionalProperties", "items",
      "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "minimum",
      "maximum", "exclusiveMinimum", "exclusiveMaximum", "minProperties", "maxProperties",
      "unevaluatedProperties", "unevaluatedItems", "uniqueItems", "multipleOf", "$ref", "allOf", "anyOf", "oneOf"};
  return kAssertions.count(k) != 0;
}

std::string pointer_escape(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) { nodes_.emplace_back(); }  // node 0: any

  std::shared_ptr<const CompiledSchema> run() { return run(root_, "#"); }
  std::shared_ptr<const CompiledSchema> run(const json& top, const std::string& where) {
    auto out = std::make_shared<CompiledSchema>();
    out->root = compile(top, 0, where);
    out->nodes = std::move(nodes_);
    out->compute_first_bytes();
    for (const auto& [node, at] : one_ofs_) check_one_of(*out, node, at);
    return out;
  }

 private:
  [[noreturn]] static void bad(const std::string& where, const std::string& what) {
    fail("json schema: at ", where, ": ", what);
  }

  int32_t add(SchemaNode n) {
    if (nodes_.size() >= kMaxNodes) bad("#", "more than 4096 subschemas");
    nodes_.push_back(std::move(n));
    return int32_t(nodes_.size() - 1);
  }

  static uint32_t count_field(const json& s, const char* key, const std::string& where) {
    const json& v = s.at(key);
    if (v.is_number_unsigned()) return uint32_t(std::min<uint64_t>(v.get<uint64_t>(), UINT32_MAX - 1));
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint32_t(std::min<int64_t>(v.get<int64_t>(), UINT32_MAX - 1));
    if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() < 4e9 && v.get<double>() == double(int64_t(v.get<double>())))
      return uint32_t(v.get<double>());
    bad(where, str_cat("'", key, "' must be a non-negative integer"));
  }

  static uint8_t type_bit(const json& t, const std::string& where) {
    if (!t.is_string()) bad(where, "'type' must be a string or an array of strings");
    const std::string& s = t.get_ref<const std::string&>();
    if (s == "object") return schema_detail::kObject;
    if (s == "array") return schema_detail::kArray;
    if (s == "string") return schema_detail::kString;
    if (s == "number") return schema_detail::kNumber;
    if (s == "integer") return schema_detail::kInteger;
    if (s == "boolean") return schema_detail::kBoolean;
    if (s == "null") return schema_detail::kNull;
    bad(where, "'type': unknown type '" + s + "'");
  }

  // Refuses keywords that are not enforced, and assertions next to a keyword compiled as a whole.
  static void check_keywords(const json& s, const std::string& where, const char* whole) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (const char* why = refusal_reason(k, it.value())) bad(where, why);
      if (whole && k != whole && is_assertion(k) && !(k == "nullable" && it.value() == false))
        bad(where, str_cat("'", k, "' next to '", whole, "' is not enforced; move it into the subschema"));
    }
  }

  int32_t compile_ref(const std::string& ref, int depth, const std::string& where) {
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref != "#" && ref.rfind("#/", 0) != 0)
      bad(where, "'$ref': only references into the same document ('#' or '#/...') are supported, got '" + ref + "'");
    const json* target = &root_;
    if (ref != "#") {
      try {
        target = &root_.at(json::json_pointer(ref.substr(1)));
      } catch (const json::exception&) {
        bad(where, "'$ref': '" + ref + "' does not resolve");
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
      if (s.get<bool>()) return schema_detail::kAnyNode;
      bad(where, "the schema 'false' admits no value");
    }
    if (!s.is_object()) bad(where, "a schema must be an object or a boolean");
    if (auto it = s.find("$ref"); it != s.end()) {
      check_keywords(s, where, "$ref");
      if (!it->is_string()) bad(where, "'$ref' must be a string");
      return compile_ref(it->get<std::string>(), depth, where);
    }
    if (auto it = s.find("allOf"); it != s.end()) {
      check_keywords(s, where, "allOf");
      if (!it->is_array() || it->empty()) bad(where, "'allOf' must be a non-empty array");
      if (it->size() > 1) bad(where, "'allOf' of more than one schema is not supported");
      return compile((*it)[0], depth + 1, where + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto it = s.find(key); it != s.end()) {
        check_keywords(s, where, key);
        if (!it->is_array() || it->empty()) bad(where, str_cat("'", key, "' must be a non-empty array"));
        return compile_union(*it, depth, where + "/" + key, std::string_view(key) == "oneOf");
      }
    }
    check_keywords(s, where, nullptr);
    if (s.contains("enum") || s.contains("const")) return compile_literals(s, where);

    uint8_t types = 0;
    if (auto it = s.find("type"); it != s.end()) {
      if (it->is_array()) {
        if (it->empty()) bad(where, "'type' must not be empty");
        for (const json& t : *it) types |= type_bit(t, where);
      } else {
        types = type_bit(*it, where);
      }
    } else {
      for (const char* k : {"properties", "additionalProperties", "required", "minProperties", "maxProperties",
                            "unevaluatedProperties"})
        if (s.contains(k)) types |= schema_detail::kObject;
      for (const char* k : {"items", "prefixItems", "minItems", "maxItems", "unevaluatedItems"})
        if (s.contains(k)) types |= schema_detail::kArray;
      for (const char* k : {"minLength", "maxLength"})
        if (s.contains(k)) types |= schema_detail::kString;
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k)) types |= schema_detail::kNumber;
      // Without `type`, the value is written as the type its keywords are about (a narrower
      // choice than the schema allows, never a wider one).
      if (types == 0) return schema_detail::kAnyNode;  // annotations only
    }
    if (auto it = s.find("nullable"); it != s.end()) {
      if (!it->is_boolean()) bad(where, "'nullable' must be a boolean");
      if (it->get<bool>()) types |= schema_detail::kNull;
    }

    SchemaNode n;
    n.kind = SchemaNode::Kind::kTyped;
    n.types = types;
    if (types & schema_detail::kObject) compile_object(s, n, depth, where);
    if (types & schema_detail::kArray) compile_array(s, n, depth, where);
    if (types & schema_detail::kString) {
      if (s.contains("minLength")) n.min_length = count_field(s, "minLength", where);
      if (s.contains("maxLength")) n.max_length = count_field(s, "maxLength", where);
      if (n.max_length >= 0 && n.min_length > n.max_length) bad(where, "'minLength' is above 'maxLength'");
    }
    if (types & (schema_detail::kNumber | schema_detail::kInteger)) compile_bounds(s, n, where);
    return add(std::move(n));
  }

  void compile_bounds(const json& s, SchemaNode& n, const std::string& where) {
    NumberBounds& b = n.bounds;
    b.integer = (n.types & schema_detail::kInteger) && !(n.types & schema_detail::kNumber);
    const auto bound = [&](const char* key) -> std::optional<Decimal> {
      auto it = s.find(key);
      if (it == s.end()) return std::nullopt;
      if (!it->is_number()) bad(where, str_cat("'", key, "' must be a number"));
      try {
        return decimal_from_json(*it);
      } catch (const Error&) {
        bad(where, str_cat("'", key, "' must be a finite number"));
      }
    };
    // Draft 4 spells exclusive bounds as booleans next to minimum / maximum.
    const auto flag = [&](const char* key) {
      auto it = s.find(key);
      return it != s.end() && it->is_boolean() && it->get<bool>();
    };
    const auto tighter = [](bool lower, bool& has, Decimal& cur, bool& cur_excl, const Decimal& v, bool excl) {
      const int c = has ? decimal_compare(v, cur) : (lower ? 1 : -1);
      if (!has || (lower ? c > 0 : c < 0) || (c == 0 && excl)) {
        cur = v;
        cur_excl = excl;
        has = true;
      }
    };
    if (auto v = bound("minimum")) tighter(true, b.has_lo, b.lo, b.lo_excl, *v, flag("exclusiveMinimum"));
    if (auto v = bound("maximum")) tighter(false, b.has_hi, b.hi, b.hi_excl, *v, flag("exclusiveMaximum"));
    for (const bool lower : {true, false}) {
      const char* key = lower ? "exclusiveMinimum" : "exclusiveMaximum";
      auto it = s.find(key);
      if (it == s.end() || it->is_boolean()) continue;
      const auto v = bound(key);
      if (lower) tighter(true, b.has_lo, b.lo, b.lo_excl, *v, true);
      else tighter(false, b.has_hi, b.hi, b.hi_excl, *v, true);
    }
    if (b.any() && !number_bounds_finish(b))
      bad(where, "no number satisfies 'minimum' / 'maximum' / 'exclusiveMinimum' / 'exclusiveMaximum' (bounded numbers are written "
                 "without exponent, integers of at most 38 digits, others of at most 15 integer and 12 fraction digits)");
  }

  void compile_object(const json& s, SchemaNode& n, int depth, const std::string& where) {
    std::vector<std::pair<std::string, int32_t>> props;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) bad(where, "'properties' must be an object");
      if (it->size() > kMaxProperties) bad(where, "'properties': more than 64 properties");
      for (auto p = it->begin(); p != it->end(); ++p)
        props.emplace_back(json(p.key()).dump(), compile(p.value(), depth + 1, where + "/properties/" + pointer_escape(p.key())));
    }
    std::sort(props.begin(), props.end());
    for (auto& [k, node] : props) {
      n.keys.push_back(k);
      n.key_nodes.push_back(node);
    }
    const json* add_props = nullptr;
    if (auto it = s.find("additionalProperties"); it != s.end()) add_props = &*it;
    if (add_props && !add_props->is_boolean() && !add_props->is_object())
      bad(where, "'additionalProperties' must be a boolean or a schema");
    // unevaluatedProperties false with nothing else evaluating keys: as additionalProperties false.
    const bool closed = (add_props && *add_props == false) || (!add_props && s.value("unevaluatedProperties", json(true)) == false);
    n.closed = closed;
    if (n.keys.empty() && !closed) {
      if (add_props && add_props->is_object() && !add_props->empty()) {
        n.any_object = false;
        n.additional = compile(*add_props, depth + 1, where + "/additionalProperties");
      }
    } else {
      n.any_object = false;  // only the listed properties (none when closed)
    }
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) bad(where, "'required' must be an array of strings");
      for (const json& r : *it) {
        if (!r.is_string()) bad(where, "'required' must be an array of strings");
        const std::string spelled = r.dump();
        const auto k = std::find(n.keys.begin(), n.keys.end(), spelled);
        if (k == n.keys.end())
          bad(where, "'required' names " + spelled + ", which is not in 'properties' (only listed properties are written)");
        n.required |= uint64_t{1} << (k - n.keys.begin());
      }
    }
    if (s.contains("minProperties")) n.min_props = count_field(s, "minProperties", where);
    if (s.contains("maxProperties")) n.max_props = count_field(s, "maxProperties", where);
    if (n.min_props > 0 || n.max_props != UINT32_MAX) {
      if (n.any_object) {  // a free object: counted as a map of free values
        n.any_object = false;
        n.additional = schema_detail::kAnyNode;
      }
      const uint32_t required = uint32_t(__builtin_popcountll(n.required));
      if (n.min_props > n.max_props) bad(where, "'minProperties' is above 'maxProperties'");
      if (required > n.max_props) bad(where, "'maxProperties' is below the number of required properties");
      if (n.additional < 0 && n.min_props > n.keys.size())
        bad(where, "'minProperties' is above the number of properties that may be written");
    }
  }

  void compile_array(const json& s, SchemaNode& n, int depth, const std::string& where) {
    const json* prefix = nullptr;
    if (auto it = s.find("prefixItems"); it != s.end()) prefix = &*it;
    auto items = s.find("items");
    if (!prefix && items != s.end() && items->is_array()) prefix = &*items;  // draft-4 tuple
    if (prefix) {
      if (!prefix->is_array()) bad(where, "'prefixItems' must be an array");
      for (size_t i = 0; i < prefix->size(); ++i)
        n.prefix_items.push_back(compile((*prefix)[i], depth + 1, str_cat(where, "/prefixItems/", i)));
    }
    if (items != s.end() && !items->is_array()) {
      if (items->is_boolean() && !items->get<bool>()) n.items = -1;
      else n.items = compile(*items, depth + 1, where + "/items");
    } else if (items != s.end() && items->is_array()) {
      if (auto ai = s.find("additionalItems"); ai != s.end()) {
        if (ai->is_boolean() && !ai->get<bool>()) n.items = -1;
        else n.items = compile(*ai, depth + 1, where + "/additionalItems");
      }
    } else if (s.value("unevaluatedItems", json(true)) == false) {
      n.items = -1;
    }
    if (s.contains("minItems")) n.min_items = count_field(s, "minItems", where);
    if (s.contains("maxItems")) n.max_items = count_field(s, "maxItems", where);
    if (n.min_items > n.max_items) bad(where, "'minItems' is above 'maxItems'");
    if (n.items < 0 && n.min_items > n.prefix_items.size()) bad(where, "'minItems' is above the number of items allowed");
    n.any_array = n.prefix_items.empty() && n.items == schema_detail::kAnyNode && n.min_items == 0 && n.max_items == UINT32_MAX;
  }

  int32_t compile_literals(const json& s, const std::string& where) {
    SchemaNode n;
    n.kind = SchemaNode::Kind::kLiteral;
    std::vector<json> values;
    if (auto it = s.find("const"); it != s.end()) {
      values.push_back(*it);
      if (auto e = s.find("enum"); e != s.end() && (!e->is_array() || std::find(e->begin(), e->end(), *it) == e->end()))
        bad(where, "'const' is not one of 'enum'");
    } else {
      const json& e = s.at("enum");
      if (!e.is_array() || e.empty()) bad(where, "'enum' must be a non-empty array");
      if (e.size() > kMaxLiterals) bad(where, "'enum': more than 16384 values");
      values.assign(e.begin(), e.end());
    }
    // Other assertions next to enum / const keep only the values they accept.
    json rest = json::object();
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != "enum" && it.key() != "const" && !is_annotation(it.key())) rest[it.key()] = it.value();
    std::shared_ptr<const CompiledSchema> filter;
    if (!rest.empty()) filter = SchemaCompiler(root_).run(rest, where);
    for (const json& v : values) {
      const std::string text = v.dump();
      if (filter) {
        SchemaConstraint c(filter, 0);
        if (!c.accepts(text)) continue;
        c.advance(text);
        if (!c.complete()) continue;
      }
      n.literals.push_back(text);
    }
    if (n.literals.empty()) bad(where, "no value of 'enum' / 'const' satisfies the keywords next to it");
    literal_count_ += n.literals.size();
    if (literal_count_ > kMaxLiterals) bad(where, "more than 16384 enum / const values in the schema");
    std::sort(n.literals.begin(), n.literals.end());
    n.literals.erase(std::unique(n.literals.begin(), n.literals.end()), n.literals.end());
    return add(std::move(n));
  }

  int32_t compile_union(const json& alts, int depth, const std::string& where, bool one_of) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < alts.size(); ++i) ids.push_back(compile(alts[i], depth + 1, str_cat(where, "/", i)));
    // Plain type sets (no constraint beyond the type) merge into one node: anyOf [integer,
    // number] then admits 1.5 whichever comes first.
    const auto plain = [&](int32_t id) {
      const SchemaNode& a = nodes_[size_t(id)];
      return a.kind == SchemaNode::Kind::kTyped && a.any_object && a.additional < 0 && a.any_array &&
             a.min_length == 0 && a.max_length < 0 && !a.bounds.any();
    };
    // For oneOf only types no two alternatives share (integer counts as a number), so that a
    // value still matches exactly one.
    uint8_t seen = 0;
    bool disjoint = true;
    for (int32_t id : ids) {
      uint8_t t = nodes_[size_t(id)].types;
      if (t & (schema_detail::kNumber | schema_detail::kInteger)) t |= schema_detail::kNumber | schema_detail::kInteger;
      disjoint = disjoint && (seen & t) == 0;
      seen |= t;
    }
    if (std::all_of(ids.begin(), ids.end(), plain) && (!one_of || disjoint)) {
      SchemaNode merged;
      merged.kind = SchemaNode::Kind::kTyped;
      for (int32_t id : ids) merged.types |= nodes_[size_t(id)].types;
      return add(std::move(merged));
    }
    if (std::find(ids.begin(), ids.end(), schema_detail::kAnyNode) != ids.end()) {
      if (one_of) bad(where, "an alternative of 'oneOf' admits every value, so no value matches exactly one");
      return schema_detail::kAnyNode;
    }
    SchemaNode u;
    u.kind = SchemaNode::Kind::kUnion;
    u.alternatives = std::move(ids);
    const int32_t id = add(std::move(u));
    if (one_of) one_ofs_.emplace_back(id, where);
    return id;
  }

  // oneOf: the recognizer writes a value for the first alternative that admits its first byte.
  // That value must match no other alternative; refused unless this is certain.
  static void check_one_of(const CompiledSchema& cs, int32_t node, const std::string& where) {
    const auto& alts = cs.nodes[size_t(node)].alternatives;
    for (size_t i = 0; i < alts.size(); ++i)
      for (size_t j = 0; j < alts.size(); ++j)
        if (i != j && !exclusive(cs, alts[i], alts[j]))
          bad(where, str_cat("'oneOf': a value written for alternative ", i, " may also match alternative ", j,
                             ", and 'exactly one' is not enforced; use 'anyOf', or alternatives of different types or with "
                             "a required property of distinct 'const' values"));
  }

  static int32_t follow_links(const CompiledSchema& cs, int32_t n) {
    for (int i = 0; i < schema_detail::kMaxResolveDepth; ++i) {
      const SchemaNode& s = cs.nodes[size_t(n)];
      if (s.kind != SchemaNode::Kind::kUnion || s.alternatives.size() != 1) return n;
      n = s.alternatives[0];
    }
    return n;
  }

  // Whether no value the recognizer writes for `a` matches `b`.
  static bool exclusive(const CompiledSchema& cs, int32_t a, int32_t b) {
    bool shared_byte = false;
    for (int w = 0; w < 4; ++w) shared_byte = shared_byte || (cs.first[size_t(a)][size_t(w)] & cs.first[size_t(b)][size_t(w)]);
    if (!shared_byte) return true;
    a = follow_links(cs, a);
    b = follow_links(cs, b);
    const SchemaNode& x = cs.nodes[size_t(a)];
    const SchemaNode& y = cs.nodes[size_t(b)];
    if (x.kind == SchemaNode::Kind::kLiteral) {
      // Every literal of `a` is a scalar that `b` refuses (for scalars the recognizer's
      // answer is the schema's).
      auto only_b = std::make_shared<CompiledSchema>(cs);
      only_b->root = b;
      for (const std::string& l : x.literals) {
        if (l[0] == '{' || l[0] == '[') return false;
        SchemaConstraint c(only_b, 0);
        if (c.accepts(l)) {
          c.advance(l);
          if (c.complete()) return false;
        }
      }
      return true;
    }
    if (x.kind != SchemaNode::Kind::kTyped || y.kind != SchemaNode::Kind::kTyped) return false;
    // Objects only (other shared types overlap).
    if ((x.types & ~schema_detail::kNull) != schema_detail::kObject || (y.types & ~schema_detail::kNull) != schema_detail::kObject || ((x.types & schema_detail::kNull) && (y.types & schema_detail::kNull))) return false;
    if (x.additional >= 0 || x.any_object) return false;
    for (size_t k = 0; k < y.keys.size(); ++k) {
      if (!((y.required >> k) & 1)) continue;
      if (std::find(x.keys.begin(), x.keys.end(), y.keys[k]) == x.keys.end()) return true;  // never written for a
    }
    for (size_t k = 0; k < x.keys.size(); ++k) {
      if (!((x.required >> k) & 1)) continue;
      const auto yk = std::find(y.keys.begin(), y.keys.end(), x.keys[k]);
      if (yk == y.keys.end()) {
        if (y.closed) return true;  // always written for a, never allowed in b
        continue;
      }
      const SchemaNode& xv = cs.nodes[size_t(follow_links(cs, x.key_nodes[k]))];
      const SchemaNode& yv = cs.nodes[size_t(follow_links(cs, y.key_nodes[size_t(yk - y.keys.begin())]))];
      if (xv.kind != SchemaNode::Kind::kLiteral || yv.kind != SchemaNode::Kind::kLiteral) continue;
      bool common = false;
      for (const std::string& l : xv.literals)
        common = common || std::binary_search(yv.literals.begin(), yv.literals.end(), l);
      if (!common) return true;  // a discriminator of distinct values
    }
    return false;
  }

  const json& root_;
  std::vector<SchemaNode> nodes_;
  std::map<std::string, int32_t> refs_;
  std::vector<std::pair<int32_t, std::string>> one_ofs_;
  size_t literal_count_ = 0;
};

}  // namespace

std::shared_ptr<const CompiledSchema> compile_json_schema(const nlohmann::json& schema) {
  return SchemaCompiler(schema).run();
}

std::shared_ptr<const CompiledSchema> compile_json_schema(const nlohmann::json& root, const nlohmann::json& sub) {
  return SchemaCompiler(root).run(sub, "#");
}

bool json_schema_admits_string(const CompiledSchema& schema) { return schema.admits(schema.root, '"'); }

bool json_schema_admits_first_byte(const CompiledSchema& schema, uint8_t byte) {
  return schema.admits(schema.root, byte);
}

bool json_schema_integer_only(const CompiledSchema& schema) {
  const int32_t n = schema.resolve(schema.root, '1');
  if (n < 0) return false;
  const SchemaNode& s = schema.nodes[size_t(n)];
  return s.kind == SchemaNode::Kind::kTyped && (s.types & schema_detail::kInteger) && !(s.types & schema_detail::kNumber);
}

std::optional<std::vector<std::string>> json_schema_string_choices(const CompiledSchema& schema) {
  int32_t n = schema.root;
  for (int i = 0; i <= schema_detail::kMaxResolveDepth; ++i) {
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
  for (int i = 0; i <= schema_detail::kMaxResolveDepth; ++i) {
    const SchemaNode& s = schema.nodes[size_t(n)];
    if (s.kind == SchemaNode::Kind::kTyped) return s.types == schema_detail::kObject;
    if (s.kind != SchemaNode::Kind::kUnion || s.alternatives.size() != 1) return false;
    n = s.alternatives[0];  // a $ref
  }
  return false;
}

}  // namespace brisk
