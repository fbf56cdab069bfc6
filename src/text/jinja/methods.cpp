// Methods of str, list and dict values reachable from templates (`message.get('x')`,
// `content.split('</think>')`, ...), with Python's semantics. Mutating methods (append,
// update, pop, ...) resolve to an undefined that fails when called, as in Jinja2's
// ImmutableSandboxedEnvironment.
#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/strings.h"
#include "text/jinja/unicode.h"

namespace brisk::jinja {

namespace {

using MethodFn = Value (*)(Interpreter&, const Value& self, CallArgs& a);

std::optional<std::string> opt_str(const Value* v, const char* what) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) fail(what, " must be str or None, not ", v->type_name());
  return v->as_string();
}

const std::string& req_str(const Value* v, const char* fn) {
  if (!v) fail(fn, "() missing a required argument");
  if (!v->is_string()) fail(fn, "() argument must be str, not ", v->type_name());
  return v->as_string();
}

std::optional<int64_t> opt_int(const Value* v) {
  if (!v || v->is_none()) return std::nullopt;
  if (!(v->is_int() || v->is_bool())) fail("slice indices must be integers or None");
  return v->int_value();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}

// ---- str ----------------------------------------------------------------------------------

Value s_strip(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader r(a, "strip", {"chars"});
  return Value(pystr::strip(s.as_string(), opt_str(r.get(0), "strip arg"), true, true));
}
Value s_lstrip(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader r(a, "lstrip", {"chars"});
  return Value(pystr::strip(s.as_string(), opt_str(r.get(0), "lstrip arg"), true, false));
}
Value s_rstrip(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader r(a, "rstrip", {"chars"});
  return Value(pystr::strip(s.as_string(), opt_str(r.get(0), "rstrip arg"), false, true));
}
Value s_split(Interpreter& in, const Value& s, CallArgs& a) {
  ArgReader r(a, "split", {"sep", "maxsplit"});
  in.charge(s.as_string().size());
  return string_list(pystr::split(s.as_string(), opt_str(r.get(0), "sep"), opt_int(r.get(1)).value_or(-1)));
}
Value s_rsplit(Interpreter& in, const Value& s, CallArgs& a) {
  ArgReader r(a, "rsplit", {"sep", "maxsplit"});
  in.charge(s.as_string().size());
  return string_list(pystr::rsplit(s.as_string(), opt_str(r.get(0), "sep"), opt_int(r.get(1)).value_or(-1)));
}
Value s_splitlines(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader r(a, "splitlines", {"keepends"});
  return string_list(pystr::splitlines(s.as_string(), r.get_or(0, Value(false)).truthy()));
}

// startswith / endswith accept a str or a tuple of str, and optional start/end.
bool affix_match(const Value& s, CallArgs& a, const char* fn, bool prefix) {
  ArgReader r(a, fn, {"prefix", "start", "end"});
  if (!r.get(0)) fail(fn, "() takes at least 1 argument (0 given)");
  std::string text = s.as_string();
  if (r.get(1) || r.get(2)) {
    text = slice_value(s, r.get_or(1, Value::none()), r.get_or(2, Value::none()), Value::none()).as_string();
  }
  std::vector<Value> options;
  if (r.get(0)->is_string()) options.push_back(*r.get(0));
  else if (r.get(0)->is_list() && r.get(0)->as_list()->is_tuple) options = r.get(0)->as_list()->items;
  else fail(fn, " first arg must be str or a tuple of str, not ", r.get(0)->type_name());
  for (const auto& o : options) {
    if (!o.is_string()) fail("tuple for ", fn, " must only contain str, not ", o.type_name());
    const std::string& x = o.as_string();
    if (x.size() > text.size()) continue;
    if (prefix ? text.compare(0, x.size(), x) == 0 : text.compare(text.size() - x.size(), x.size(), x) == 0)
      return true;
  }
  return false;
}
Value s_startswith(Interpreter&, const Value& s, CallArgs& a) { return Value(affix_match(s, a, "startswith", true)); }
Value s_endswith(Interpreter&, const Value& s, CallArgs& a) { return Value(affix_match(s, a, "endswith", false)); }

