// `brisk cuda-bench`: decode tok/s of the CUDA backend at a real model shape with random device
// weights, with and without CUDA graphs, next to the copy bandwidth of the same run (see
// backend/cuda/cuda_bench.h).
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "runtime/kv_cache.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_bench.h"
#endif

namespace {

int cmd_cuda_bench(const std::vector<std::string>& argv) {
  std::string shape = "llama-3.1-8b", type_name = "q8_0", graphs = "both", gemv_only = "no", kv = "f16";
  int32_t layers = -1, batch = -1, steps = -1, past = -1, prefill_tokens = 0;
  brisk::cli::ArgParser args("cuda-bench", "[options]",
                             "Decode (or with --prefill N, prefill) speed of the CUDA backend at a real model shape "
                             "with random weights, next to the copy bandwidth of the same run.");
  args.text({"--type"}, &type_name, "T", "q8_0 | bf16 | q4_k_m | any stored type name (default q8_0)");
  args.text({"--shape"}, &shape, "NAME", "llama-3.1-8b | qwen3-8b | qwen2.5-0.5b | qwen3-30b-a3b (default llama-3.1-8b)");
  args.text({"--graphs"}, &graphs, "on|off|both", "CUDA graphs (default both)");
  args.text({"--gemv-only"}, &gemv_only, "yes|no", "time the matmuls only (default no)");
  args.integer({"--layers"}, &layers, 1, 256, "N", "layers (default: the shape's)");
  args.integer({"--batch"}, &batch, 1, 256, "N", "sequences decoded at once (default 1)");
  args.integer({"--steps"}, &steps, 1, 100000, "N", "timed steps");
  args.integer({"--past"}, &past, 0, 131072, "N", "positions already in the KV cache");
  args.integer({"--prefill"}, &prefill_tokens, 9, 65535, "N", "time a prefill of N tokens instead");
  args.text({"--kv-type"}, &kv, "T", "f16 | bf16 | q8_0 (default f16)");
  if (!args.parse(argv)) return 0;
#ifdef BRISK_HAVE_CUDA
  brisk::CudaBenchParams p;
  if (type_name == "q4_k_m") {
    p.q4_k_m = true;
  } else {
    const auto t = brisk::quant_type_from_name(type_name);
    if (!t) brisk::cli::usage_fail("unknown --type '", type_name, "'");
    p.type = *t;
  }
  if (!brisk::cuda_bench_shape(shape, p))
    brisk::cli::usage_fail("unknown --shape '", shape, "' (llama-3.1-8b, qwen3-8b, qwen2.5-0.5b or qwen3-30b-a3b)");
  if (graphs != "on" && graphs != "off" && graphs != "both") brisk::cli::usage_fail("--graphs on|off|both");
  if (gemv_only != "yes" && gemv_only != "no") brisk::cli::usage_fail("--gemv-only yes|no");
  p.matmul_only = gemv_only == "yes";
  const auto kv_type = brisk::kv_cache_type_from_name(kv);
  if (!kv_type || *kv_type == brisk::QuantType::F32) brisk::cli::usage_fail("--kv-type f16|bf16|q8_0");
  p.kv_type = *kv_type;
  if (layers > 0) p.n_layer = layers;
  if (batch > 0) p.batch = batch;
  if (steps > 0) p.steps = steps;
  if (past >= 0) p.n_past = past;
  const bool prefill = prefill_tokens > 0;
  if (prefill) p.prefill = prefill_tokens;
  BRISK_CHECK(p.n_layer > 0 && p.n_layer <= 256 && p.steps > 0 && p.steps <= 100000 && p.n_past >= 0 &&
                  p.n_past <= 131072 && p.batch >= 1 && p.batch <= 256,
              "cuda-bench: --layers, --steps, --past or --batch out of range");
  if (prefill) {
    if (steps <= 0) p.steps = 5;
    const brisk::CudaPrefillResult r = brisk::cuda_prefill_bench(p);
    std::printf("cuda-bench %s %s (%d layers) prefill pp%d: %.0f tok/s, matmuls %.1f TFLOP/s = %.1f%% of the "
                "BF16 GEMM rate %.1f TFLOP/s ([%d x %d] . [%d x %d]^T, same run)\n",
                type_name.c_str(), shape.c_str(), p.n_layer, p.prefill, r.tok_per_s, r.matmul_tflops,
                100.0 * r.matmul_tflops / r.gemm_tflops, r.gemm_tflops, p.prefill, p.n_embd,
                int(brisk::cuda_bench_gemm_cols(p)), p.n_embd);
    std::fflush(stdout);
    return 0;
  }
  const std::string kv_note =
      p.kv_type == brisk::QuantType::F16 ? "" : ", " + std::string(brisk::quant_type_info(p.kv_type).name) + " KV";
  for (const bool g : {true, false}) {
    if ((g && graphs == "off") || (!g && graphs == "on")) continue;
    p.graphs = g;
    const brisk::CudaBenchResult r = brisk::cuda_decode_bench(p);
    std::printf("cuda-bench %s %s (%d layers, %d past, batch %d, graphs %s%s%s): %.1f tok/s, %.3f ms/token, %.2f GB/token, "
                "%.0f GB/s = %.1f%% of copy bandwidth %.0f GB/s\n",
                type_name.c_str(), shape.c_str(), p.n_layer, p.n_past, p.batch, g ? "on" : "off",
                p.matmul_only ? ", matmuls only" : "", kv_note.c_str(), r.tok_per_s,
                1e3 / r.tok_per_s, r.bytes_per_token / 1e9, r.achieved_gbps, 100.0 * r.achieved_gbps / r.copy_gbps,
                r.copy_gbps);
    std::fflush(stdout);
  }
  return 0;
#else
  brisk::fail("this build has no CUDA backend");
#endif
}

}  // namespace

BRISK_COMMAND("cuda-bench", "decode or prefill speed of the CUDA backend at a real model shape (random weights)",
              cmd_cuda_bench);
