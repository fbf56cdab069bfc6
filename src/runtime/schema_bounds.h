// Numeric bounds of a JSON Schema (minimum, maximum, exclusiveMinimum, exclusiveMaximum)
// decided digit by digit: whether the number written so far can still end inside the bounds.
//
// Values are exact decimals (the bounds as their JSON spelling, the number as its digits), so
// no floating-point rounding enters the test. A bounded number is written without exponent;
// an integer's bounds are made inclusive integers first (exclusiveMinimum 2.5 -> minimum 3).
// A non-integer is held to kMaxIntegerDigits / kMaxFractionDigits so that the value a reader
// parses as a double cannot round across a bound.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace brisk {

// (neg ? -1 : 1) * digits * 10^exp; digits without leading or trailing zeros ("" is zero).
struct Decimal {
  bool neg = false;
  std::string digits;
  int32_t exp = 0;
};

// The exact value of a JSON number as nlohmann spells it; throws brisk::Error for non-numbers.
Decimal decimal_from_json(const nlohmann::json& number);
// Parses "[-]digits[.digits][e[+-]digits]"; false when malformed.
bool decimal_parse(std::string_view text, Decimal& out);
int decimal_compare(const Decimal& a, const Decimal& b);  // -1, 0, 1

struct NumberBounds {
  bool has_lo = false, has_hi = false;
  bool lo_excl = false, hi_excl = false;  // always false once made integer bounds
  Decimal lo, hi;
  bool integer = false;                   // bounds of an integer (inclusive integers)
  bool any() const { return has_lo || has_hi; }
};

// Combines minimum / exclusiveMinimum (the tighter one wins) etc.; for integers makes the
// bounds inclusive integers. Returns false when no value can satisfy them.
bool number_bounds_finish(NumberBounds& b);

// A number being written: its sign, integer digits, whether '.' was written, fraction digits.
struct NumberPrefix {
  bool neg = false;
  std::string_view int_digits;
  bool dot = false;
  std::string_view frac_digits;
};

constexpr int kMaxIntegerDigits = 15;   // bounded non-integers (integers: kMaxBoundedIntegerDigits)
constexpr int kMaxFractionDigits = 12;
constexpr int kMaxBoundedIntegerDigits = 38;

// Whether some continuation of `p` (possibly none) is a number within the bounds.
bool number_prefix_feasible(const NumberBounds& b, const NumberPrefix& p);
// Whether `p`, ended here, is within the bounds.
bool number_prefix_in_bounds(const NumberBounds& b, const NumberPrefix& p);

}  // namespace brisk
