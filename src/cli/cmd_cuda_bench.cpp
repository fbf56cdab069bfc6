// `brisk cuda-bench`: decode tok/s of the CUDA backend at a real model shape (a random-weight
// model of models/random_model.h's shape table, run through Model / Context: cli/cuda_bench.h),
// with and without CUDA graphs, next to the copy bandwidth of the same run; with --prefill N,
// the prefill rate next to the BF16 GEMM rate; with --tokens N[,N...], the time of a step of N
// tokens of one sequence (a speculative verify step) against a one-token step.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "models/random_model.h"
#include "runtime/engine_api.h"
#include "runtime/kv_cache.h"
#ifdef BRISK_HAVE_CUDA
#include "cli/cuda_bench.h"
#endif

namespace {

std::string shape_names() {
  std::string s;
  for (const std::string& n : brisk::random_model_shapes()) s += (s.empty() ? "" : " | ") + n;
  return s;
}

int cmd_cuda_bench(const std::vector<std::string>& argv) {
  std::string shape = "llama-3.1-8b", type_name = "q8_0", graphs = "both", gemv_only = "no", kv = "f16";
  int32_t layers = -1, batch = -1, steps = -1, past = -1, prefill_tokens = 0, tp = 0;
  std::vector<int32_t> tokens;
  brisk::cli::ArgParser args("cuda-bench", "[options]",
                             "Decode (or with --prefill N, prefill) speed of the CUDA backend on a random-weight model "
                             "of a real shape, run through the model code as generate runs it, next to the copy "
                             "bandwidth of the same run.");
  args.text({"--type"}, &type_name, "T", "q8_0 | bf16 | q4_k_m | any stored type name (default q8_0)");
  args.text({"--shape"}, &shape, "NAME", shape_names() + " (default llama-3.1-8b)");
  args.text({"--graphs"}, &graphs, "on|off|both", "CUDA graphs (default both)");
  args.text({"--gemv-only"}, &gemv_only, "yes|no", "time the matmuls only (default no)");
  args.integer({"--layers"}, &layers, 1, 256, "N", "layers (default: the shape's)");
  args.integer({"--batch"}, &batch, 1, 256, "N", "sequences decoded at once (default 1)");
  args.integer({"--steps"}, &steps, 1, 100000, "N", "timed steps");
  args.integer({"--past"}, &past, 0, 131072, "N", "positions already in the KV cache");
  args.integer({"--prefill"}, &prefill_tokens, 9, 65535, "N", "time a prefill of N tokens instead");
  args.text({"--kv-type"}, &kv, "T", "f16 | bf16 | q8_0 (default f16)");
  args.integer({"--tp"}, &tp, 1, 1024, "N",
               "decode with the model split over GPUs 0..N-1 (tensor parallelism; 1: the same path on one GPU)");
  std::string tokens_list;
  args.text({"--tokens"}, &tokens_list, "N[,N...]",
            "time steps of N tokens of one sequence (a verify step of N - 1 drafts, cut back after each) "
            "against a one-token step, N in 1..64");
  if (!args.parse(argv)) return 0;
  for (size_t at = 0; !tokens_list.empty() && at <= tokens_list.size();) {
    const size_t comma = std::min(tokens_list.find(',', at), tokens_list.size());
    tokens.push_back(int32_t(brisk::cli::parse_integer("--tokens", tokens_list.substr(at, comma - at), 1, 64)));
    at = comma + 1;
  }
  if (tokens.size() > 16) brisk::cli::usage_fail("--tokens: at most 16 values");
  if (!tokens.empty() && prefill_tokens > 0) brisk::cli::usage_fail("--tokens and --prefill exclude each other");
  const std::vector<std::string> shapes = brisk::random_model_shapes();
  if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end())
    brisk::cli::usage_fail("unknown --shape '", shape, "' (", shape_names(), ")");
  if (shape.rfind("whisper-", 0) == 0)
    brisk::cli::usage_fail("--shape ", shape, " is a speech model: brisk transcribe-bench --shape ", shape);
  if (type_name != "q4_k_m" && !brisk::quant_type_from_name(type_name))
    brisk::cli::usage_fail("unknown --type '", type_name, "'");
  if (graphs != "on" && graphs != "off" && graphs != "both") brisk::cli::usage_fail("--graphs on|off|both");
  if (gemv_only != "yes" && gemv_only != "no") brisk::cli::usage_fail("--gemv-only yes|no");
  if (tp > 0 && (prefill_tokens > 0 || !tokens.empty() || gemv_only == "yes"))
    brisk::cli::usage_fail("--tp times decode steps: not with --prefill, --tokens or --gemv-only");
  if (tp > 0 && graphs == "off")
    brisk::cli::usage_fail("--tp runs with CUDA graphs on (BRISK_NO_CUDA_GRAPHS=1 runs it launch by launch)");
  if (tp > 0) graphs = "on";
  const auto kv_type = brisk::kv_cache_type_from_name(kv);
  if (!kv_type || *kv_type == brisk::QuantType::F32) brisk::cli::usage_fail("--kv-type f16|bf16|q8_0");
#ifdef BRISK_HAVE_CUDA
  brisk::CudaBenchParams p;
  p.shape = shape;
  p.type = type_name;
  p.matmul_only = gemv_only == "yes";
  p.kv_type = *kv_type;
  p.tp = tp;
  if (layers > 0) p.n_layer = layers;
  if (batch > 0) p.batch = batch;
  if (steps > 0) p.steps = steps;
  if (past >= 0) p.n_past = past;
  const bool prefill = prefill_tokens > 0;
  if (prefill) {
    p.prefill = prefill_tokens;
    if (steps <= 0) p.steps = 5;
  }
  const brisk::CudaBenchModel m = brisk::cuda_bench_model(p);
  const int n_layer = m.model->info().n_layer;
  if (prefill) {
    const brisk::CudaPrefillResult r = brisk::cuda_prefill_bench(p, m);
    std::printf("cuda-bench %s %s (%d layers) prefill pp%d: %.0f tok/s, matmuls %.1f TFLOP/s = %.1f%% of the "
                "BF16 GEMM rate %.1f TFLOP/s ([%d x %d] . [%d x %d]^T, same run)\n",
                p.type.c_str(), p.shape.c_str(), n_layer, p.prefill, r.tok_per_s, r.matmul_tflops,
                100.0 * r.matmul_tflops / r.gemm_tflops, r.gemm_tflops, p.prefill, m.n_embd, m.n_ff, m.n_embd);
    std::fflush(stdout);
    return 0;
  }
  if (!tokens.empty()) {
    if (steps <= 0) p.steps = 32;
    for (const bool g : {true, false}) {
      if ((g && graphs == "off") || (!g && graphs == "on")) continue;
      p.graphs = g;
      const double one = brisk::cuda_step_ms(p, m, 1);
      for (const int32_t n : tokens) {
        const double ms = n == 1 ? one : brisk::cuda_step_ms(p, m, n);
        std::printf("cuda-bench %s %s (%d layers, %d past, graphs %s%s) step of %d tokens: %.3f ms = %.3fx the "
                    "one-token step (%.3f ms)\n",
                    p.type.c_str(), p.shape.c_str(), n_layer, p.n_past, g ? "on" : "off",
                    p.matmul_only ? ", matmuls only" : "", n, ms, ms / one, one);
        std::fflush(stdout);
      }
    }
    return 0;
  }
  std::string kv_note =
      p.kv_type == brisk::QuantType::F16 ? "" : ", " + std::string(brisk::quant_type_info(p.kv_type).name) + " KV";
  // Tensor parallelism: the bandwidth is the GPUs' together, against one GPU's copy bandwidth.
  if (p.tp > 0) kv_note += ", tp " + std::to_string(p.tp) + " (GB/s of all GPUs vs one GPU's copy)";
  for (const bool g : {true, false}) {
    if ((g && graphs == "off") || (!g && graphs == "on")) continue;
    p.graphs = g;
    const brisk::CudaBenchResult r = brisk::cuda_decode_bench(p, m);
    std::printf("cuda-bench %s %s (%d layers, %d past, batch %d, graphs %s%s%s): %.1f tok/s, %.3f ms/token, %.2f GB/token, "
                "%.0f GB/s = %.1f%% of copy bandwidth %.0f GB/s\n",
                p.type.c_str(), p.shape.c_str(), n_layer, p.n_past, p.batch, g ? "on" : "off",
                p.matmul_only ? ", matmuls only" : "", kv_note.c_str(), r.tok_per_s, 1e3 / r.tok_per_s,
                r.bytes_per_token / 1e9, r.achieved_gbps, 100.0 * r.achieved_gbps / r.copy_gbps, r.copy_gbps);
    std::fflush(stdout);
  }
  return 0;
#else
  (void)layers;
  (void)batch;
  (void)steps;
  (void)past;
  (void)prefill_tokens;
  brisk::fail("this build has no CUDA backend");
#endif
}

}  // namespace

BRISK_COMMAND("cuda-bench", "decode or prefill speed of the CUDA backend at a real model shape (random weights)",
              cmd_cuda_bench);
