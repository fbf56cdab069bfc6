// The builtin filters of Jinja2 that chat templates use, with Jinja2's semantics (including its
// quirks: map/select/... return one-shot generators, |length of a generator fails), plus
// transformers' tojson (json.dumps with ensure_ascii=False, no HTML escaping).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/strings.h"
#include "text/jinja/unicode.h"

namespace brisk::jinja {

namespace {

std::optional<std::string> opt_string(const Value* v, const char* what) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) fail(what, " must be a string, not ", v->type_name());
  return v->as_string();
}

int64_t int_arg(const Value& v, const char* what) {
  if (!(v.is_int() || v.is_bool())) fail(what, " must be an integer, not ", v.type_name());
  return v.int_value();
}

const std::string& str_arg(const Value& v, const char* what) {
  if (!v.is_string()) fail(what, " must be a string, not ", v.type_name());
  return v.as_string();
}

// Jinja's attribute path "a.b.0": each part looked up with getitem.
Value get_attribute_path(Interpreter& in, Value item, const std::string& path) {
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    item = in.getitem(item, digits ? Value(int64_t(std::strtoll(part.c_str(), nullptr, 10))) : Value(part));
    if (dot == std::string::npos) return item;
    start = dot + 1;
  }
}

Value attribute_getter(Interpreter& in, const Value& item, const Value* attribute) {
  if (!attribute || attribute->is_none()) return item;
  if (attribute->is_int()) return in.getitem(item, *attribute);
  return get_attribute_path(in, item, str_arg(*attribute, "attribute"));
}

Value ignore_case(const Value& v) {
  return v.is_string() ? Value(unicode::lower(v.as_string())) : v;
}

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return 0;
    case Value::Kind::string: return int64_t(unicode::length(v.as_string()));
    case Value::Kind::list:
      if (v.as_list()->generator) fail("object of type 'generator' has no len()");
      return int64_t(v.as_list()->items.size());
    case Value::Kind::dict: return int64_t(v.as_dict()->size());
    default: fail("object of type '", v.type_name(), "' has no len()");
  }
}

Value f_length(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "length", {});
  return Value(length_of(v));
}

Value f_string(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "string", {});
  return Value(v.str());
}

Value f_safe(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "safe", {});
  return Value::markup(v.str());
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader r(a, "trim", {"chars"});
  return Value(pystr::strip(v.str(), opt_string(r.get(0), "chars"), true, true));
}

Value f_upper(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "upper", {});
  return Value(unicode::upper(v.str()));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "lower", {});
  return Value(unicode::lower(v.str()));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "capitalize", {});
  return Value(pystr::capitalize(v.str()));
}

Value f_title(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "title", {});
  return Value(pystr::jinja_title(v.str()));
}

Value f_escape(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "escape", {});
  if (v.is_safe()) return v;
  return Value::markup(pystr::html_escape(v.str()));
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader r(a, "default", {"default_value", "boolean"});
  bool boolean = r.get_or(1, Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return r.get_or(0, Value(std::string()));
  return v;
}

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "replace", {"old", "new", "count"});
  BRISK_CHECK(r.get(0) && r.get(1), "replace() needs the old and new strings");
  Value count = r.get_or(2, Value::none());
  std::string out = pystr::replace(v.str(), r.get(0)->str(), r.get(1)->str(),
                                   count.is_none() ? -1 : int_arg(count, "count"));
  in.charge(out.size());
  return Value(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "join", {"d", "attribute"});
  std::string sep = r.get_or(0, Value(std::string())).str();
  const Value* attribute = r.get(1);
  std::string out;
  bool first = true;
  for (const auto& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    attribute_getter(in, item, attribute).append_str(out);
  }
  in.charge(out.size());
  return Value(std::move(out));
}

Value f_list(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "list", {});
  return Value::list(iterate(v));
}

