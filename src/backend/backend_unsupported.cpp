// Default implementations of the Backend ops that not every backend has (scale, the encoder
// ops and the linear-attention ops): a clear error naming the op and the backend, so that a model needing
// them fails at its first step instead of computing something else.
#include "backend/backend.h"
#include "core/error.h"

namespace brisk {

namespace {

[[noreturn]] void unsupported(const Backend& b, const char* op) {
  fail("op ", op, " is not supported on the ", b.name(), " backend (the model needs it: run it on the cpu)");
}

}  // namespace

void Backend::scale(const ScaleArgs&) { unsupported(*this, "scale"); }
void Backend::all_reduce(const AllReduceArgs&) { unsupported(*this, "all_reduce"); }
void Backend::layer_norm(const LayerNormArgs&) { unsupported(*this, "layer_norm"); }
void Backend::unary(const UnaryArgs&) { unsupported(*this, "unary"); }
void Backend::im2col(const Im2colArgs&) { unsupported(*this, "im2col"); }
void Backend::attention_weights(const AttentionWeightsArgs&) { unsupported(*this, "attention_weights"); }
void Backend::conv_state(const ConvStateArgs&) { unsupported(*this, "conv_state"); }
void Backend::l2_norm(const L2NormArgs&) { unsupported(*this, "l2_norm"); }
void Backend::gated_rms_norm(const GatedRmsNormArgs&) { unsupported(*this, "gated_rms_norm"); }
void Backend::sigmoid_mul(const SigmoidMulArgs&) { unsupported(*this, "sigmoid_mul"); }
void Backend::delta_rule(const DeltaRuleArgs&) { unsupported(*this, "delta_rule"); }

}  // namespace brisk
