#!/usr/bin/env bash
# Embeddings on the GPU of this machine: builds brisk in release with the CUDA backend for sm_90
# (H100/H200), runs the CUDA encoder / embedding tests (the tensor-core dense attention against
# the FP32 kernel, the fused epilogues and device pooling bit-equal to their kill switches, the
# encoders and EmbeddingGemma against the CPU and their transformers fixtures), then embed-bench
# at the bge-m3 and bge-small shapes (BF16 weights, 256 inputs of 128 tokens) with the new paths
# and with their kill switches in the same call, and the time of each op kind of a bge-m3 forward.
# Usage: scripts/cuda_embed_check.sh [build-dir]   (JOBS=N for the build parallelism)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build/cuda}
cmake -S "$src" -B "$build" -G Ninja -DBRISK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_BUILD_TYPE=Release -DBRISK_BENCH=OFF
cmake --build "$build" --target brisk_tests brisk_cli -j "${JOBS:-16}"
"$build/brisk" inspect --devices
"$build/tests/brisk_tests" --gtest_filter='CudaEmbed.*:CudaEncoder.*:CudaWhisper.*'
bench() { "$build/brisk" embed-bench --device cuda --type bf16 "$@"; }
off="BRISK_NO_CUDA_ENCODER_FUSE=1 BRISK_NO_CUDA_DENSE_ATTENTION_TC=1 BRISK_NO_CUDA_POOLING=1 BRISK_NO_CUDA_ATTENTION_BIAS=1 BRISK_NO_CUDA_SKIP_DEAD_WRITES=1"
for shape in bge-m3 bge-small; do
  echo "== $shape"; bench --shape "$shape"
  echo "== $shape, kill switches on"; env $off "$build/brisk" embed-bench --device cuda --type bf16 --shape "$shape"
  for s in BRISK_NO_CUDA_ENCODER_FUSE BRISK_NO_CUDA_DENSE_ATTENTION_TC BRISK_NO_CUDA_POOLING \
           BRISK_NO_CUDA_ATTENTION_BIAS BRISK_NO_CUDA_SKIP_DEAD_WRITES; do
    echo "== $shape, $s"; env "$s=1" "$build/brisk" embed-bench --device cuda --type bf16 --shape "$shape"
  done
done
echo "== bge-m3 per op"; BRISK_CUDA_KERNEL_TIMES=1 bench --shape bge-m3 -n 64 -r 1
echo "== bge-m3 per op, kill switches on"; env $off BRISK_CUDA_KERNEL_TIMES=1 "$build/brisk" embed-bench --device cuda \
  --type bf16 --shape bge-m3 -n 64 -r 1