Value f_first(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "first", {});
  if (v.is_list() && v.as_list()->generator) {
    auto& l = *v.as_list();
    if (l.consumed < l.items.size()) return l.items[l.consumed++];
    return Value::undefined("No first item, sequence was empty.");
  }
  if (v.is_list() && !v.as_list()->items.empty()) return v.as_list()->items.front();
  if (v.is_undefined() || v.is_list()) return Value::undefined("No first item, sequence was empty.");
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "last", {});
  if (v.is_list() && v.as_list()->generator) fail("'generator' object is not reversible");
  if (v.is_list()) {
    if (v.as_list()->items.empty()) return Value::undefined("No last item, sequence was empty.");
    return v.as_list()->items.back();
  }
  if (!(v.is_string() || v.is_dict() || v.is_undefined()))
    fail("'", v.type_name(), "' object is not reversible");
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_reverse(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "reverse", {});
  if (v.is_string()) {
    auto cps = unicode::decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value(unicode::encode(cps));
  }
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() of a list is an iterator; of a generator, Jinja falls back to a list.
  if (v.is_list() && !v.as_list()->generator) return Value::generator(std::move(items));
  if (v.is_dict()) return Value::generator(std::move(items));
  return Value::list(std::move(items));
}

Value f_items(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "items", {});
  if (v.is_undefined()) return Value::generator({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.as_dict()->items()) out.push_back(Value::list({k, val}, true));
  return Value::generator(std::move(out));
}

