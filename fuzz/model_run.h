// The fuzz targets of model construction: load a model from a path, and when it loads run a
// two-token prompt and one more step through a small context on the CPU, reading every logit.
// Hyper-parameters that disagree with the tensors' shapes must be a brisk::Error at load,
// never a read outside a tensor in the forward pass.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/engine_api.h"

namespace brisk::fuzz {

inline void load_and_run(const std::string& path) {
  std::shared_ptr<Model> model;
  try {
    model = Model::load({.path = path, .n_threads = 1});
  } catch (const Error&) {
    return;
  }
  try {
    auto ctx = Context::create(model, {.n_ctx = 8, .n_seq_max = 1, .n_batch = 4, .n_threads = 1, .device = "cpu"});
    const int32_t nv = model->info().n_vocab;
    const int32_t a = 0, b = nv > 1 ? nv - 1 : 0;
    ctx->decode({{.token = a, .pos = 0, .seq = 0, .want_logits = false},
                 {.token = b, .pos = 1, .seq = 0, .want_logits = true}});
    volatile float sink = 0;
    for (int32_t v = 0; v < nv; ++v) sink = sink + ctx->logits(0)[v];
    ctx->decode({{.token = b / 2, .pos = 2, .seq = 0, .want_logits = true}});
    for (int32_t v = 0; v < nv; ++v) sink = sink + ctx->logits(0)[v];
  } catch (const Error&) {
  }
}

}  // namespace brisk::fuzz
