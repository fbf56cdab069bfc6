// Attention launchers (kernels.h): the cluster kernel (steps of up to 8 tokens) where it applies
// (attention_cluster.cu), else the kernel split over KV positions (attention_split.cu, whose
// header describes the algorithm).
#include "core/flags.h"
#include "kernels/cuda/attention_common.cuh"

namespace brisk::cuda {

size_t attention_counter_ints(const AttentionArgs& a) {
  if (cluster_splits(a) > 0) return 0;
  const Geometry g = attention_geometry(a);
  return g.n_split == 1 ? 0 : size_t(a.q.rows) * size_t(a.n_head_kv) * size_t(g.n_hg);
}

size_t attention_scratch_floats(const AttentionArgs& a) {
  if (cluster_splits(a) > 0) return 0;
  const Geometry g = attention_geometry(a);
  return g.n_split == 1 ? 0 : size_t(a.q.rows) * size_t(a.n_head) * size_t(g.n_split) * size_t(a.head_dim + 2);
}

bool attention_quant_supported(const AttentionArgs& a, ActRound kind) {
  if (flags().no_cuda_attn_quant || cluster_splits(a) == 0) return false;
  if (a.out.stride != 0 && a.out.stride != a.out.cols) return false;
  switch (kind) {
    case ActRound::q8_0: case ActRound::f16: case ActRound::bf16: return true;
    case ActRound::q8_k: return (a.n_head / a.n_head_kv) * a.head_dim % 256 == 0;
    default: return false;
  }
}

bool attention_rope_supported(const AttentionArgs& a, int n_rot) {
  const Geometry g = attention_geometry(a);
  // Several tokens (a verify group) only on the cluster kernel (fill_group_rows), and up to
  // kVerifyRopeMaxTokens: beyond, the blocks that rotate the group's rows (a double-precision
  // sincos per row and pair) took longer than the separate rope + store launch (docs/cuda.md).
  const bool rows_ok = a.q.rows == 1 || (a.q.rows <= kVerifyRopeMaxTokens && !flags().no_cuda_verify_rope &&
                                         cluster_splits(a) > 0);
  return a.k_cache.type != QuantType::Q8_0 && rows_ok && g.n_hg == 1 && n_rot >= 0 && n_rot % 2 == 0 && n_rot <= a.head_dim &&
         a.head_dim <= kMaxHeadDim;
}

cudaError_t launch_attention(const AttentionArgs& a, float* scratch, int* counters, cudaStream_t s) {
  return launch_attention_rope(a, nullptr, scratch, counters, s);
}

cudaError_t launch_attention_rope(const AttentionArgs& a, const AttentionRope* rope, float* scratch, int* counters,
                                  cudaStream_t s, const AttentionQuant* quant) {
  if (a.head_dim > kMaxHeadDim || a.q.rows > 65535) return cudaErrorInvalidValue;
  if (a.q.rows == 0) return cudaSuccess;
  if (const int n = cluster_splits(a); n > 0) {
    if (rope && !attention_rope_supported(a, rope->n_rot)) return cudaErrorInvalidValue;
    // Several tokens with rope: before the dependent-launch wait only rows outside the step's
    // (the launch itself writes those); without, nothing before the wait (the KV store just
    // before wrote rows that later tokens of the step read). The same arithmetic.
    const bool prefetch = !flags().no_cuda_prefetch && (a.q.rows == 1 || rope != nullptr);
    const AttentionFlags fl{.prefetch = prefetch, .stage = true, .stream = false,
                            .one_token = a.q.rows == 1, .rope = rope != nullptr, .merge_heads = false};
    if (quant && quant->kind != ActRound::none && !attention_quant_supported(a, quant->kind)) return cudaErrorInvalidValue;
    const cudaError_t e =
        launch_attention_cluster(a, n, fl, rope ? *rope : AttentionRope{}, quant ? *quant : AttentionQuant{}, s);
    return e != cudaSuccess ? e : cudaGetLastError();
  }
  return launch_attention_split(a, rope, scratch, counters, s, quant);
}

}  // namespace brisk::cuda
