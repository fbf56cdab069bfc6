// Overflow-safe size arithmetic for parsing untrusted files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

namespace brisk {

// Returns std::nullopt on overflow.
template <class T>
constexpr std::optional<T> checked_add(T a, T b) {
  T r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

template <class T>
constexpr std::optional<T> checked_mul(T a, T b) {
  T r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// True when [offset, offset + size) lies inside [0, limit).
constexpr bool range_within(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

}  // namespace brisk
