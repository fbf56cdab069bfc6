#pragma once
#include <cstdint>
#include <string>

#include "quant/types.h"

namespace brisk {

// A decode-step benchmark of the CUDA backend at a real model shape (default: Llama-3.1-8B)
// with random weights made directly in device memory: the op sequence of the dense decoder's
// forward for one token (per-step inputs through begin_step / end_step, as the Context does),
// timed over `steps` steps, next to the device-to-device copy bandwidth measured in the same run.
struct CudaBenchParams {
  QuantType type = QuantType::Q8_0;
  // Q4_K_M as llama.cpp mixes it: Q4_K weights, but Q6_K for the output and for attn_v and
  // ffn_down of the layers i < n/8, i >= 7n/8 and every third in between. `type` is ignored.
  bool q4_k_m = false;
  bool graphs = true;       // run each step as a CUDA graph (false: launch by launch)
  bool matmul_only = false; // only the matmuls of the step, grouped by input so that the
                            // activations are quantized twice per step: the GEMV's own time
  int32_t n_layer = 32;
  int32_t n_embd = 4096;
  int32_t n_head = 32;
  int32_t n_head_kv = 8;
  int32_t head_dim = 128;
  int32_t n_ff = 14336;
  int32_t n_vocab = 128256;
  // Mixture of experts (n_expert > 0): every layer's FFN is a router (F32, as GGUF files keep
  // it) + n_expert experts of n_ff_exp, n_expert_used per token, instead of the dense n_ff.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  int32_t n_past = 512;     // positions already in the KV cache
  QuantType kv_type = QuantType::F16;  // the KV cache: F16 or BF16
  int32_t steps = 64;
  int32_t batch = 1;        // sequences decoded together, one token each per step
  int32_t prefill = 512;    // cuda_prefill_bench: prompt tokens per forward (from position 0)
  int device = 0;
};

struct CudaBenchResult {
  double tok_per_s = 0.0;         // tokens of all sequences per second
  double bytes_per_token = 0.0;   // weights read (+ KV cache read) per decoded token; for MoE
                                  // the experts a step is expected to touch (random routing)
  double achieved_gbps = 0.0;     // bytes_per_token * tok_per_s
  double copy_gbps = 0.0;         // device-to-device copy (read + write bytes per second)
};

// Named shapes: "llama-3.1-8b" (the defaults), "qwen3-8b", "qwen2.5-0.5b" and the MoE
// "qwen3-30b-a3b"; false for an unknown name.
bool cuda_bench_shape(const std::string& name, CudaBenchParams& p);

// Columns of the prefill benchmark's reference GEMM: the FFN width (MoE: n_used experts' worth).
int64_t cuda_bench_gemm_cols(const CudaBenchParams& p);

CudaBenchResult cuda_decode_bench(const CudaBenchParams& p);

struct CudaPrefillResult {
  double tok_per_s = 0.0;        // prompt tokens per second (whole forward, last row's logits)
  double matmul_tflops = 0.0;    // the forward's matmul FLOPs / the forward's time
  double gemm_tflops = 0.0;      // a plain BF16 GEMM [prefill x n_embd] . [n_ff x n_embd]^T, same run
};

// Prefill benchmark: forwards of p.prefill tokens at positions 0.. (one sequence, logits of
// the last token only), launch by launch as the Context runs them, `steps` timed forwards;
// next to the tensor-core rate of a plain BF16 GEMM of the FFN's size (random operands).
// Needs a backend with the GEMM (cuda_has_gemm).
CudaPrefillResult cuda_prefill_bench(const CudaBenchParams& p);

}  // namespace brisk
