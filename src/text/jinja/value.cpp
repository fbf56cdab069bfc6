#include "text/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace brisk::jinja {

// ---- Dict -------------------------------------------------------------------------------

const Value* Dict::find(std::string_view key) const {
  auto it = string_index_.find(std::string(key));
  return it == string_index_.end() ? nullptr : &items_[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items_)
    if (!k.is_string() && values_equal(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  uint32_t d = nesting_depth(value) + 1;
  if (d > kMaxNesting) fail("value nested too deeply (more than ", kMaxNesting, " levels)");
  depth_ = std::max(depth_, d);
  if (key.is_string()) {
    auto [it, inserted] = string_index_.emplace(key.as_string(), items_.size());
    if (!inserted) {
      items_[it->second].second = std::move(value);
      return;
    }
  } else {
    BRISK_CHECK(key.is_none() || key.is_number(), "unhashable type: '", key.type_name(), "'");
    for (auto& [k, v] : items_) {
      if (!k.is_string() && values_equal(k, key)) {
        v = std::move(value);
        return;
      }
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

// ---- Value ------------------------------------------------------------------------------

uint32_t nesting_depth(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::list: return v.as_list()->depth;
    case Value::Kind::dict: return v.as_dict()->depth();
    case Value::Kind::ns: return v.as_namespace()->attrs.depth();
    default: return 0;
  }
}

namespace {

uint32_t items_depth(const std::vector<Value>& items) {
  uint32_t d = 0;
  for (const auto& v : items)
    if (v.kind() >= Value::Kind::list) d = std::max(d, nesting_depth(v));
  if (d + 1 > kMaxNesting) fail("value nested too deeply (more than ", kMaxNesting, " levels)");
  return d + 1;
}

}  // namespace

Value Value::list(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<List>();
  l->depth = items_depth(items);
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(std::move(l));
}

Value Value::generator(std::vector<Value> items) {
  auto l = std::make_shared<List>();
  l->depth = items_depth(items);
  l->items = std::move(items);
  l->generator = true;
  return Value(std::move(l));
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return as_bool();
    case Kind::integer: return as_int() != 0;
    case Kind::floating: return as_float() != 0.0;
    case Kind::string: return !as_string().empty();
    case Kind::list: return as_list()->generator || !as_list()->items.empty();
    case Kind::dict: return as_dict()->size() != 0;
    case Kind::callable:
    case Kind::ns: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list:
      return as_list()->generator ? "generator" : as_list()->is_tuple ? "tuple" : "list";
    case Kind::dict: return "dict";
    case Kind::callable:
      return as_callable()->kind == Callable::Kind::macro ? "Macro" : "function";
    case Kind::ns: return "Namespace";
  }
  return "object";
}

namespace {

void append_repr(std::string& out, const Value& v);

// Printing recursion; also stops cycles through namespaces (ns.self = ns).
struct PrintDepth {
  static inline thread_local uint32_t depth = 0;
  PrintDepth() {
    if (++depth > kMaxNesting + 8) {
      depth = 0;
      fail("value nested too deeply to print (or contains itself)");
    }
  }
  ~PrintDepth() {
    if (depth > 0) --depth;
  }
};

void append_items(std::string& out, const Value& v) {
  PrintDepth guard;
  const auto& l = *v.as_list();
  if (l.generator) {
    out += "<generator object>";
    return;
  }
  out += l.is_tuple ? '(' : '[';
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, l.items[i]);
  }
  if (l.is_tuple && l.items.size() == 1) out += ',';
  out += l.is_tuple ? ')' : ']';
}

void append_dict(std::string& out, const Dict& d) {
  PrintDepth guard;
  out += '{';
  bool first = true;
  for (const auto& [k, val] : d.items()) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k);
    out += ": ";
    append_repr(out, val);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::string: py_string_repr(out, v.as_string()); return;
    case Value::Kind::undefined: out += "Undefined"; return;
    default: v.append_str(out); return;
  }
}

}  // namespace

void Value::append_str(std::string& out) const {
  switch (kind()) {
    case Kind::undefined: return;
    case Kind::none: out += "None"; return;
    case Kind::boolean: out += as_bool() ? "True" : "False"; return;
    case Kind::integer: out += std::to_string(as_int()); return;
    case Kind::floating: out += py_float_repr(as_float()); return;
    case Kind::string: out += as_string(); return;
    case Kind::list: append_items(out, *this); return;
    case Kind::dict: append_dict(out, *as_dict()); return;
    case Kind::callable: out += str_cat("<function ", as_callable()->name, ">"); return;
    case Kind::ns:
      out += "<Namespace ";
      append_dict(out, as_namespace()->attrs);
      out += '>';
      return;
  }
}

std::string Value::str() const {
  if (is_string()) return as_string();
  std::string out;
  append_str(out);
  return out;
}

std::string Value::repr() const {
  std::string out;
  append_repr(out, *this);
  return out;
}

// ---- comparison -------------------------------------------------------------------------

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number_value() == b.number_value();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return a.as_string() == b.as_string();
    case Value::Kind::list: {
      const auto& x = *a.as_list();
      const auto& y = *b.as_list();
      if (x.generator || y.generator) return &x == &y;
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!values_equal(x.items[i], y.items[i])) return false;
      return true;
    }
    case Value::Kind::dict: {
      const auto& x = *a.as_dict();
      const auto& y = *b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::callable: return a.as_callable() == b.as_callable();
    case Value::Kind::ns: return a.as_namespace() == b.as_namespace();
    default: return false;
  }
}

int values_compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.number_value(), y = b.number_value();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.int_value(), y = b.int_value();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order equals code point order.
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && !a.as_list()->generator && !b.as_list()->generator &&
      a.as_list()->is_tuple == b.as_list()->is_tuple) {
    const auto& x = a.as_list()->items;
    const auto& y = b.as_list()->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return values_compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(),
       "'");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return {};
    case Value::Kind::list: {
      auto& l = *v.as_list();
      if (!l.generator) return l.items;
      std::vector<Value> rest(l.items.begin() + std::ptrdiff_t(l.consumed), l.items.end());
      l.consumed = l.items.size();
      return rest;
    }
    case Value::Kind::dict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict()->size());
      for (const auto& [k, val] : v.as_dict()->items()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::string: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      auto offs = unicode::offsets(s);
      chars.reserve(offs.size());
      for (size_t i = 0; i + 1 < offs.size(); ++i)
        chars.emplace_back(s.substr(offs[i], offs[i + 1] - offs[i]));
      return chars;
    }
    case Value::Kind::ns: fail("'Namespace' object is not iterable");
    default: fail("'", v.type_name(), "' object is not iterable");
  }
}

// ---- JSON -------------------------------------------------------------------------------

namespace {

template <class Json>
Value convert_json(const Json& j, int depth) {
  BRISK_CHECK(depth < 512, "JSON input nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u <= uint64_t(INT64_MAX)) return Value(int64_t(u));
      return Value(double(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert_json(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it)
        d->set(Value(it.key()), convert_json(it.value(), depth + 1));
      return Value(std::move(d));
    }
    default: fail("unsupported JSON value (binary)");
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return convert_json(j, 0); }
Value from_json(const nlohmann::json& j) { return convert_json(j, 0); }

}  // namespace brisk::jinja
