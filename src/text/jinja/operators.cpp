// Python semantics of the Jinja operators: int/float arithmetic with floor division and modulo
// following the divisor's sign, str/list concatenation and repetition, `~` (str of both),
// `in`, slicing with negative indices and steps, and the two string-formatting operators.
#include <cmath>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/strings.h"
#include "text/jinja/unicode.h"

namespace brisk::jinja {

namespace {

[[noreturn]] void unsupported(Op op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail(a.undefined_hint().empty() ? "value is undefined" : a.undefined_hint());
  if (b.is_undefined()) fail(b.undefined_hint().empty() ? "value is undefined" : b.undefined_hint());
  fail("unsupported operand type(s) for ", op_symbol(op), ": '", a.type_name(), "' and '", b.type_name(), "'");
}

bool is_int_like(const Value& v) { return v.is_int() || v.is_bool(); }

int64_t checked_op(char op, int64_t a, int64_t b) {
  int64_t r = 0;
  bool overflow = op == '+' ? __builtin_add_overflow(a, b, &r)
                  : op == '-' ? __builtin_sub_overflow(a, b, &r)
                              : __builtin_mul_overflow(a, b, &r);
  if (overflow) fail("integer overflow");
  return r;
}

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    uint64_t total = uint64_t(n) * s.size();
    if (s.size() && total / s.size() != uint64_t(n)) fail("string repetition too large");
    in.charge(total);
    std::string out;
    out.reserve(total);
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const auto& l = *seq.as_list();
  uint64_t total = uint64_t(n) * l.items.size();
  in.charge(total * 16);
  std::vector<Value> out;
  out.reserve(total);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), l.items.begin(), l.items.end());
  return Value::list(std::move(out), l.is_tuple);
}

bool is_plain_list(const Value& v) { return v.is_list() && !v.as_list()->generator; }

}  // namespace

Value binary_op(Interpreter& in, Op op, const Value& a, const Value& b) {
  if (op == Op::concat) {
    if (a.is_string() && b.is_string()) in.charge(a.as_string().size() + b.as_string().size());
    std::string s;
    a.append_str(s);
    b.append_str(s);
    in.charge(s.size());
    return Value(std::move(s));
  }
  bool numbers = a.is_number() && b.is_number();
  bool ints = is_int_like(a) && is_int_like(b);
  if (op == Op::add) {
    if (ints) return Value(checked_op('+', a.int_value(), b.int_value()));
    if (numbers) return Value(a.number_value() + b.number_value());
    if (a.is_string() && b.is_string()) {
      in.charge(a.as_string().size() + b.as_string().size());
      if (a.is_safe() || b.is_safe()) {
        // Markup + str escapes the plain side (both orders, Markup being a str subclass).
        std::string l = a.is_safe() ? a.as_string() : pystr::html_escape(a.as_string());
        std::string r = b.is_safe() ? b.as_string() : pystr::html_escape(b.as_string());
        return Value::markup(l + r);
      }
      return Value(a.as_string() + b.as_string());
    }
    if (is_plain_list(a) && is_plain_list(b) && a.as_list()->is_tuple == b.as_list()->is_tuple) {
      std::vector<Value> items = a.as_list()->items;
      const auto& more = b.as_list()->items;
      in.charge((items.size() + more.size()) * 16);
      items.insert(items.end(), more.begin(), more.end());
      return Value::list(std::move(items), a.as_list()->is_tuple);
    }
    if (a.is_list() && b.is_list())
      fail("can only concatenate ", a.type_name(), " (not \"", b.type_name(), "\") to ", a.type_name());
    if (a.is_string() && !b.is_undefined())
      fail("can only concatenate str (not \"", b.type_name(), "\") to str");
    unsupported(op, a, b);
  }
  if (op == Op::sub) {
    if (ints) return Value(checked_op('-', a.int_value(), b.int_value()));
    if (numbers) return Value(a.number_value() - b.number_value());
    unsupported(op, a, b);
  }
  if (op == Op::mul) {
    if (ints) return Value(checked_op('*', a.int_value(), b.int_value()));
    if (numbers) return Value(a.number_value() * b.number_value());
    if ((a.is_string() || is_plain_list(a)) && is_int_like(b)) return repeat(in, a, b.int_value());
    if ((b.is_string() || is_plain_list(b)) && is_int_like(a)) return repeat(in, b, a.int_value());
    unsupported(op, a, b);
  }
  if (op == Op::div) {
    if (!numbers) unsupported(op, a, b);
    if (b.number_value() == 0) fail("division by zero");
    return Value(a.number_value() / b.number_value());
  }
  if (op == Op::floordiv) {
    if (!numbers) unsupported(op, a, b);
    if (ints) {
      int64_t x = a.int_value(), y = b.int_value();
      if (y == 0) fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value(q);
    }
    if (b.number_value() == 0) fail("float floor division by zero");
    return Value(std::floor(a.number_value() / b.number_value()));
  }
  if (op == Op::mod) {
    if (a.is_string()) return Value(percent_format(in, a.as_string(), b));
    if (!numbers) unsupported(op, a, b);
    if (ints) {
      int64_t x = a.int_value(), y = b.int_value();
      if (y == 0) fail("integer division or modulo by zero");
      if (y == -1) return Value(int64_t(0));
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    if (b.number_value() == 0) fail("float modulo");
    return Value(py_fmod(a.number_value(), b.number_value()));
  }
  if (op == Op::pow) {
    if (!numbers) unsupported(op, a, b);
    if (ints && b.int_value() >= 0) {
      int64_t base = a.int_value(), e = b.int_value(), r = 1;
      while (e > 0) {
        if (e & 1) r = checked_op('*', r, base);
        e >>= 1;
        if (e > 0) base = checked_op('*', base, base);
      }
      return Value(r);
    }
    if (a.number_value() == 0 && b.number_value() < 0)
      fail("0.0 cannot be raised to a negative power");
    return Value(std::pow(a.number_value(), b.number_value()));
  }
  fail("unknown operator ", op_symbol(op));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::undefined: return false;
    case Value::Kind::string:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not ", item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::list:
      for (const auto& v : iterate(container))
        if (values_equal(v, item)) return true;
      return false;
    case Value::Kind::dict:
      if (item.is_list() || item.is_dict()) fail("unhashable type: '", item.type_name(), "'");
      return container.as_dict()->find(item) != nullptr;
    default:
      fail("argument of type '", container.type_name(), "' is not iterable");
  }
}

