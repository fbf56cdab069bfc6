// Complex discrete Fourier transform of any length, in double precision:
//   X[k] = sum_n x[n] * exp(-2 pi i k n / N)
// Mixed-radix Cooley-Tukey (decimation in time) over the factors of N: radix-4, 2, 3 and 5
// butterflies with precomputed twiddles, and a direct DFT butterfly for any other prime factor
// (fine while primes are small; the speech front end uses N = 400 = 4 * 4 * 5 * 5). A plan is
// built once per length and is read-only afterwards, so one plan serves many threads.
#pragma once
#include <complex>
#include <cstdint>
#include <vector>

namespace brisk::media {

class FftPlan {
 public:
  explicit FftPlan(int32_t n);
  int32_t size() const { return n_; }
  // out := DFT(in); in and out hold size() values and must not overlap.
  void forward(const std::complex<double>* in, std::complex<double>* out) const;

 private:
  void transform(const std::complex<double>* in, std::complex<double>* out, int32_t n, int32_t stride,
                 size_t factor_index) const;
  int32_t n_ = 0;
  std::vector<int32_t> factors_;             // radices, outermost first; their product is n_
  std::vector<std::complex<double>> twiddle_;  // [n_]: exp(-2 pi i k / n_)
};

// The same sum computed directly (O(N^2)): the reference the plan is tested against.
void dft_reference(const std::complex<double>* in, std::complex<double>* out, int32_t n);

}  // namespace brisk::media