Value s_upper(Interpreter&, const Value& s, CallArgs& a) { ArgReader(a, "upper", {}); return Value(unicode::upper(s.as_string())); }
Value s_lower(Interpreter&, const Value& s, CallArgs& a) { ArgReader(a, "lower", {}); return Value(unicode::lower(s.as_string())); }
Value s_title(Interpreter&, const Value& s, CallArgs& a) { ArgReader(a, "title", {}); return Value(pystr::title(s.as_string())); }
Value s_capitalize(Interpreter&, const Value& s, CallArgs& a) { ArgReader(a, "capitalize", {}); return Value(pystr::capitalize(s.as_string())); }
Value s_swapcase(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader(a, "swapcase", {});
  std::string out;
  for (char32_t c : unicode::decode(s.as_string()))
    unicode::append_utf8(out, unicode::is_upper(c) ? unicode::to_lower(c) : unicode::is_lower(c) ? unicode::to_upper(c) : c);
  return Value(std::move(out));
}

Value s_replace(Interpreter& in, const Value& s, CallArgs& a) {
  ArgReader r(a, "replace", {"old", "new", "count"});
  std::string out = pystr::replace(s.as_string(), req_str(r.get(0), "replace"), req_str(r.get(1), "replace"),
                                   opt_int(r.get(2)).value_or(-1));
  in.charge(out.size());
  return Value(std::move(out));
}

Value find_impl(const Value& s, CallArgs& a, const char* fn, bool reverse, bool raise) {
  ArgReader r(a, fn, {"sub", "start", "end"});
  int64_t i = pystr::find(s.as_string(), req_str(r.get(0), fn), opt_int(r.get(1)), opt_int(r.get(2)), reverse);
  if (i < 0 && raise) fail("substring not found");
  return Value(i);
}
Value s_find(Interpreter&, const Value& s, CallArgs& a) { return find_impl(s, a, "find", false, false); }
Value s_rfind(Interpreter&, const Value& s, CallArgs& a) { return find_impl(s, a, "rfind", true, false); }
Value s_index(Interpreter&, const Value& s, CallArgs& a) { return find_impl(s, a, "index", false, true); }
Value s_rindex(Interpreter&, const Value& s, CallArgs& a) { return find_impl(s, a, "rindex", true, true); }

Value s_count(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader r(a, "count", {"sub"});
  return Value(pystr::count(s.as_string(), req_str(r.get(0), "count")));
}

Value s_format(Interpreter& in, const Value& s, CallArgs& a) { return Value(brace_format(in, s.as_string(), a)); }

Value s_join(Interpreter& in, const Value& s, CallArgs& a) {
  ArgReader r(a, "join", {"iterable"});
  if (!r.get(0)) fail("join() takes exactly one argument (0 given)");
  std::string out;
  bool first = true;
  for (const auto& item : iterate(*r.get(0))) {
    if (!item.is_string()) fail("sequence item: expected str instance, ", item.type_name(), " found");
    if (!first) out += s.as_string();
    first = false;
    out += item.as_string();
  }
  in.charge(out.size());
  return Value(std::move(out));
}

template <bool (*Pred)(char32_t)>
Value char_class(const Value& s, CallArgs& a, const char* fn) {
  ArgReader(a, fn, {});
  auto cps = unicode::decode(s.as_string());
  if (cps.empty()) return Value(false);
  for (char32_t c : cps)
    if (!Pred(c)) return Value(false);
  return Value(true);
}
Value s_isdigit(Interpreter&, const Value& s, CallArgs& a) { return char_class<unicode::is_digit>(s, a, "isdigit"); }
Value s_isalpha(Interpreter&, const Value& s, CallArgs& a) { return char_class<unicode::is_alpha>(s, a, "isalpha"); }
Value s_isalnum(Interpreter&, const Value& s, CallArgs& a) { return char_class<unicode::is_alnum>(s, a, "isalnum"); }
Value s_isspace(Interpreter&, const Value& s, CallArgs& a) { return char_class<unicode::is_space>(s, a, "isspace"); }
Value s_islower(Interpreter& in, const Value& s, CallArgs& a) {
  CallArgs none;
  ArgReader(a, "islower", {});
  return Value(in.apply_test("lower", s, none));
}
Value s_isupper(Interpreter& in, const Value& s, CallArgs& a) {
  CallArgs none;
  ArgReader(a, "isupper", {});
  return Value(in.apply_test("upper", s, none));
}

Value s_istitle(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader(a, "istitle", {});
  bool cased = false, prev_cased = false;
  for (char32_t c : unicode::decode(s.as_string())) {
    bool upper_or_title = unicode::is_upper(c) || (unicode::is_cased(c) && !unicode::is_lower(c));
    if (upper_or_title) {
      if (prev_cased) return Value(false);
      prev_cased = cased = true;
    } else if (unicode::is_lower(c)) {
      if (!prev_cased) return Value(false);
      prev_cased = cased = true;
    } else {
      prev_cased = false;
    }
  }
  return Value(cased);
}

Value s_casefold(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader(a, "casefold", {});
  return Value(unicode::lower(s.as_string()));
}

