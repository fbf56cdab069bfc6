#!/usr/bin/env bash
# Builds brisk in release with the CUDA backend for sm_90 (H100/H200) and runs, on the GPU of
# this machine, the CUDA unit tests (ops against the CPU references, fixture models against
# the CPU backend) and the decode benchmark at the Llama-3.1-8B shape (Q8_0 and BF16).
# Usage: scripts/cuda_check.sh [build-dir]   (JOBS=N for the build parallelism)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build/cuda}
cmake -S "$src" -B "$build" -G Ninja -DBRISK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_BUILD_TYPE=Release -DBRISK_BENCH=OFF
cmake --build "$build" --target brisk_tests brisk_cli -j "${JOBS:-2}"
"$build/brisk" inspect --devices
"$build/tests/brisk_tests" --gtest_filter='*Cuda*'
for type in q8_0 bf16; do
  "$build/brisk" cuda-bench --type "$type"
done
