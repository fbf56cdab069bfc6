// Cross-check against real converter output: the Q8_0 tensors of shared/data/models/*/
// model-q8_0.gguf (written by llama.cpp's converter) must equal our reference quantization of
// the same tensors taken from model-f32.gguf, byte for byte; and the GEMV over those Q8_0 rows
// must track the float GEMV.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "kernels/cpu/dot.h"
#include "quant/format.h"

namespace brisk {
namespace {

const std::string kModels = std::string(BRISK_SHARED_DATA) + "/models";

TEST(QuantGguf, ConverterQ8_0MatchesReferenceQuantizer) {
  if (!std::filesystem::exists(kModels)) BRISK_SKIP_MISSING_ASSET() << "no shared models at " << kModels;
  int tensors = 0;
  for (const char* arch : {"llama", "qwen3", "gemma3"}) {
    const std::string dir = kModels + "/" + arch;
    if (!std::filesystem::exists(dir + "/model-q8_0.gguf")) continue;
    gguf::File q8 = gguf::File::open(dir + "/model-q8_0.gguf");
    gguf::File f32 = gguf::File::open(dir + "/model-f32.gguf");
    for (const gguf::TensorInfo& t : q8.tensors()) {
      if (t.type != QuantType::Q8_0) continue;
      const gguf::TensorInfo* src = f32.find_tensor(t.name);
      ASSERT_NE(src, nullptr) << t.name;
      if (src->type != QuantType::F32) continue;
      ASSERT_EQ(src->n_elements, t.n_elements) << t.name;
      const int64_t n = int64_t(t.n_elements);
      std::vector<float> x(static_cast<size_t>(n));
      std::memcpy(x.data(), src->data, size_t(n) * 4);
      std::vector<uint8_t> q(t.n_bytes);
      format_traits(QuantType::Q8_0).quantize_row_ref(x.data(), q.data(), n);
      ASSERT_EQ(std::memcmp(q.data(), t.data, t.n_bytes), 0) << arch << " " << t.name;

      // y = W x over the tensor's rows, Q8_0 kernel vs float
      const int64_t k = int64_t(t.ne[0]), rows = n / k;
      std::vector<float> xa(static_cast<size_t>(k));
      for (int64_t j = 0; j < k; ++j) xa[size_t(j)] = std::sin(0.37f * float(j));
      std::vector<uint8_t> xq(kernels::activation_row_bytes(QuantType::Q8_0, k));
      kernels::select_quantize_activation(QuantType::Q8_0)(xa.data(), xq.data(), k);
      std::vector<float> y(static_cast<size_t>(rows));
      kernels::gemv_rows(QuantType::Q8_0, t.data, t.n_bytes / size_t(rows), rows, k, xq.data(), y.data());
      for (int64_t r = 0; r < rows; ++r) {
        double ref = 0, mag = 0;
        for (int64_t j = 0; j < k; ++j) {
          ref += double(x[size_t(r * k + j)]) * xa[size_t(j)];
          mag += std::fabs(double(x[size_t(r * k + j)]) * xa[size_t(j)]);
        }
        // 8-bit weights and activations: error well under 2% of sum |w x|
        EXPECT_NEAR(y[size_t(r)], ref, 0.02 * mag + 1e-6) << t.name << " row " << r;
      }
      ++tensors;
    }
  }
  if (tensors == 0) BRISK_SKIP_MISSING_ASSET() << "no Q8_0 tensors found under " << kModels;
}

}  // namespace
}  // namespace brisk
