#include "runtime/schema_bounds.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace brisk {
namespace {

void decimal_normalize(Decimal& d) {
  size_t lead = 0;
  while (lead < d.digits.size() && d.digits[lead] == '0') ++lead;
  d.digits.erase(0, lead);
  while (!d.digits.empty() && d.digits.back() == '0') {
    d.digits.pop_back();
    ++d.exp;
  }
  if (d.digits.empty()) {
    d.neg = false;
    d.exp = 0;
  }
}

Decimal decimal_make(bool neg, std::string digits, int32_t exp) {
  Decimal d{.neg = neg, .digits = std::move(digits), .exp = exp};
  decimal_normalize(d);
  return d;
}

// digits + 1 (a string of decimal digits).
std::string digits_increment(std::string s) {
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '9') {
      ++s[i];
      return s;
    }
    s[i] = '0';
  }
  s.insert(s.begin(), '1');
  return s;
}

int decimal_compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.digits.empty() || b.digits.empty()) return a.digits.empty() ? (b.digits.empty() ? 0 : -1) : 1;
  const int64_t ka = int64_t(a.digits.size()) + a.exp, kb = int64_t(b.digits.size()) + b.exp;
  if (ka != kb) return ka < kb ? -1 : 1;
  const size_t n = std::max(a.digits.size(), b.digits.size());
  for (size_t i = 0; i < n; ++i) {
    const char x = i < a.digits.size() ? a.digits[i] : '0', y = i < b.digits.size() ? b.digits[i] : '0';
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

Decimal decimal_negated(Decimal d) {
  if (!d.digits.empty()) d.neg = !d.neg;
  return d;
}

// The integer nearest to `d` upwards (ceil) or downwards (floor).
Decimal decimal_round_integer(const Decimal& d, bool up) {
  if (d.exp >= 0) return d;
  const int64_t n = int64_t(d.digits.size()) + d.exp;  // integer digits (<= 0: none)
  std::string trunc = n > 0 ? d.digits.substr(0, size_t(n)) : std::string(1, '0');
  // d has a non-zero fraction (no trailing zeros): away from zero when rounding that way.
  const bool away = up != d.neg;
  return decimal_make(d.neg, away ? digits_increment(trunc) : trunc, 0);
}

// d + delta for an integer d and delta in {-1, +1}.
Decimal decimal_add_one(const Decimal& d, int delta) {
  std::string mag = d.digits + std::string(size_t(std::max(0, d.exp)), '0');
  if (mag.empty()) return decimal_make(delta < 0, "1", 0);
  const bool grows = (delta > 0) != d.neg;  // the magnitude grows
  if (grows) return decimal_make(d.neg, digits_increment(mag), 0);
  for (size_t i = mag.size(); i-- > 0;) {  // magnitude - 1 (>= 1)
    if (mag[i] != '0') {
      --mag[i];
      break;
    }
    mag[i] = '9';
  }
  return decimal_make(d.neg, mag, 0);
}

struct MagnitudeBound {
  bool set = false;
  Decimal value;
  bool excl = false;
};

// Whether some x in S (from a to b, b included when `b_closed`) is within [lo, hi].
bool interval_meets(const Decimal& a, const Decimal& b, bool b_closed, const MagnitudeBound& lo, const MagnitudeBound& hi) {
  // Lower end: the larger of a (included) and lo.
  Decimal low = a;
  bool low_open = false;
  if (lo.set) {
    const int c = decimal_compare(lo.value, a);
    if (c > 0 || (c == 0 && lo.excl)) {
      low = lo.value;
      low_open = lo.excl;
    }
  }
  Decimal high = b;
  bool high_open = !b_closed;
  if (hi.set) {
    const int c = decimal_compare(hi.value, b);
    if (c < 0 || (c == 0 && hi.excl)) {
      high = hi.value;
      high_open = hi.excl;
    }
  }
  const int c = decimal_compare(low, high);
  return c < 0 || (c == 0 && !low_open && !high_open);
}

// The bounds on the magnitude m of a number of sign `neg` (value = neg ? -m : m); nullopt
// when no magnitude fits.
std::optional<std::pair<MagnitudeBound, MagnitudeBound>> magnitude_bounds(const NumberBounds& b, bool neg) {
  MagnitudeBound lo{.set = true, .value = Decimal{}, .excl = false};
  MagnitudeBound hi;
  const Decimal zero;
  if (!neg) {
    if (b.has_lo && decimal_compare(b.lo, zero) >= 0) lo = {.set = true, .value = b.lo, .excl = b.lo_excl};
    if (b.has_hi) {
      if (decimal_compare(b.hi, zero) < 0 || (b.hi_excl && decimal_compare(b.hi, zero) == 0)) return std::nullopt;
      hi = {.set = true, .value = b.hi, .excl = b.hi_excl};
    }
  } else {
    if (b.has_hi && decimal_compare(b.hi, zero) <= 0) lo = {.set = true, .value = decimal_negated(b.hi), .excl = b.hi_excl};
    if (b.has_lo) {
      if (decimal_compare(b.lo, zero) > 0 || (b.lo_excl && decimal_compare(b.lo, zero) == 0)) return std::nullopt;
      hi = {.set = true, .value = decimal_negated(b.lo), .excl = b.lo_excl};
    }
  }
  return std::make_pair(lo, hi);
}

}  // namespace

