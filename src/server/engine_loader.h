// Loads a served model on the engine: Model::load, one Context with `n_parallel` sequence
// slots, the chat template renderer, the output format, and the scheduler that owns the Context.
#pragma once
#include <functional>
#include <string>

#include "server/model_registry.h"
#include "runtime/embedder.h"
#include "runtime/scheduler.h"

namespace brisk::server {

struct EngineLoadOptions {
  int32_t n_ctx = 4096;        // positions per sequence
  int32_t n_parallel = 4;      // sequence slots (concurrent requests + cached prefixes)
  int32_t n_batch = 512;       // tokens per forward
  QuantType kv_type = QuantType::F16;
  int32_t kv_block_size = 256;  // KV cache positions per block
  std::string device = "auto";  // cpu | cuda | cuda:N | auto (see make_backend)
  int32_t n_threads = 0;
  std::string quant;           // quantize safetensors weights at load ("", "q8_0", ...)
  std::string tokenizer_dir;   // Hugging Face folder whose tokenizer (and chat template) replace
                               // the model's own (e.g. for a GGUF without tokenizer metadata)
  SchedulerOptions scheduler;
  // Causal LMs scored as yes/no rerankers (runtime/embedder.h): detected, or as the user says.
  YesNoMode yes_no = YesNoMode::detect;
  // Speculative decoding for each model as it loads (its draft source; the CLI's --spec /
  // --draft-model): null, or returning no source, for none.
  std::function<SpecOptions(const std::shared_ptr<const Model>& model, const std::string& path, const ContextOptions& context)> make_spec;
};

ModelLoader engine_model_loader(EngineLoadOptions options);

}  // namespace brisk::server
