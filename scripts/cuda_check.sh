#!/usr/bin/env bash
# Builds brisk in release with the CUDA backend for sm_90 (H100/H200) and runs, on the GPU of
# this machine, the CUDA unit tests (ops against the CPU references, fixture models against
# the CPU backend, graphs against launch by launch) and the decode benchmarks of docs/cuda.md:
# Llama-3.1-8B shape in BF16, Q8_0 and Q4_K_M (graphs on and off, and the matmuls alone),
# Qwen2.5-0.5B shape in Q8_0, the mixture-of-experts Qwen3-30B-A3B shape in Q4_K_M (decode at 1
# and 16 sequences, pp512); verify-shaped steps of 1-8 tokens (cuda-bench --tokens); the prefill benchmark (pp512 at the 8B shape for BF16, Q8_0,
# Q4_K_M, with the same-run BF16 GEMM rate); and `brisk bench` / `brisk generate` on a
# random-weight 8B Q4_K_M GGUF file (written to $TMPDIR, about 4.9 GB, then removed).
# cuBLAS is loaded at run time (dlopen) from the loader path or the toolkit's library
# directory; without it the prefill keeps the GEMV kernels (a warning says so).
# Usage: scripts/cuda_check.sh [build-dir]   (JOBS=N for the build parallelism)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build/cuda}
cmake -S "$src" -B "$build" -G Ninja -DBRISK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_BUILD_TYPE=Release -DBRISK_BENCH=OFF
cmake --build "$build" --target brisk_tests brisk_cli -j "${JOBS:-2}"
"$build/brisk" inspect --devices
"$build/tests/brisk_tests" --gtest_filter='*Cuda*'
for type in bf16 q8_0 q4_k_m; do
  "$build/brisk" cuda-bench --type "$type" --prefill 512
  "$build/brisk" cuda-bench --type "$type"
  "$build/brisk" cuda-bench --type "$type" --graphs on --gemv-only yes
done
# Speculative verify steps: a step of N tokens over the one-token step (target <= 1.25x at N = 5).
for type in q4_k_m q8_0 bf16; do
  "$build/brisk" cuda-bench --type "$type" --graphs on --tokens 1,2,3,4,5,6,7,8
done
"$build/brisk" cuda-bench --type q8_0 --shape qwen2.5-0.5b
"$build/brisk" cuda-bench --type q4_k_m --shape qwen3-30b-a3b --graphs on
"$build/brisk" cuda-bench --type q4_k_m --shape qwen3-30b-a3b --graphs on --batch 16 --steps 16
"$build/brisk" cuda-bench --type q4_k_m --shape qwen3-30b-a3b --prefill 512
gguf=${TMPDIR:-/tmp}/brisk-cuda-check-l8-q4_k_m.gguf
"$build/brisk" make-random-model --shape llama-3.1-8b --type q4_k_m --out "$gguf"
"$build/brisk" bench -m "$gguf" -p 512 -n 128 -r 3 --device cuda
"$build/brisk" generate -m "$gguf" --prompt-ids 1,2,3,4,5,6,7,8 -n 256 --temp 0 --device cuda
rm -f "$gguf"
