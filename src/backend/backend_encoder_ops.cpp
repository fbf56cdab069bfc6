// Defaults of the encoder ops of the Backend interface: a backend that does not implement one
// says so by name, so a model that needs it fails at its first use with a clear message.
#include "backend/backend.h"
#include "core/error.h"

namespace brisk {

namespace {
[[noreturn]] void unsupported(const Backend& b, const char* op) {
  fail("op ", op, " is not supported on the ", b.name(), " backend (use --device cpu)");
}
}  // namespace

void Backend::layer_norm(const LayerNormArgs&) { unsupported(*this, "layer_norm"); }
void Backend::unary(const UnaryArgs&) { unsupported(*this, "unary"); }
void Backend::im2col(const Im2colArgs&) { unsupported(*this, "im2col"); }
void Backend::attention_weights(const AttentionWeightsArgs&) { unsupported(*this, "attention_weights"); }

}  // namespace brisk
