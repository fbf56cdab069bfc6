#!/usr/bin/env bash
# Mixture-of-experts and Q5_0 weights on the GPU of this machine: builds brisk in release with the
# CUDA backend for sm_90 (H100/H200), runs the CUDA tests of the expert matmuls, the Q5_0 kernel
# and the fixture models, then the decode and pp512 figures of docs/cuda.md for the MoE shapes,
# each next to its kill switch in the same call (the shared-expert slot for Qwen3.6-35B-A3B, the
# Q5_0 kernel for Gemma 4 26B-A4B, whose Q4_K_M recipe stores its 704- and 2112-wide rows as
# Q5_0), and the per-launch times of a few layers' decode step and prefill.
# Usage: scripts/cuda_moe_check.sh [build-dir]   (JOBS=N for the build parallelism)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build/cuda}
cmake -S "$src" -B "$build" -G Ninja -DBRISK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_BUILD_TYPE=Release -DBRISK_BENCH=OFF
cmake --build "$build" --target brisk_tests brisk_cli -j "${JOBS:-16}"
"$build/brisk" inspect --devices
"$build/tests/brisk_tests" \
  --gtest_filter='CudaMoe.*:CudaDequant.*:*CudaMatmul.*:CudaBackend.Q5_0*:*CudaGemm.*:CudaModel.*:CudaGraphs.*'
bench() { "$build/brisk" cuda-bench --type q4_k_m "$@"; }
bench --shape qwen3.6-35b-a3b --graphs on
BRISK_NO_CUDA_MOE_SHARED=1 bench --shape qwen3.6-35b-a3b --graphs on
bench --shape gemma4-26b-a4b --graphs on
BRISK_NO_CUDA_Q5_0=1 bench --shape gemma4-26b-a4b --graphs on
bench --shape qwen3.6-35b-a3b --prefill 512
bench --shape gemma4-26b-a4b --prefill 512
BRISK_CUDA_KERNEL_TIMES=1 bench --shape qwen3.6-35b-a3b --layers 4 --steps 16
BRISK_CUDA_KERNEL_TIMES=1 bench --shape qwen3.6-35b-a3b --layers 4 --prefill 512