Value s_zfill(Interpreter& in, const Value& s, CallArgs& a) {
  ArgReader r(a, "zfill", {"width"});
  int64_t width = opt_int(r.get(0)).value_or(0);
  const std::string& t = s.as_string();
  int64_t len = int64_t(unicode::length(t));
  if (width <= len) return s;
  in.charge(uint64_t(width));
  size_t sign = (!t.empty() && (t[0] == '+' || t[0] == '-')) ? 1 : 0;
  return Value(t.substr(0, sign) + std::string(size_t(width - len), '0') + t.substr(sign));
}

Value s_removeprefix(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader r(a, "removeprefix", {"prefix"});
  const std::string& p = req_str(r.get(0), "removeprefix");
  const std::string& t = s.as_string();
  return Value(t.compare(0, p.size(), p) == 0 && p.size() <= t.size() ? t.substr(p.size()) : t);
}
Value s_removesuffix(Interpreter&, const Value& s, CallArgs& a) {
  ArgReader r(a, "removesuffix", {"suffix"});
  const std::string& p = req_str(r.get(0), "removesuffix");
  const std::string& t = s.as_string();
  if (!p.empty() && p.size() <= t.size() && t.compare(t.size() - p.size(), p.size(), p) == 0)
    return Value(t.substr(0, t.size() - p.size()));
  return Value(t);
}

Value pad_impl(Interpreter& in, const Value& s, CallArgs& a, const char* fn, int mode) {
  ArgReader r(a, fn, {"width", "fillchar"});
  int64_t width = opt_int(r.get(0)).value_or(0);
  std::string fill = r.get(1) ? req_str(r.get(1), fn) : std::string(" ");
  if (unicode::length(fill) != 1) fail("The fill character must be exactly one character long");
  const std::string& t = s.as_string();
  int64_t len = int64_t(unicode::length(t));
  if (width <= len) return s;
  in.charge(uint64_t(width) * fill.size());
  int64_t total = width - len;
  int64_t left = mode == 0 ? 0 : mode == 1 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += t;
  for (int64_t i = left; i < total; ++i) out += fill;
  return Value(std::move(out));
}
Value s_ljust(Interpreter& in, const Value& s, CallArgs& a) { return pad_impl(in, s, a, "ljust", 0); }
Value s_rjust(Interpreter& in, const Value& s, CallArgs& a) { return pad_impl(in, s, a, "rjust", 1); }
Value s_center(Interpreter& in, const Value& s, CallArgs& a) { return pad_impl(in, s, a, "center", 2); }

Value s_partition(Interpreter&, const Value& s, CallArgs& a, bool reverse) {
  ArgReader r(a, reverse ? "rpartition" : "partition", {"sep"});
  const std::string& sep = req_str(r.get(0), "partition");
  if (sep.empty()) fail("empty separator");
  const std::string& t = s.as_string();
  size_t p = reverse ? t.rfind(sep) : t.find(sep);
  if (p == std::string::npos)
    return reverse ? Value::list({Value(""), Value(""), s}, true) : Value::list({s, Value(""), Value("")}, true);
  return Value::list({Value(t.substr(0, p)), Value(sep), Value(t.substr(p + sep.size()))}, true);
}
Value s_partition_l(Interpreter& in, const Value& s, CallArgs& a) { return s_partition(in, s, a, false); }
Value s_partition_r(Interpreter& in, const Value& s, CallArgs& a) { return s_partition(in, s, a, true); }

// ---- list ---------------------------------------------------------------------------------

Value l_count(Interpreter&, const Value& l, CallArgs& a) {
  ArgReader r(a, "count", {"value"});
  if (!r.get(0)) fail("count() takes exactly one argument (0 given)");
  int64_t n = 0;
  for (const auto& x : l.as_list()->items) n += values_equal(x, *r.get(0)) ? 1 : 0;
  return Value(n);
}

Value l_index(Interpreter&, const Value& l, CallArgs& a) {
  ArgReader r(a, "index", {"value"});
  if (!r.get(0)) fail("index() takes at least 1 argument (0 given)");
  const auto& items = l.as_list()->items;
  for (size_t i = 0; i < items.size(); ++i)
    if (values_equal(items[i], *r.get(0))) return Value(int64_t(i));
  fail(r.get(0)->repr(), " is not in list");
}

Value l_copy(Interpreter&, const Value& l, CallArgs& a) {
  ArgReader(a, "copy", {});
  return Value::list(l.as_list()->items, l.as_list()->is_tuple);
}

// ---- dict ---------------------------------------------------------------------------------

