// The builtin tests of Jinja2 (`x is defined`, `x is string`, `x is divisibleby(3)`, ...), with
// Python's type checks: `number` includes bool, `integer` does not; `sequence` holds for str,
// list, tuple, dict and undefined; `iterable` for those plus generators.
#include <unordered_map>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/unicode.h"

namespace brisk::jinja {

namespace {

const Value& one_arg(CallArgs& a, const char* test) {
  if (a.positional.size() != 1 || !a.keywords.empty()) fail("test '", test, "' takes exactly one argument");
  return a.positional[0];
}

void no_args(CallArgs& a, const char* test) {
  if (!a.positional.empty() || !a.keywords.empty()) fail("test '", test, "' takes no arguments");
}

#define SIMPLE_TEST(fn, name, expr)                    \
  bool fn(Interpreter&, const Value& v, CallArgs& a) { \
    no_args(a, name);                                  \
    return (expr);                                     \
  }

SIMPLE_TEST(t_defined, "defined", !v.is_undefined())
SIMPLE_TEST(t_undefined, "undefined", v.is_undefined())
SIMPLE_TEST(t_none, "none", v.is_none())
SIMPLE_TEST(t_boolean, "boolean", v.is_bool())
SIMPLE_TEST(t_true, "true", v.is_bool() && v.as_bool())
SIMPLE_TEST(t_false, "false", v.is_bool() && !v.as_bool())
SIMPLE_TEST(t_integer, "integer", v.is_int())
SIMPLE_TEST(t_float, "float", v.is_float())
SIMPLE_TEST(t_number, "number", v.is_number())
SIMPLE_TEST(t_string, "string", v.is_string())
SIMPLE_TEST(t_mapping, "mapping", v.is_dict())
SIMPLE_TEST(t_iterable, "iterable", v.is_undefined() || v.is_string() || v.is_list() || v.is_dict())
SIMPLE_TEST(t_sequence, "sequence",
            v.is_undefined() || v.is_string() || v.is_dict() || (v.is_list() && !v.as_list()->generator))
SIMPLE_TEST(t_callable, "callable", v.is_callable())
SIMPLE_TEST(t_escaped, "escaped", false)

bool t_lower(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  bool cased = false;
  for (char32_t c : unicode::decode(v.str())) {
    if (unicode::is_upper(c) || (unicode::is_cased(c) && !unicode::is_lower(c))) return false;
    if (unicode::is_lower(c)) cased = true;
  }
  return cased;
}

bool t_upper(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  bool cased = false;
  for (char32_t c : unicode::decode(v.str())) {
    if (unicode::is_lower(c) || (unicode::is_cased(c) && !unicode::is_upper(c))) return false;
    if (unicode::is_upper(c)) cased = true;
  }
  return cased;
}

int64_t int_operand(const Value& v, const char* test) {
  if (!(v.is_int() || v.is_bool())) fail("test '", test, "' needs an integer, got ", v.type_name());
  return v.int_value();
}

bool t_odd(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "odd");
  return int_operand(v, "odd") % 2 != 0;
}

bool t_even(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "even");
  return int_operand(v, "even") % 2 == 0;
}

bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  int64_t d = int_operand(one_arg(a, "divisibleby"), "divisibleby");
  if (d == 0) fail("integer division or modulo by zero");
  if (d == -1) return true;
  return int_operand(v, "divisibleby") % d == 0;
}

bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return values_equal(v, one_arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !values_equal(v, one_arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return values_compare(v, one_arg(a, "lt")) < 0; }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return values_compare(v, one_arg(a, "le")) <= 0; }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return values_compare(v, one_arg(a, "gt")) > 0; }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return values_compare(v, one_arg(a, "ge")) >= 0; }
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return contains(one_arg(a, "in"), v); }

bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = one_arg(a, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::none:
    case Value::Kind::undefined: return true;
    case Value::Kind::boolean: return v.as_bool() == o.as_bool();
    case Value::Kind::integer: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Value::Kind::list: return v.as_list() == o.as_list();
    case Value::Kind::dict: return v.as_dict() == o.as_dict();
    case Value::Kind::callable: return v.as_callable() == o.as_callable();
    case Value::Kind::ns: return v.as_namespace() == o.as_namespace();
    default: return false;
  }
}

bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "filter");
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "test");
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},
      {"boolean", t_boolean},   {"true", t_true},           {"false", t_false},
      {"integer", t_integer},   {"float", t_float},         {"number", t_number},
      {"string", t_string},     {"mapping", t_mapping},     {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable},   {"escaped", t_escaped},
      {"lower", t_lower},       {"upper", t_upper},         {"odd", t_odd},
      {"even", t_even},         {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq},
      {"ne", t_ne}, {"!=", t_ne},
      {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt},
      {"le", t_le}, {"<=", t_le},
      {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt},
      {"ge", t_ge}, {">=", t_ge},
      {"in", t_in}, {"sameas", t_sameas}, {"filter", t_filter}, {"test", t_test},
  };
  return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
  const auto& t = test_table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

}  // namespace brisk::jinja
