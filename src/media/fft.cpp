#include "media/fft.h"

#include <cmath>

#include "core/error.h"

namespace brisk::media {

namespace {
using cd = std::complex<double>;
}

FftPlan::FftPlan(int32_t n) : n_(n) {
  BRISK_CHECK(n >= 1 && n <= (1 << 24), "fft: length ", n, " out of range [1, 2^24]");
  int32_t m = n;
  for (int32_t r : {4, 2, 3, 5}) {
    while (m % r == 0) {
      factors_.push_back(r);
      m /= r;
    }
  }
  for (int32_t p = 7; m > 1; p += 2) {
    while (m % p == 0) {
      factors_.push_back(p);
      m /= p;
    }
    if (int64_t(p) * p > m && m > 1) {
      factors_.push_back(m);
      m = 1;
    }
  }
  twiddle_.resize(size_t(n));
  for (int32_t k = 0; k < n; ++k) {
    const double a = -2.0 * M_PI * double(k) / double(n);
    twiddle_[size_t(k)] = cd(std::cos(a), std::sin(a));
  }
}

// Decimation in time: the n inputs in[0], in[stride], ... split into r interleaved sequences of
// length m = n / r, each transformed into out[q * m, (q + 1) * m); then for every k < m the r
// values out[q * m + k] combine through a radix-r butterfly with twiddles w^(q k), where w is
// the n-th root of unity (twiddle_ is indexed in units of n_ / n).
void FftPlan::transform(const cd* in, cd* out, int32_t n, int32_t stride, size_t fi) const {
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  const int32_t r = factors_[fi];
  const int32_t m = n / r;
  for (int32_t q = 0; q < r; ++q) transform(in + size_t(q) * size_t(stride), out + size_t(q) * size_t(m), m, stride * r, fi + 1);
  const int32_t tw_step = n_ / n;  // twiddle_[j * tw_step] = exp(-2 pi i j / n)
  auto tw = [&](int64_t j) { return twiddle_[size_t((j * tw_step) % n_)]; };
  if (r == 2) {
    for (int32_t k = 0; k < m; ++k) {
      const cd a = out[k], b = out[k + m] * tw(k);
      out[k] = a + b;
      out[k + m] = a - b;
    }
  } else if (r == 4) {
    const cd mi(0.0, -1.0);  // exp(-i pi / 2)
    for (int32_t k = 0; k < m; ++k) {
      const cd a0 = out[k], a1 = out[k + m] * tw(k), a2 = out[k + 2 * m] * tw(2 * int64_t(k)),
               a3 = out[k + 3 * m] * tw(3 * int64_t(k));
      const cd s02 = a0 + a2, d02 = a0 - a2, s13 = a1 + a3, d13 = (a1 - a3) * mi;
      out[k] = s02 + s13;
      out[k + m] = d02 + d13;
      out[k + 2 * m] = s02 - s13;
      out[k + 3 * m] = d02 - d13;
    }
  } else {
    // General radix r (3, 5 and other primes): y[p] = sum_q a_q * exp(-2 pi i p q / r).
    cd a_small[32], roots_small[32];
    std::vector<cd> a_big, roots_big;
    if (r > 32) {
      a_big.resize(size_t(r));
      roots_big.resize(size_t(r));
    }
    cd* a = r > 32 ? a_big.data() : a_small;
    cd* roots = r > 32 ? roots_big.data() : roots_small;
    for (int32_t j = 0; j < r; ++j) roots[size_t(j)] = tw(int64_t(j) * m);  // exp(-2 pi i j / r)
    for (int32_t k = 0; k < m; ++k) {
      for (int32_t q = 0; q < r; ++q) a[size_t(q)] = out[k + q * m] * tw(int64_t(q) * k);
      for (int32_t p = 0; p < r; ++p) {
        cd s = a[0];
        for (int32_t q = 1; q < r; ++q) s += a[size_t(q)] * roots[size_t((int64_t(p) * q) % r)];
        out[k + p * m] = s;
      }
    }
  }
}

void FftPlan::forward(const cd* in, cd* out) const { transform(in, out, n_, 1, 0); }

void dft_reference(const cd* in, cd* out, int32_t n) {
  for (int32_t k = 0; k < n; ++k) {
    cd s = 0.0;
    for (int32_t j = 0; j < n; ++j) {
      const double a = -2.0 * M_PI * double((int64_t(k) * j) % n) / double(n);
      s += in[j] * cd(std::cos(a), std::sin(a));
    }
    out[k] = s;
  }
}

}  // namespace brisk::media
