// `brisk cuda-bench`: decode tok/s of the CUDA backend at a real model shape with random device
// weights, with and without CUDA graphs, next to the copy bandwidth of the same run (see
// backend/cuda/cuda_bench.h).
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "runtime/kv_cache.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_bench.h"
#endif

namespace {

int cmd_cuda_bench(const std::vector<std::string>& argv) {
#ifdef BRISK_HAVE_CUDA
  brisk::CudaBenchParams p;
  std::string shape = "llama-3.1-8b", type_name = "q8_0", graphs = "both";
  bool prefill = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    BRISK_CHECK(i + 1 < argv.size(), "cuda-bench: ", f, " needs a value");
    const std::string& v = argv[++i];
    if (f == "--type") {
      type_name = v;
      if (v == "q4_k_m") {
        p.q4_k_m = true;
      } else {
        const auto t = brisk::quant_type_from_name(v);
        BRISK_CHECK(t.has_value(), "cuda-bench: unknown --type '", v, "'");
        p.type = *t;
      }
    } else if (f == "--shape") {
      shape = v;
      BRISK_CHECK(brisk::cuda_bench_shape(v, p), "cuda-bench: unknown --shape '", v,
                  "' (llama-3.1-8b, qwen3-8b, qwen2.5-0.5b or qwen3-30b-a3b)");
    } else if (f == "--graphs") {
      BRISK_CHECK(v == "on" || v == "off" || v == "both", "cuda-bench: --graphs on|off|both");
      graphs = v;
    } else if (f == "--gemv-only") {
      BRISK_CHECK(v == "yes" || v == "no", "cuda-bench: --gemv-only yes|no");
      p.matmul_only = v == "yes";
    } else if (f == "--layers") {
      p.n_layer = std::stoi(v);
    } else if (f == "--batch") {
      p.batch = std::stoi(v);
    } else if (f == "--steps") {
      p.steps = std::stoi(v);
    } else if (f == "--kv-type") {
      const auto kv = brisk::kv_cache_type_from_name(v);
      BRISK_CHECK(kv && *kv != brisk::QuantType::F32, "cuda-bench: --kv-type f16|bf16|q8_0");
      p.kv_type = *kv;
    } else if (f == "--past") {
      p.n_past = std::stoi(v);
    } else if (f == "--prefill") {
      p.prefill = std::stoi(v);
      prefill = true;
    } else {
      brisk::fail("cuda-bench: unknown argument '", f,
                  "' (--type q8_0|bf16|q4_k_m|... --shape llama-3.1-8b|qwen3-8b|qwen2.5-0.5b|qwen3-30b-a3b --graphs on|off|both "
                  "--gemv-only yes|no "
                  "--layers N --steps N --past N --batch N --prefill N --kv-type f16|bf16|q8_0)");
    }
  }
  BRISK_CHECK(p.n_layer > 0 && p.n_layer <= 256 && p.steps > 0 && p.steps <= 100000 && p.n_past >= 0 &&
                  p.n_past <= 131072 && p.batch >= 1 && p.batch <= 256,
              "cuda-bench: --layers, --steps, --past or --batch out of range");
  if (prefill) {
    BRISK_CHECK(p.prefill > 8 && p.prefill <= 65535, "cuda-bench: --prefill out of range (9..65535)");
    const int steps = p.steps == brisk::CudaBenchParams{}.steps ? 5 : p.steps;
    p.steps = steps;
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
  (void)argv;
  brisk::fail("cuda-bench: this build has no CUDA backend");
#endif
}

}  // namespace

BRISK_COMMAND("cuda-bench",
              "decode (or with --prefill N, prefill) benchmark of the CUDA backend at a real model shape "
              "(--type q8_0|bf16|q4_k_m, --shape llama-3.1-8b|qwen3-8b|qwen2.5-0.5b|qwen3-30b-a3b)",
              cmd_cuda_bench);
