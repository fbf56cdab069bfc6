// `brisk cuda-bench`: decode tok/s of the CUDA backend at the Llama-3.1-8B shape with random
// device weights, next to the copy bandwidth of the same run (see backend/cuda/cuda_bench.h).
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_bench.h"
#endif

namespace {

int cmd_cuda_bench(const std::vector<std::string>& argv) {
#ifdef BRISK_HAVE_CUDA
  brisk::CudaBenchParams p;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    BRISK_CHECK(i + 1 < argv.size(), "cuda-bench: ", f, " needs a value");
    const std::string& v = argv[++i];
    if (f == "--type") {
      const auto t = brisk::quant_type_from_name(v);
      BRISK_CHECK(t.has_value(), "cuda-bench: unknown --type '", v, "'");
      p.type = *t;
    } else if (f == "--layers") {
      p.n_layer = std::stoi(v);
    } else if (f == "--steps") {
      p.steps = std::stoi(v);
    } else if (f == "--past") {
      p.n_past = std::stoi(v);
    } else {
      brisk::fail("cuda-bench: unknown argument '", f, "' (--type q8_0|bf16 --layers N --steps N --past N)");
    }
  }
  BRISK_CHECK(p.n_layer > 0 && p.n_layer <= 256 && p.steps > 0 && p.steps <= 100000 && p.n_past >= 0 &&
                  p.n_past <= 131072,
              "cuda-bench: --layers, --steps or --past out of range");
  const brisk::CudaBenchResult r = brisk::cuda_decode_bench(p);
  std::printf("cuda-bench %s llama-3.1-8b shape (%d layers, %d past): %.1f tok/s, %.2f GB/token, %.0f GB/s "
              "= %.1f%% of copy bandwidth %.0f GB/s\n",
              std::string(brisk::quant_type_info(p.type).name).c_str(), p.n_layer, p.n_past, r.tok_per_s,
              r.bytes_per_token / 1e9, r.achieved_gbps, 100.0 * r.achieved_gbps / r.copy_gbps, r.copy_gbps);
  return 0;
#else
  (void)argv;
  brisk::fail("cuda-bench: this build has no CUDA backend");
#endif
}

}  // namespace

BRISK_COMMAND("cuda-bench", "decode benchmark of the CUDA backend at the Llama-3.1-8B shape (--type q8_0|bf16)",
              cmd_cuda_bench);
