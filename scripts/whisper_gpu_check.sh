#!/usr/bin/env bash
# Whisper on the GPU of this machine: builds brisk in release with the CUDA backend for sm_90
# (H100/H200), runs the CUDA encoder-op tests, Whisper on the GPU against transformers (graphs
# against launch by launch), the CPU Whisper tests (with the project's own fixtures when they
# exist), then `brisk transcribe --device cuda` on the shared fixture and the speed figures of
# docs/speech.md: transcribe-bench at the large-v3-turbo shape (one stream, 16 streams, the dense
# attention's switch) and the base shape.
# Usage: scripts/whisper_gpu_check.sh [build-dir]   (JOBS=N for the build parallelism)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build/cuda}
cmake -S "$src" -B "$build" -G Ninja -DBRISK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_BUILD_TYPE=Release -DBRISK_BENCH=OFF
cmake --build "$build" --target brisk_tests brisk_cli -j "${JOBS:-8}"
"$build/brisk" inspect --devices
"$build/tests/brisk_tests" --gtest_filter='CudaEncoder*:CudaWhisper*:Whisper*:Fixtures/WhisperOwnFixture*'
fixture=${BRISK_SHARED_DATA:-$src/../shared/data}/models/wave2/whisper_tiny_random
if [ -d "$fixture" ]; then
  "$build/brisk" transcribe -m "$fixture/hf" "$fixture/input.wav" --device cuda --prompt-ids 1,33,44,55,66 \
    -n 12 --show-ids  # transformers: greedy_continuation of ref.json
fi
"$build/brisk" transcribe-bench --device cuda --shape whisper-large-v3-turbo --type f16 -n 64 --windows 5
"$build/brisk" transcribe-bench --device cuda --shape whisper-large-v3-turbo --type f16 -n 64 --windows 3 --streams 16
BRISK_NO_CUDA_DENSE_ATTENTION=1 "$build/brisk" transcribe-bench --device cuda --shape whisper-large-v3-turbo --type f16 \
  -n 64 --windows 3
"$build/brisk" transcribe-bench --device cuda --shape whisper-base --type f16 -n 64 --windows 5
