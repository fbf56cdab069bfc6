// Scalar reference implementations of every Backend op: single-threaded, written for clarity
// (materialized softmax, dequantize-then-dot in double precision). Tests compare each backend
// (CPU threads, CUDA) against these over shapes and formats; they are never on a hot path.
#pragma once
#include <vector>

#include "core/op_args.h"
#include "quant/types.h"

namespace brisk::ref {

// The matmul reference models the activation conversion of the fast path: x is rounded
// through the weight format's vec_dot_type before a double-precision dot with the
// dequantized weight.
void matmul(const MatmulArgs& a);
void rms_norm(const RmsNormArgs& a);
void rope(const RopeArgs& a);
void kv_store(const KvStoreArgs& a);
void attention(const AttentionArgs& a);
void gated_act(const GatedActArgs& a);
void add(const AddArgs& a);
void embedding(const EmbeddingArgs& a);
void softmax(float* x, int64_t n);
void moe(const MoeArgs& a);
void scale(const ScaleArgs& a);
void softcap(const SoftcapArgs& a);
// Linear-attention ops (ref_delta_net.cpp): token by token in batch order, each token against
// its own sequence's state, sums in double; the delta rule in its recurrent form.
void conv_state(const ConvStateArgs& a);
void l2_norm(const L2NormArgs& a);
void gated_rms_norm(const GatedRmsNormArgs& a);
void sigmoid_mul(const SigmoidMulArgs& a);
void delta_rule(const DeltaRuleArgs& a);

}  // namespace brisk::ref