void stable_sort_values(std::vector<std::pair<Value, Value>>& keyed, bool reverse) {
  // Python's sorted(reverse=True) keeps equal items in their original order.
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? values_compare(y.first, x.first) < 0 : values_compare(x.first, y.first) < 0;
  });
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader r(a, "dictsort", {"case_sensitive", "by", "reverse"});
  bool case_sensitive = r.get_or(0, Value(false)).truthy();
  std::string by = r.get_or(1, Value("key")).str();
  bool reverse = r.get_or(2, Value(false)).truthy();
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) fail("'", v.type_name(), "' object has no attribute 'items'");
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, val] : v.as_dict()->items()) {
    Value key = by == "key" ? k : val;
    if (!case_sensitive) key = ignore_case(key);
    keyed.emplace_back(key, Value::list({k, val}, true));
  }
  stable_sort_values(keyed, reverse);
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "sort", {"reverse", "case_sensitive", "attribute"});
  bool reverse = r.get_or(0, Value(false)).truthy();
  bool case_sensitive = r.get_or(1, Value(false)).truthy();
  const Value* attribute = r.get(2);
  std::vector<std::string> attrs;
  if (attribute && attribute->is_string()) {
    for (const auto& part : pystr::split(attribute->as_string(), std::string(","), -1)) attrs.push_back(part);
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : iterate(v)) {
    std::vector<Value> key;
    if (attrs.empty()) {
      Value k = attribute_getter(in, item, attribute);
      key.push_back(case_sensitive ? k : ignore_case(k));
    } else {
      for (const auto& path : attrs) {
        Value k = get_attribute_path(in, item, path);
        key.push_back(case_sensitive ? k : ignore_case(k));
      }
    }
    keyed.emplace_back(Value::list(std::move(key)), item);
  }
  stable_sort_values(keyed, reverse);
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "unique", {"case_sensitive", "attribute"});
  bool case_sensitive = r.get_or(0, Value(false)).truthy();
  const Value* attribute = r.get(1);
  std::vector<Value> seen, out;
  for (auto& item : iterate(v)) {
    Value key = attribute_getter(in, item, attribute);
    if (!case_sensitive) key = ignore_case(key);
    if (key.is_list() || key.is_dict()) fail("unhashable type: '", key.type_name(), "'");
    bool dup = false;
    for (const auto& s : seen)
      if (values_equal(s, key)) { dup = true; break; }
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  ArgReader r(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  bool case_sensitive = r.get_or(0, Value(false)).truthy();
  const Value* attribute = r.get(1);
  Value best, best_key;
  bool have = false;
  for (auto& item : iterate(v)) {
    Value key = attribute_getter(in, item, attribute);
    if (!case_sensitive) key = ignore_case(key);
    if (!have || (want_max ? values_compare(key, best_key) > 0 : values_compare(key, best_key) < 0)) {
      best = item;
      best_key = key;
      have = true;
    }
  }
  if (!have) return Value::undefined(str_cat("No aggregated item, sequence was empty."));
  return best;
}

Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "sum", {"attribute", "start"});
  const Value* attribute = r.get(0);
  Value total = r.get_or(1, Value(int64_t(0)));
  for (auto& item : iterate(v)) total = binary_op(in, Op::add, total, attribute_getter(in, item, attribute));
  return total;
}

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  if (!v.truthy()) return Value::generator({});  // Jinja2: `if value:` before iterating
  std::vector<Value> out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, val] : a.keywords) {
    if (k == "attribute") attribute = &val;
    else if (k == "default") dflt = &val;
  }
  if (attribute || a.positional.empty()) {
    if (!a.positional.empty()) fail("map() got positional arguments with attribute=");
    for (const auto& [k, val] : a.keywords)
      if (k != "attribute" && k != "default") fail("Unexpected keyword argument '", k, "'");
    for (auto& item : iterate(v)) {
      Value x = attribute ? attribute_getter(in, item, attribute) : item;
      if (x.is_undefined() && dflt) x = *dflt;
      out.push_back(std::move(x));
    }
    return Value::generator(std::move(out));
  }
  std::string name = str_arg(a.positional[0], "filter name");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keywords = a.keywords;
  if (!find_filter(name)) fail("no filter named '", name, "'");
  for (auto& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(in.apply_filter(name, item, copy));
  }
  return Value::generator(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep_if) {
  if (!v.truthy()) return Value::generator({});  // Jinja2: `if value:` before iterating
  size_t first_test_arg = by_attr ? 1 : 0;
  if (by_attr && a.positional.empty()) fail("Missing parameter for attribute name");
  std::string attr = by_attr ? a.positional[0].str() : std::string();
  std::string test;
  CallArgs test_args;
  if (a.positional.size() > first_test_arg) {
    test = str_arg(a.positional[first_test_arg], "test name");
    test_args.positional.assign(a.positional.begin() + std::ptrdiff_t(first_test_arg) + 1, a.positional.end());
    test_args.keywords = a.keywords;
    if (!find_test(test)) fail("no test named '", test, "'");
  }
  std::vector<Value> out;
  for (auto& item : iterate(v)) {
    Value x = by_attr ? get_attribute_path(in, item, attr) : item;
    bool r;
    if (test.empty()) {
      r = x.truthy();
    } else {
      CallArgs copy = test_args;
      r = in.apply_test(test, x, copy);
    }
    if (r == keep_if) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions opt;
  opt.ensure_ascii = r.get_or(0, Value(false)).truthy();
  Value indent = r.get_or(1, Value::none());
  if (indent.is_int() || indent.is_bool()) {
    int64_t n = std::clamp<int64_t>(indent.int_value(), 0, 64);
    opt.indent = std::string(size_t(n), ' ');
  } else if (indent.is_string()) {
    opt.indent = indent.as_string();
  } else if (!indent.is_none()) {
    fail("tojson: indent must be an integer or a string");
  }
  Value seps = r.get_or(2, Value::none());
  if (!seps.is_none()) {
    auto parts = iterate(seps);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
      fail("tojson: separators must be a pair of strings");
    opt.item_separator = parts[0].as_string();
    opt.key_separator = parts[1].as_string();
  }
  opt.sort_keys = r.get_or(3, Value(false)).truthy();
  std::string out = json_dumps(v, opt);
  in.charge(out.size());
  return Value(std::move(out));
}

// int(): strings parsed as Python's int(str, base), falling back to int(float(str)).
std::optional<int64_t> parse_python_int(std::string s, int base) {
  s = pystr::strip(s, std::nullopt, true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isalnum(static_cast<unsigned char>(s[i - 1])) &&
        std::isalnum(static_cast<unsigned char>(s[i + 1])))
      continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  size_t p = (digits[0] == '+' || digits[0] == '-') ? 1 : 0;
  if (p >= digits.size()) return std::nullopt;
  if (base == 16 && digits.size() > p + 2 && digits[p] == '0' && (digits[p + 1] == 'x' || digits[p + 1] == 'X'))
    digits.erase(p, 2);
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0' || end == digits.c_str() + p) return std::nullopt;
  for (size_t i = p; i < digits.size(); ++i)
    if (std::isspace(static_cast<unsigned char>(digits[i]))) return std::nullopt;
  return int64_t(v);
}

std::optional<double> parse_python_float(const std::string& text) {
  std::string s = pystr::strip(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  std::string lower = unicode::lower(s);
  size_t p = (lower[0] == '+' || lower[0] == '-') ? 1 : 0;
  std::string body = lower.substr(p);
  if (body == "inf" || body == "infinity" || body == "nan") {
    double d = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -d : d;
  }
  for (char c : body)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-' || c == '_'))
      return std::nullopt;
  std::string clean;
  for (char c : s)
    if (c != '_') clean += c;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (end == clean.c_str() || *end != '\0') return std::nullopt;
  return d;
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader r(a, "int", {"default", "base"});
  Value dflt = r.get_or(0, Value(int64_t(0)));
  int64_t base = int_arg(r.get_or(1, Value(int64_t(10))), "base");
  if (v.is_int() || v.is_bool()) return Value(v.int_value());
  if (v.is_float()) {
    double d = v.as_float();
    if (std::isnan(d) || std::isinf(d)) fail("cannot convert float ", py_float_repr(d), " to integer");
    if (std::fabs(d) >= 9.2e18) fail("integer overflow");
    return Value(int64_t(std::trunc(d)));
  }
  if (v.is_string()) {
    if (base < 2 || base > 36) fail("int() base must be >= 2 and <= 36");
    if (auto i = parse_python_int(v.as_string(), int(base))) return Value(*i);
    if (auto d = parse_python_float(v.as_string())) {
      if (std::isnan(*d) || std::isinf(*d)) fail("cannot convert float ", py_float_repr(*d), " to integer");
      if (std::fabs(*d) >= 9.2e18) fail("integer overflow");
      return Value(int64_t(std::trunc(*d)));
    }
  }
  return dflt;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader r(a, "float", {"default"});
  Value dflt = r.get_or(0, Value(0.0));
  if (v.is_number()) return Value(v.number_value());
  if (v.is_string())
    if (auto d = parse_python_float(v.as_string())) return Value(*d);
  return dflt;
}

Value f_abs(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "abs", {});
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.int_value() == INT64_MIN) fail("integer overflow");
    return Value(v.int_value() < 0 ? -v.int_value() : v.int_value());
  }
  fail("bad operand type for abs(): '", v.type_name(), "'");
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader r(a, "round", {"precision", "method"});
  int64_t precision = int_arg(r.get_or(0, Value(int64_t(0))), "precision");
  std::string method = r.get_or(1, Value("common")).str();
  if (!v.is_number()) fail("type ", v.type_name(), " doesn't define __round__ method");
  if (method == "common") {
    if (!v.is_float()) return Value(v.int_value());
    double d = v.as_float();
    if (std::isnan(d) || std::isinf(d)) return Value(d);
    precision = std::clamp<int64_t>(precision, -300, 300);
    if (precision < 0) {
      double scale = std::pow(10.0, double(-precision));
      return Value(std::nearbyint(d / scale) * scale);
    }
    char buf[1024];  // up to 309 integer digits + 300 decimals
    std::snprintf(buf, sizeof(buf), "%.*f", int(precision), d);
    return Value(std::strtod(buf, nullptr));
  }
  if (method != "ceil" && method != "floor") fail("method must be 'common', 'ceil' or 'floor'");
  double scale = std::pow(10.0, double(precision));
  double x = v.number_value() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "indent", {"width", "first", "blank"});
  Value width = r.get_or(0, Value(int64_t(4)));
  std::string indention = width.is_string() ? width.as_string()
                                            : std::string(size_t(std::clamp<int64_t>(int_arg(width, "width"), 0, 1000)), ' ');
  bool first = r.get_or(1, Value(false)).truthy();
  bool blank = r.get_or(2, Value(false)).truthy();
  std::string s = v.str() + "\n";
  auto lines = pystr::splitlines(s, false);
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (first) out = indention + out;
  in.charge(out.size());
  return Value(std::move(out));
}

