// Lower-level ways to make a Model and a Context than engine_api.h's, for benchmarks and
// tests: a model from GGUF bytes already in memory (a random-weight model of a real shape,
// models/random_model.h), and a context over a backend the caller made instead of one made
// from ContextOptions::device (a CUDA backend without graphs, a backend that records what it
// is given). Both run the same code as Model::load and Context::create.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "runtime/engine_api.h"

namespace brisk {

class MappedFile;

// A GGUF file's bytes as a Model (no tokenizer needed); `bytes` stays alive with the model.
std::shared_ptr<Model> model_load_gguf_bytes(std::shared_ptr<const MappedFile> bytes);

// options.device is ignored (options().device reports the backend's name).
std::unique_ptr<Context> context_create_on(std::shared_ptr<const Model> model, const ContextOptions& options,
                                           std::unique_ptr<Backend> backend);

}  // namespace brisk