bool decimal_parse(std::string_view t, Decimal& out) {
  size_t i = 0;
  Decimal d;
  if (i < t.size() && t[i] == '-') d.neg = true, ++i;
  const size_t int_start = i;
  while (i < t.size() && std::isdigit((unsigned char)t[i])) d.digits += t[i++];
  if (i == int_start) return false;
  if (i < t.size() && t[i] == '.') {
    ++i;
    const size_t frac_start = i;
    while (i < t.size() && std::isdigit((unsigned char)t[i])) d.digits += t[i++], --d.exp;
    if (i == frac_start) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) eneg = t[i++] == '-';
    int64_t e = 0;
    const size_t exp_start = i;
    while (i < t.size() && std::isdigit((unsigned char)t[i]) && e < 100000) e = e * 10 + (t[i++] - '0');
    if (i == exp_start) return false;
    d.exp += int32_t(eneg ? -e : e);
  }
  if (i != t.size()) return false;
  decimal_normalize(d);
  out = std::move(d);
  return true;
}

Decimal decimal_from_json(const nlohmann::json& number) {
  BRISK_CHECK(number.is_number(), "expected a number, got ", number.type_name());
  if (number.is_number_float()) BRISK_CHECK(std::isfinite(number.get<double>()), "expected a finite number");
  Decimal d;
  BRISK_CHECK(decimal_parse(number.dump(), d), "cannot read the number ", number.dump());
  return d;
}

int decimal_compare(const Decimal& a, const Decimal& b) {
  const bool a_neg = a.neg && !a.digits.empty(), b_neg = b.neg && !b.digits.empty();
  if (a_neg != b_neg) return a_neg ? -1 : 1;
  const int m = decimal_compare_magnitude(a, b);
  return a_neg ? -m : m;
}

bool number_bounds_finish(NumberBounds& b) {
  if (b.integer) {
    if (b.has_lo) {
      const bool whole = b.lo.exp >= 0 || b.lo.digits.empty();
      b.lo = whole ? (b.lo_excl ? decimal_add_one(b.lo, +1) : b.lo) : decimal_round_integer(b.lo, true);
      b.lo_excl = false;
    }
    if (b.has_hi) {
      const bool whole = b.hi.exp >= 0 || b.hi.digits.empty();
      b.hi = whole ? (b.hi_excl ? decimal_add_one(b.hi, -1) : b.hi) : decimal_round_integer(b.hi, false);
      b.hi_excl = false;
    }
  }
  if (b.has_lo && b.has_hi) {
    const int c = decimal_compare(b.lo, b.hi);
    if (c > 0 || (c == 0 && (b.lo_excl || b.hi_excl))) return false;
  }
  NumberPrefix positive, negative;
  negative.neg = true;
  return number_prefix_feasible(b, positive) || number_prefix_feasible(b, negative);
}

bool number_prefix_feasible(const NumberBounds& b, const NumberPrefix& p) {
  if (!b.any()) return true;
  const auto mb = magnitude_bounds(b, p.neg);
  if (!mb) return false;
  const auto& [lo, hi] = *mb;
  const int max_int = b.integer ? kMaxBoundedIntegerDigits : kMaxIntegerDigits;
  const std::string I(p.int_digits), F(p.frac_digits);
  if (I.empty()) return interval_meets(Decimal{}, decimal_make(false, "1", max_int), false, lo, hi);  // [0, 10^max_int)
  if (p.dot) {
    const int32_t f = int32_t(F.size());
    const Decimal v = decimal_make(false, I + F, -f);
    if (f >= kMaxFractionDigits) return interval_meets(v, v, true, lo, hi);
    return interval_meets(v, decimal_make(false, digits_increment(I + F), -f), false, lo, hi);
  }
  if (I == "0") return b.integer ? interval_meets(Decimal{}, Decimal{}, true, lo, hi) : interval_meets(Decimal{}, decimal_make(false, "1", 0), false, lo, hi);
  for (int32_t k = 0; int32_t(I.size()) + k <= max_int; ++k) {
    const Decimal a = decimal_make(false, I, k);
    if (hi.set && decimal_compare(a, hi.value) > 0) break;
    const bool ok = b.integer ? interval_meets(a, decimal_make(false, I + std::string(size_t(k), '9'), 0), true, lo, hi)
                              : interval_meets(a, decimal_make(false, digits_increment(I), k), false, lo, hi);
    if (ok) return true;
  }
  return false;
}

bool number_prefix_in_bounds(const NumberBounds& b, const NumberPrefix& p) {
  if (p.int_digits.empty() || (p.dot && p.frac_digits.empty())) return false;
  const Decimal v = decimal_make(p.neg, std::string(p.int_digits) + std::string(p.frac_digits), -int32_t(p.frac_digits.size()));
  if (b.has_lo) {
    const int c = decimal_compare(v, b.lo);
    if (c < 0 || (c == 0 && b.lo_excl)) return false;
  }
  if (b.has_hi) {
    const int c = decimal_compare(v, b.hi);
    if (c > 0 || (c == 0 && b.hi_excl)) return false;
  }
  return true;
}

}  // namespace brisk
