#!/usr/bin/env bash
# Builds brisk in release with the CUDA backend for sm_90 (H100/H200) and runs, on the GPU of
# this machine, the CUDA unit tests (ops against the CPU references, fixture models against
# the CPU backend, graphs against launch by launch) and the decode benchmarks of docs/cuda.md:
# Llama-3.1-8B shape in BF16, Q8_0 and Q4_K_M (graphs on and off, and the matmuls alone),
# Qwen2.5-0.5B shape in Q8_0; and the prefill benchmark (pp512 at the 8B shape for BF16, Q8_0,
# Q4_K_M, with the same-run BF16 GEMM rate). The build links cuBLAS from the toolkit; its
# libcublas.so.13 / libcublasLt.so.13 must be on the loader path to run.
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
"$build/brisk" cuda-bench --type q8_0 --shape qwen2.5-0.5b