Value f_center(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader r(a, "center", {"width"});
  int64_t width = std::min<int64_t>(int_arg(r.get_or(0, Value(int64_t(80))), "width"), 100000);
  std::string s = v.str();
  int64_t len = int64_t(unicode::length(s));
  if (width <= len) return Value(s);
  int64_t marg = width - len;
  int64_t left = marg / 2 + (marg & width & 1);
  return Value(std::string(size_t(left), ' ') + s + std::string(size_t(marg - left), ' '));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader r(a, "truncate", {"length", "killwords", "end", "leeway"});
  int64_t length = int_arg(r.get_or(0, Value(int64_t(255))), "length");
  bool killwords = r.get_or(1, Value(false)).truthy();
  std::string end = r.get_or(2, Value("...")).str();
  int64_t leeway = int_arg(r.get_or(3, Value(int64_t(5))), "leeway");
  auto cps = unicode::decode(v.str());
  int64_t end_len = int64_t(unicode::length(end));
  if (length < end_len) fail("expected length >= ", end_len, ", got ", length);
  if (int64_t(cps.size()) <= length + leeway) return Value(v.str());
  std::vector<char32_t> head(cps.begin(), cps.begin() + (length - end_len));
  if (!killwords) {
    // s[: length - len(end)].rsplit(" ", 1)[0]
    auto it = std::find(head.rbegin(), head.rend(), U' ');
    if (it != head.rend()) head.resize(size_t(head.rend() - it - 1));
  }
  return Value(unicode::encode(head) + end);
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "wordcount", {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : unicode::decode(v.str())) {
    bool w = unicode::is_alnum(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
  if (!a.positional.empty() && !a.keywords.empty())
    fail("can't handle positional and keyword arguments at the same time");
  if (!a.keywords.empty()) {
    auto d = std::make_shared<Dict>();
    for (const auto& [k, val] : a.keywords) d->set(Value(k), val);
    return Value(percent_format(in, v.str(), Value(std::move(d))));
  }
  return Value(percent_format(in, v.str(), Value::list(a.positional, true)));
}

Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "attr", {"name"});
  BRISK_CHECK(r.get(0), "attr() needs a name");
  return in.getattr(v, r.get(0)->str());
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& a) {
  ArgReader r(a, "batch", {"linecount", "fill_with"});
  int64_t n = int_arg(r.get_or(0, Value(int64_t(1))), "linecount");
  if (n <= 0) fail("batch size must be positive");
  const Value* fill = r.get(1);
  std::vector<Value> out, cur;
  for (auto& item : iterate(v)) {
    cur.push_back(item);
    if (int64_t(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (int64_t(cur.size()) < n) {
        in.step();
        cur.push_back(*fill);
      }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::generator(std::move(out));
}

Value f_pprint(Interpreter&, const Value& v, CallArgs& a) {
  ArgReader(a, "pprint", {});
  return Value(v.repr());
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"abs", f_abs},         {"attr", f_attr},           {"batch", f_batch},
      {"capitalize", f_capitalize}, {"center", f_center}, {"count", f_length},
      {"d", f_default},       {"default", f_default},     {"dictsort", f_dictsort},
      {"e", f_escape},        {"escape", f_escape},       {"first", f_first},
      {"float", f_float},     {"forceescape", f_escape},  {"format", f_format},
      {"indent", f_indent},   {"int", f_int},             {"items", f_items},
      {"join", f_join},       {"last", f_last},           {"length", f_length},
      {"list", f_list},       {"lower", f_lower},         {"map", f_map},
      {"max", f_max},         {"min", f_min},             {"pprint", f_pprint},
      {"reject", f_reject},   {"rejectattr", f_rejectattr}, {"replace", f_replace},
      {"reverse", f_reverse}, {"round", f_round},         {"safe", f_safe},
      {"select", f_select},   {"selectattr", f_selectattr}, {"sort", f_sort},
      {"string", f_string},   {"sum", f_sum},             {"title", f_title},
      {"tojson", f_tojson},   {"trim", f_trim},           {"truncate", f_truncate},
      {"unique", f_unique},   {"upper", f_upper},         {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  const auto& t = filter_table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

}  // namespace brisk::jinja
