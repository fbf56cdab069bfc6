#!/usr/bin/env bash
# `brisk cuda-bench` builds a random-weight model of the shape table (models/random_model.cpp)
# and runs it through Model / Context on the CUDA backend: bad options are usage errors
# everywhere; on a GPU every mode (decode with and without graphs, batches, matmuls only,
# prefill, Q8_0 KV, a mixture-of-experts shape, verify-shaped steps of N tokens) runs on small
# shapes and prints its figures.
set -euo pipefail
BIN=${BRISK_BIN:?BRISK_BIN not set}
out=$("$BIN" cuda-bench --shape no-such-shape 2>&1) && { echo "an unknown shape was accepted"; exit 1; } || rc=$?
[[ $rc -eq 2 && $out == *"qwen3-30b-a3b"* ]] || { echo "unknown shape: exit $rc, '$out'"; exit 1; }
out=$("$BIN" cuda-bench --type no-such-type 2>&1) && { echo "an unknown type was accepted"; exit 1; } || rc=$?
[[ $rc -eq 2 && $out == *"--type"* ]] || { echo "unknown type: exit $rc, '$out'"; exit 1; }
out=$("$BIN" cuda-bench --kv-type f32 2>&1) && { echo "an F32 KV cache was accepted"; exit 1; } || rc=$?
[[ $rc -eq 2 ]] || { echo "--kv-type f32: exit $rc, '$out'"; exit 1; }
out=$("$BIN" cuda-bench --tokens 1,0 2>&1) && { echo "--tokens 0 was accepted"; exit 1; } || rc=$?
[[ $rc -eq 2 && $out == *"--tokens"* ]] || { echo "--tokens 0: exit $rc, '$out'"; exit 1; }
out=$("$BIN" cuda-bench --tokens 2 --prefill 64 2>&1) && { echo "--tokens with --prefill was accepted"; exit 1; } || rc=$?
[[ $rc -eq 2 ]] || { echo "--tokens with --prefill: exit $rc, '$out'"; exit 1; }
if ! "$BIN" info | grep -q '^cuda: built' || ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "cuda_bench.sh: no GPU, the runs skipped"
  exit 77
fi
check() {
  local want=$1; shift
  local o
  o=$("$BIN" cuda-bench "$@" 2>&1) || { echo "cuda-bench $*: failed: $o"; exit 1; }
  [[ $(grep -c "$want" <<< "$o") -ge 1 ]] || { echo "cuda-bench $*: no '$want' in '$o'"; exit 1; }
  echo "$o"
}
check "tok/s" --shape tiny --type q8_0 --steps 4 --past 16
check "graphs off" --shape llama-3.2-1b --layers 1 --type q4_k_m --steps 4 --past 16 --graphs off
check "batch 4" --shape tiny --type bf16 --steps 4 --past 16 --batch 4 --graphs on
check "matmuls only" --shape qwen2.5-0.5b --layers 2 --type q8_0 --steps 4 --gemv-only yes --graphs on
check "prefill pp64" --shape qwen2.5-0.5b --layers 2 --type q8_0 --prefill 64 --steps 2
check "step of 5 tokens" --shape qwen2.5-0.5b --layers 2 --type q4_k_m --steps 4 --past 64 --tokens 1,5 --graphs on
check "matmuls only) step of 8" --shape qwen2.5-0.5b --layers 2 --type q8_0 --steps 4 --tokens 1,8 --gemv-only yes --graphs on
check " KV)" --shape qwen2.5-0.5b --layers 2 --type q8_0 --steps 4 --past 64 --kv-type q8_0 --graphs on
check "tok/s" --shape qwen3-30b-a3b --layers 1 --type q4_k_m --steps 4 --past 16 --graphs on