Value d_get(Interpreter&, const Value& d, CallArgs& a) {
  ArgReader r(a, "get", {"key", "default"});
  if (!r.get(0)) fail("get expected at least 1 argument, got 0");
  const Value& key = *r.get(0);
  if (key.is_list() || key.is_dict()) fail("unhashable type: '", key.type_name(), "'");
  if (const Value* v = d.as_dict()->find(key)) return *v;
  return r.get_or(1, Value::none());
}

Value d_items(Interpreter&, const Value& d, CallArgs& a) {
  ArgReader(a, "items", {});
  std::vector<Value> out;
  out.reserve(d.as_dict()->size());
  for (const auto& [k, v] : d.as_dict()->items()) out.push_back(Value::list({k, v}, true));
  return Value::list(std::move(out));
}

Value d_keys(Interpreter&, const Value& d, CallArgs& a) {
  ArgReader(a, "keys", {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.as_dict()->items()) out.push_back(k);
  return Value::list(std::move(out));
}

Value d_values(Interpreter&, const Value& d, CallArgs& a) {
  ArgReader(a, "values", {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.as_dict()->items()) out.push_back(v);
  return Value::list(std::move(out));
}

Value d_copy(Interpreter&, const Value& d, CallArgs& a) {
  ArgReader(a, "copy", {});
  return Value(std::make_shared<Dict>(*d.as_dict()));
}

const std::unordered_map<std::string_view, MethodFn>& string_methods() {
  static const std::unordered_map<std::string_view, MethodFn> t = {
      {"strip", s_strip}, {"lstrip", s_lstrip}, {"rstrip", s_rstrip}, {"split", s_split},
      {"rsplit", s_rsplit}, {"splitlines", s_splitlines}, {"startswith", s_startswith},
      {"endswith", s_endswith}, {"upper", s_upper}, {"lower", s_lower}, {"title", s_title},
      {"capitalize", s_capitalize}, {"swapcase", s_swapcase}, {"replace", s_replace},
      {"find", s_find}, {"rfind", s_rfind}, {"index", s_index}, {"rindex", s_rindex},
      {"count", s_count}, {"format", s_format}, {"join", s_join}, {"isdigit", s_isdigit},
      {"isalpha", s_isalpha}, {"isalnum", s_isalnum}, {"isspace", s_isspace},
      {"islower", s_islower}, {"isupper", s_isupper}, {"removeprefix", s_removeprefix},
      {"removesuffix", s_removesuffix}, {"ljust", s_ljust}, {"rjust", s_rjust},
      {"center", s_center}, {"partition", s_partition_l}, {"rpartition", s_partition_r},
      {"istitle", s_istitle}, {"casefold", s_casefold}, {"zfill", s_zfill},
  };
  return t;
}

const std::unordered_map<std::string_view, MethodFn>& list_methods() {
  static const std::unordered_map<std::string_view, MethodFn> t = {
      {"count", l_count}, {"index", l_index}, {"copy", l_copy}};
  return t;
}

const std::unordered_map<std::string_view, MethodFn>& dict_methods() {
  static const std::unordered_map<std::string_view, MethodFn> t = {
      {"get", d_get}, {"items", d_items}, {"keys", d_keys}, {"values", d_values}, {"copy", d_copy}};
  return t;
}

bool is_mutating(const Value& self, const std::string& name) {
  static const std::unordered_set<std::string_view> list_mut = {
      "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", "__setitem__"};
  static const std::unordered_set<std::string_view> dict_mut = {
      "pop", "popitem", "setdefault", "update", "clear", "__setitem__"};
  if (self.is_list()) return list_mut.count(name) != 0;
  if (self.is_dict()) return dict_mut.count(name) != 0;
  return false;
}

}  // namespace

std::optional<Value> find_method(const Value& self, const std::string& name) {
  const std::unordered_map<std::string_view, MethodFn>* table = nullptr;
  if (self.is_string()) table = &string_methods();
  else if (self.is_list() && !self.as_list()->generator) table = &list_methods();
  else if (self.is_dict()) table = &dict_methods();
  else return std::nullopt;
  auto it = table->find(name);
  if (it == table->end()) {
    if (is_mutating(self, name))
      return Value::undefined(str_cat("access to attribute '", name, "' of '", self.type_name(),
                                      "' object is unsafe."));
    return std::nullopt;
  }
  auto c = std::make_shared<Callable>();
  c->kind = Callable::Kind::method;
  c->name = name;
  MethodFn fn = it->second;
  c->fn = [fn, self](Interpreter& in, CallArgs& a) { return fn(in, self, a); };
  return Value(std::move(c));
}

}  // namespace brisk::jinja
