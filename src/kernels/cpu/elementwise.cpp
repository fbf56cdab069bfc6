// Elementwise and gather kernels: gated activations (SwiGLU = silu(gate) * up, GeGLU =
// gelu_tanh(gate) * up or gelu_erf(gate) * up), residual add, scaling by a constant, embedding lookup from a table in any stored format,
// and row gather (selecting the rows that need logits).
#include <cmath>
#include <cstring>

#include "kernels/cpu/encoder_ops.h"
#include "kernels/cpu/ops.h"

namespace brisk::cpu {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

void gated_act_rows(const GatedActArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.gate.rows, ith, nth, &begin, &end);
  for (int64_t r = begin; r < end; ++r) {
    const float* g = a.gate.row(r);
    const float* u = a.up.row(r);
    float* o = a.out.row(r);
    if (a.act == Activation::silu) {
      for (int64_t i = 0; i < a.gate.cols; ++i) o[i] = silu(g[i]) * u[i];
    } else if (a.act == Activation::gelu_erf) {
      for (int64_t i = 0; i < a.gate.cols; ++i) o[i] = gelu_erf(g[i]) * u[i];
    } else {
      for (int64_t i = 0; i < a.gate.cols; ++i) o[i] = gelu_tanh(g[i]) * u[i];
    }
  }
}

void add_rows(const AddArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.a.rows, ith, nth, &begin, &end);
  for (int64_t r = begin; r < end; ++r) {
    const float* x = a.a.row(r);
    const float* y = a.b.row(r);
    float* o = a.out.row(r);
    for (int64_t i = 0; i < a.a.cols; ++i) o[i] = x[i] + y[i];
  }
}

void scale_rows(const ScaleArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.x.rows, ith, nth, &begin, &end);
  for (int64_t r = begin; r < end; ++r) {
    const float* x = a.x.row(r);
    float* o = a.out.row(r);
    for (int64_t i = 0; i < a.x.cols; ++i) o[i] = x[i] * a.scale;
  }
}

void embedding_rows(const EmbeddingArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.out.rows, ith, nth, &begin, &end);
  for (int64_t t = begin; t < end; ++t) {
    float* o = a.out.row(t);
    row_to_f32(a.table.type, a.table.row(a.ids[t]), o, a.table.n_in);
    if (a.scale != 1.0f)
      for (int64_t i = 0; i < a.table.n_in; ++i) o[i] *= a.scale;
  }
}

void get_rows_rows(const GetRowsArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.out.rows, ith, nth, &begin, &end);
  for (int64_t i = begin; i < end; ++i)
    std::memcpy(a.out.row(i), a.x.row(a.rows[i]), sizeof(float) * size_t(a.x.cols));
}

}  // namespace brisk::cpu