namespace {

// Python's PySlice_AdjustIndices: fills start/stop/step for a sequence of length n.
void slice_indices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v,
                   int64_t& start, int64_t& stop, int64_t& step) {
  auto as_index = [](const Value& v) -> int64_t {
    if (!(v.is_int() || v.is_bool()))
      fail("slice indices must be integers or None, not ", v.type_name());
    return v.int_value();
  };
  step = step_v.is_none() ? 1 : as_index(step_v);
  if (step == 0) fail("slice step cannot be zero");
  if (step == INT64_MIN) step = -INT64_MAX;
  auto adjust = [&](const Value& v, int64_t dflt) -> int64_t {
    if (v.is_none()) return dflt;
    int64_t i = as_index(v);
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  start = adjust(start_v, step < 0 ? n - 1 : 0);
  stop = adjust(stop_v, step < 0 ? -1 : n);
}

template <class F>
void for_slice(int64_t start, int64_t stop, int64_t step, F&& f) {
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) f(i);
  } else {
    for (int64_t i = start; i > stop; i += step) f(i);
  }
}

}  // namespace

Value slice_value(const Value& v, const Value& start_v, const Value& stop_v, const Value& step_v) {
  int64_t start, stop, step;
  if (v.is_string()) {
    const std::string& s = v.as_string();
    bool ascii = true;
    for (char c : s)
      if (static_cast<unsigned char>(c) >= 0x80) { ascii = false; break; }
    if (ascii) {
      slice_indices(int64_t(s.size()), start_v, stop_v, step_v, start, stop, step);
      if (step == 1) return Value(start < stop ? s.substr(size_t(start), size_t(stop - start)) : std::string());
      std::string out;
      for_slice(start, stop, step, [&](int64_t i) { out += s[size_t(i)]; });
      return Value(std::move(out));
    }
    auto offs = unicode::offsets(s);
    int64_t n = int64_t(offs.size()) - 1;
    slice_indices(n, start_v, stop_v, step_v, start, stop, step);
    std::string out;
    for_slice(start, stop, step, [&](int64_t i) {
      out.append(s, offs[size_t(i)], offs[size_t(i) + 1] - offs[size_t(i)]);
    });
    return Value(std::move(out));
  }
  if (v.is_list() && !v.as_list()->generator) {
    const auto& items = v.as_list()->items;
    slice_indices(int64_t(items.size()), start_v, stop_v, step_v, start, stop, step);
    std::vector<Value> out;
    for_slice(start, stop, step, [&](int64_t i) { out.push_back(items[size_t(i)]); });
    return Value::list(std::move(out), v.as_list()->is_tuple);
  }
  fail("'", v.type_name(), "' object is not subscriptable");
}

// ---- formatting ---------------------------------------------------------------------------

namespace {

struct Spec {
  std::string flags;
  int width = -1;
  int precision = -1;
};

std::string pad(std::string s, const Spec& spec, bool numeric) {
  if (spec.width < 0) return s;
  size_t len = unicode::length(s);
  if (len >= size_t(spec.width)) return s;
  size_t fill = size_t(spec.width) - len;
  if (spec.flags.find('-') != std::string::npos) return s + std::string(fill, ' ');
  if (numeric && spec.flags.find('0') != std::string::npos) {
    size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) ? 1 : 0;
    return s.substr(0, sign) + std::string(fill, '0') + s.substr(sign);
  }
  return std::string(fill, ' ') + s;
}

