// `brisk cuda-bench`: decode and prefill speed of the CUDA backend at a real model shape. The
// model is a random-weight one of a shape from models/random_model.h's table, built in memory
// (each matrix repeats 256 random rows: the values do not matter, the bytes do), and runs
// through the normal Model / Context path on a CUDA backend, as `brisk generate` would run it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "quant/types.h"

namespace brisk {

class Model;

struct CudaBenchParams {
  std::string shape = "llama-3.1-8b";  // a name of random_model_preset's table
  std::string type = "q8_0";           // a stored type or a llama.cpp recipe (q4_k_m)
  int32_t n_layer = 0;                 // 0: the shape's
  bool graphs = true;                  // steps as CUDA graphs (false: launch by launch)
  bool matmul_only = false;            // only the step's matmuls, grouped by input (the GEMVs' own time)
  int32_t n_past = 512;                // positions in each sequence's KV cache before the timed steps
  QuantType kv_type = QuantType::F16;  // F16, BF16 or Q8_0
  int32_t steps = 64;                  // timed decode steps (prefill: timed forwards)
  int32_t batch = 1;                   // sequences decoded together, one token each per step
  int32_t prefill = 512;               // prefill: prompt tokens per forward (from position 0)
  int device = 0;
  // Tensor parallelism: the model split over GPUs 0..tp-1 through the tensor-parallel context
  // (runtime/tp_context.h; 1: the same path on one GPU). 0: one plain context on `device`.
  int32_t tp = 0;
};

// The random model of p's shape, type and layers, with a context length for p's positions.
struct CudaBenchModel {
  std::shared_ptr<Model> model;
  int32_t n_embd = 0, n_ff = 0;          // MLP width: the dense one, or n_used experts' worth
  double dense_bytes = 0.0;              // weights a decoded token reads, experts aside
  double expert_bytes = 0.0;             // all experts' weights
  double expert_share = 0.0;             // n_used / n_expert (0: dense)
  double dense_matmul_params = 0.0;      // elements of the matrices every token multiplies (lm head included)
  double expert_params = 0.0;            // elements of all experts' matrices
  int32_t kv_layers = 0;                 // layers with a KV cache (all but linear-attention ones)
  double state_bytes = 0.0;              // recurrent state of one sequence (F32, all layers)
};
CudaBenchModel cuda_bench_model(const CudaBenchParams& p);

struct CudaBenchResult {
  double tok_per_s = 0.0;         // tokens of all sequences per second
  double bytes_per_token = 0.0;   // weights read (+ KV cache read, + recurrent state read and
                                  // written) per decoded token; for MoE
                                  // the experts a step is expected to touch (random routing)
  double achieved_gbps = 0.0;     // bytes_per_token * tok_per_s
  double copy_gbps = 0.0;         // device-to-device copy (read + write bytes per second)
};
CudaBenchResult cuda_decode_bench(const CudaBenchParams& p, const CudaBenchModel& m);

// A verify-shaped step: one sequence's forward of n_tok tokens at positions n_past .. with every
// row's logits (greedy ids on the device), then cut back to n_past (a speculative verify whose
// drafts are all rejected), timed over p.steps steps; milliseconds per step. With p.matmul_only,
// the step's matmuls on n_tok rows (the few-token GEMV's own time).
double cuda_step_ms(const CudaBenchParams& p, const CudaBenchModel& m, int32_t n_tok);

struct CudaPrefillResult {
  double tok_per_s = 0.0;        // prompt tokens per second (whole forward, last row's logits)
  double matmul_tflops = 0.0;    // the forward's matmul FLOPs / the forward's time
  double gemm_tflops = 0.0;      // a plain BF16 GEMM [prefill x n_embd] . [n_ff x n_embd]^T, same run
};
// Forwards of p.prefill tokens at positions 0.. (one sequence, logits of the last token only),
// next to the tensor-core rate of a plain BF16 GEMM of the MLP's size (random operands). Needs
// a backend with the GEMM (cuda_has_gemm).
CudaPrefillResult cuda_prefill_bench(const CudaBenchParams& p, const CudaBenchModel& m);

}  // namespace brisk
