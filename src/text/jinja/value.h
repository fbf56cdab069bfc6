// Values of the Jinja engine, modelled on the Python objects Jinja2 works with: undefined,
// None, bool, int, float, str, list/tuple, dict (insertion-ordered), callables (filters bound
// to a receiver, macros, globals) and namespace(). Lists and dicts are shared and immutable
// once built (the sandbox transformers uses forbids mutating them); a namespace is the one
// mutable object. Strings are UTF-8; operations that count or index (length, slicing, find)
// work on code points as Python does.
//
// Generators: Jinja2's map/select/reject/selectattr/unique/reverse/items filters return Python
// iterators, which are always truthy, have no len(), and are used up by a first iteration.
// A List with `generator = true` reproduces that behaviour.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace brisk::jinja {

class Value;
class Interpreter;

// Containers record how deeply they nest (a scalar is 0, [] is 1, [[]] is 2); building one
// deeper than kMaxNesting fails, which keeps printing, comparing and freeing values from
// exhausting the stack.
constexpr uint32_t kMaxNesting = 512;

struct List {
  std::vector<Value> items;
  uint32_t depth = 1;
  bool is_tuple = false;
  bool generator = false;
  size_t consumed = 0;  // generator: items before this index were already iterated
};

// Insertion-ordered mapping. String keys are indexed; other keys (ints, ...) are rare in
// templates and found by a linear scan.
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces in place when the key exists
  size_t size() const;  // defined below Value (the pair needs a complete Value)
  uint32_t depth() const { return depth_; }
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }

 private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t> string_index_;
  uint32_t depth_ = 1;
};

struct Namespace {
  Dict attrs;
};

// Arguments of a call: positional then keyword, as written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

struct Callable;

// State of the `loop` object of a for loop: one object per loop, advanced each iteration (as
// Jinja2's LoopContext); attributes (index, first, previtem, ...) are computed on access.
struct LoopState {
  int64_t index0 = 0;
  int64_t length = 0;
  int64_t depth = 1;
  std::shared_ptr<const std::vector<Value>> items;
  std::shared_ptr<Callable> cycle;
  std::shared_ptr<Callable> changed;
};

struct Callable {
  enum class Kind : uint8_t { builtin, macro, method };
  Kind kind = Kind::builtin;
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
  std::shared_ptr<Dict> attrs;       // attributes readable with "." (cycler), or null
  std::shared_ptr<LoopState> loop;   // set for the `loop` object
};

struct Undefined {
  std::string hint;  // what the UndefinedError says when the value is used ("'x' is undefined")
};

using ListPtr = std::shared_ptr<List>;
using DictPtr = std::shared_ptr<Dict>;
using CallablePtr = std::shared_ptr<Callable>;
using NamespacePtr = std::shared_ptr<Namespace>;

class Value {
 public:
  enum class Kind : uint8_t {
    undefined, none, boolean, integer, floating, string, list, dict, callable, ns
  };

  Value() : v_(Undefined{}) {}
  static Value undefined(std::string hint = {}) {
    Value v;
    v.v_ = Undefined{std::move(hint)};
    return v;
  }
  static Value none() {
    Value v;
    v.v_ = nullptr;
    return v;
  }
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(int64_t(i)) {}
  Value(double f) : v_(f) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(ListPtr l) : v_(std::move(l)) {}
  Value(DictPtr d) : v_(std::move(d)) {}
  Value(CallablePtr c) : v_(std::move(c)) {}
  Value(NamespacePtr n) : v_(std::move(n)) {}
  static Value list(std::vector<Value> items, bool is_tuple = false);
  // A string marked safe (Jinja2's Markup, from |safe or |escape): `+` with a plain string
  // HTML-escapes the plain side and stays safe.
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.safe_ = true;
    return v;
  }
  bool is_safe() const { return safe_; }
  static Value generator(std::vector<Value> items);

  Kind kind() const { return Kind(v_.index()); }
  bool is_undefined() const { return kind() == Kind::undefined; }
  bool is_none() const { return kind() == Kind::none; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_float() const { return kind() == Kind::floating; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is int
  bool is_string() const { return kind() == Kind::string; }
  bool is_list() const { return kind() == Kind::list; }
  bool is_dict() const { return kind() == Kind::dict; }
  bool is_callable() const { return kind() == Kind::callable; }
  bool is_namespace() const { return kind() == Kind::ns; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const ListPtr& as_list() const { return std::get<ListPtr>(v_); }
  const DictPtr& as_dict() const { return std::get<DictPtr>(v_); }
  const CallablePtr& as_callable() const { return std::get<CallablePtr>(v_); }
  const NamespacePtr& as_namespace() const { return std::get<NamespacePtr>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // int or bool as a Python int; float as a double (for arithmetic).
  int64_t int_value() const { return is_bool() ? int64_t(as_bool()) : as_int(); }
  double number_value() const { return is_float() ? as_float() : double(int_value()); }

  bool truthy() const;                 // Python bool()
  std::string type_name() const;       // Python type name: 'dict', 'str', 'NoneType', ...
  std::string str() const;             // Python str(); undefined prints as ""
  std::string repr() const;            // Python repr()
  void append_str(std::string& out) const;  // out += str(), without a temporary for strings

 private:
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, ListPtr, DictPtr,
               CallablePtr, NamespacePtr>
      v_;
  bool safe_ = false;
};

inline size_t Dict::size() const { return items_.size(); }

uint32_t nesting_depth(const Value& v);  // 0 for scalars

// Python ==, and ordering for <, <=, >, >= (throws brisk::Error on types Python cannot order).
bool values_equal(const Value& a, const Value& b);
int values_compare(const Value& a, const Value& b);  // -1, 0, 1

// The items a for loop (or list()) sees: list items, dict keys, string characters. Consumes
// a generator. Undefined iterates as empty; other types throw.
std::vector<Value> iterate(const Value& v);

// JSON (ordered or not) to a Value: objects keep their order, numbers keep int/float.
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

}  // namespace brisk::jinja