std::string format_one(char conv, const Spec& spec, const Value& v) {
  switch (conv) {
    case 's': {
      std::string s = v.str();
      if (spec.precision >= 0) {
        auto offs = unicode::offsets(s);
        if (size_t(spec.precision) + 1 < offs.size()) s.resize(offs[size_t(spec.precision)]);
      }
      return pad(s, spec, false);
    }
    case 'r': return pad(v.repr(), spec, false);
    case 'd': case 'i': case 'u': {
      if (!v.is_number()) fail("%", conv, " format: a real number is required, not ", v.type_name());
      int64_t x = v.is_float() ? int64_t(std::trunc(v.as_float())) : v.int_value();
      std::string s = std::to_string(x);
      if (x >= 0 && spec.flags.find('+') != std::string::npos) s = "+" + s;
      else if (x >= 0 && spec.flags.find(' ') != std::string::npos) s = " " + s;
      return pad(s, spec, true);
    }
    case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
      if (!v.is_number()) fail("must be real number, not ", v.type_name());
      std::string fmt = "%";
      for (char f : spec.flags)
        if (f == '+' || f == ' ' || f == '#') fmt += f;
      fmt += "." + std::to_string(spec.precision < 0 ? 6 : std::min(spec.precision, 100));
      fmt += conv;
      char buf[512];
      std::snprintf(buf, sizeof(buf), fmt.c_str(), v.number_value());
      return pad(buf, spec, true);
    }
    case 'x': case 'X': case 'o': {
      if (!(v.is_int() || v.is_bool())) fail("%", conv, " format: an integer is required, not ", v.type_name());
      int64_t x = v.int_value();
      char buf[64];
      unsigned long long mag = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
      std::snprintf(buf, sizeof(buf), conv == 'x' ? "%llx" : conv == 'X' ? "%llX" : "%llo", mag);
      return pad(std::string(x < 0 ? "-" : "") + buf, spec, true);
    }
    case 'c': {
      if (v.is_string()) return pad(v.as_string(), spec, false);
      if (!v.is_int()) fail("%c requires int or char");
      std::string s;
      unicode::append_utf8(s, char32_t(v.as_int()));
      return pad(s, spec, false);
    }
    default: fail("unsupported format character '", std::string(1, conv), "'");
  }
}

}  // namespace

std::string percent_format(Interpreter& in, const std::string& fmt, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_list() && args.as_list()->is_tuple) positional = args.as_list()->items;
  else if (args.is_dict()) mapping = args.as_dict().get();
  else positional.push_back(args);
  size_t next_arg = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* value = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) fail("format requires a mapping");
      value = mapping->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!value) fail("KeyError: ", fmt.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    Spec spec;
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) spec.flags += fmt[i++];
    auto read_int = [&]() {
      int v = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') v = std::min(v * 10 + (fmt[i++] - '0'), 10000);
      return v;
    };
    if (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') spec.width = read_int();
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = read_int();
    }
    if (i >= fmt.size()) fail("incomplete format");
    if (!value) {
      if (mapping) value = &args;
      else if (next_arg < positional.size()) value = &positional[next_arg++];
      else fail("not enough arguments for format string");
    }
    out += format_one(fmt[i], spec, *value);
    in.charge(out.size());
  }
  if (!mapping && next_arg < positional.size())
    fail("not all arguments converted during string formatting");
  return out;
}

std::string brace_format(Interpreter& in, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conversion = 0;
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) fail("Replacement index ", auto_index, " out of range");
      v = &args.positional[auto_index++];
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      size_t idx = std::stoul(field.substr(0, 9));
      if (idx >= args.positional.size()) fail("Replacement index ", idx, " out of range");
      v = &args.positional[idx];
    } else {
      for (const auto& [k, val] : args.keywords)
        if (k == field) v = &val;
      if (!v) fail("KeyError: '", field, "'");
    }
    std::string text = conversion == 'r' ? v->repr() : v->str();
    if (!spec.empty()) {
      // Width and alignment only ("<10", ">5", "^8", "10").
      char align = v->is_number() ? '>' : '<';
      size_t p = 0;
      if (!spec.empty() && (spec[0] == '<' || spec[0] == '>' || spec[0] == '^')) align = spec[p++];
      int width = 0;
      while (p < spec.size() && spec[p] >= '0' && spec[p] <= '9') width = std::min(width * 10 + (spec[p++] - '0'), 10000);
      if (p != spec.size()) fail("unsupported format spec '", spec, "'");
      size_t len = unicode::length(text);
      if (size_t(width) > len) {
        size_t fill = size_t(width) - len;
        if (align == '<') text += std::string(fill, ' ');
        else if (align == '>') text = std::string(fill, ' ') + text;
        else text = std::string(fill / 2, ' ') + text + std::string(fill - fill / 2, ' ');
      }
    }
    out += text;
    in.charge(out.size());
  }
  return out;
}

}  // namespace brisk::jinja
