// Global functions available to every template: Jinja2's range, dict, namespace, joiner and
// cycler, and the two that transformers adds for chat templates: raise_exception(message)
// (fails the render with the message) and strftime_now(format) (local time, C strftime).
#include <ctime>
#include <unordered_map>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"

namespace brisk::jinja {

namespace {

constexpr int64_t kMaxRange = 1 << 20;

Value g_range(Interpreter& in, CallArgs& a) {
  if (!a.keywords.empty()) fail("range() takes no keyword arguments");
  auto as_int = [](const Value& v) {
    if (!(v.is_int() || v.is_bool())) fail("'", v.type_name(), "' object cannot be interpreted as an integer");
    return v.int_value();
  };
  int64_t start = 0, stop = 0, step = 1;
  switch (a.positional.size()) {
    case 1: stop = as_int(a.positional[0]); break;
    case 2: start = as_int(a.positional[0]); stop = as_int(a.positional[1]); break;
    case 3:
      start = as_int(a.positional[0]);
      stop = as_int(a.positional[1]);
      step = as_int(a.positional[2]);
      break;
    default: fail("range expected 1 to 3 arguments, got ", a.positional.size());
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // Number of items, computed before building anything (in 128 bits: no overflow).
  __int128 span = step > 0 ? (__int128(stop) - start + step - 1) / step : (__int128(start) - stop - step - 1) / -step;
  if (span > kMaxRange) fail("range() too large (more than ", kMaxRange, " items)");
  std::vector<Value> out;
  out.reserve(span > 0 ? size_t(span) : 0);
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (int64_t(out.size()) >= kMaxRange) fail("range() too large (more than ", kMaxRange, " items)");
    out.emplace_back(i);
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  in.charge(out.size() * 16);
  return Value::list(std::move(out));
}

Value g_dict(Interpreter&, CallArgs& a) {
  auto d = std::make_shared<Dict>();
  if (a.positional.size() > 1) fail("dict expected at most 1 argument, got ", a.positional.size());
  if (a.positional.size() == 1) {
    const Value& src = a.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.as_dict()->items()) d->set(k, v);
    } else {
      for (const auto& pair : iterate(src)) {
        auto kv = iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has length ", kv.size(), "; 2 is required");
        if (kv[0].is_list() || kv[0].is_dict()) fail("unhashable type: '", kv[0].type_name(), "'");
        d->set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keywords) d->set(Value(k), v);
  return Value(std::move(d));
}

Value g_namespace(Interpreter& in, CallArgs& a) {
  auto ns = std::make_shared<Namespace>();
  in.track(ns);
  if (a.positional.size() > 1) fail("namespace() takes at most one positional argument");
  if (a.positional.size() == 1) {
    if (!a.positional[0].is_dict()) fail("namespace() positional argument must be a mapping");
    for (const auto& [k, v] : a.positional[0].as_dict()->items()) ns->attrs.set(k, v);
  }
  for (const auto& [k, v] : a.keywords) ns->attrs.set(Value(k), v);
  return Value(std::move(ns));
}

Value g_joiner(Interpreter&, CallArgs& a) {
  ArgReader r(a, "joiner", {"sep"});
  std::string sep = r.get_or(0, Value(", ")).str();
  auto used = std::make_shared<bool>(false);
  auto c = std::make_shared<Callable>();
  c->name = "joiner";
  c->fn = [sep, used](Interpreter&, CallArgs&) -> Value {
    if (!*used) {
      *used = true;
      return Value(std::string());
    }
    return Value(sep);
  };
  return Value(std::move(c));
}

Value g_cycler(Interpreter&, CallArgs& a) {
  if (a.positional.empty()) fail("cycler() needs at least one item");
  auto items = std::make_shared<std::vector<Value>>(a.positional);
  auto pos = std::make_shared<size_t>(0);
  auto c = std::make_shared<Callable>();
  c->name = "cycler";
  auto attrs = std::make_shared<Dict>();
  auto next = std::make_shared<Callable>();
  next->name = "next";
  next->fn = [items, pos](Interpreter&, CallArgs&) -> Value {
    Value v = (*items)[*pos];
    *pos = (*pos + 1) % items->size();
    return v;
  };
  auto reset = std::make_shared<Callable>();
  reset->name = "reset";
  reset->fn = [pos](Interpreter&, CallArgs&) -> Value {
    *pos = 0;
    return Value::none();
  };
  attrs->set(Value("next"), Value(next));
  attrs->set(Value("reset"), Value(reset));
  attrs->set(Value("items"), Value::list(*items));
  c->attrs = attrs;
  c->fn = [](Interpreter&, CallArgs&) -> Value { fail("'Cycler' object is not callable"); };
  return Value(std::move(c));
}

Value g_raise_exception(Interpreter&, CallArgs& a) {
  ArgReader r(a, "raise_exception", {"message"});
  fail(r.get_or(0, Value("")).str());
}

Value g_strftime_now(Interpreter&, CallArgs& a) {
  ArgReader r(a, "strftime_now", {"format"});
  if (!r.get(0) || !r.get(0)->is_string()) fail("strftime_now() needs a format string");
  const std::string& fmt = r.get(0)->as_string();
  if (fmt.empty()) return Value(std::string());
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::string buf(fmt.size() * 8 + 64, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  if (n == 0) fail("strftime_now(): format produced no output or is too long");
  buf.resize(n);
  return Value(std::move(buf));
}

Value make(const char* name, Value (*fn)(Interpreter&, CallArgs&)) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = fn;
  return Value(std::move(c));
}

}  // namespace

const Value* find_global_function(std::string_view name) {
  static const std::unordered_map<std::string_view, Value> table = {
      {"range", make("range", g_range)},
      {"dict", make("dict", g_dict)},
      {"namespace", make("namespace", g_namespace)},
      {"joiner", make("joiner", g_joiner)},
      {"cycler", make("cycler", g_cycler)},
      {"raise_exception", make("raise_exception", g_raise_exception)},
      {"strftime_now", make("strftime_now", g_strftime_now)},
  };
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace brisk::jinja
