#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset, clang) and runs each for a short smoke period,
# seeded with real files. Usage: scripts/fuzz_smoke.sh [SECONDS_PER_TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j2
shared=../shared/data
shopt -s nullglob
for bin in build/fuzz/fuzz/fuzz_*; do
  [[ -x $bin && -f $bin ]] || continue
  name=$(basename "$bin")
  corpus=build/fuzz/corpus/$name
  mkdir -p "$corpus"
  # Seeds: fuzz/seeds/NAME/* in the repo, plus real files chosen by the target's suffix.
  for f in fuzz/seeds/"$name"/*; do cp -f "$f" "$corpus/"; done
  case $name in
    fuzz_gguf) for f in "$shared"/vocab/*.gguf "$shared"/models/*/model-q8_0.gguf; do
                 [[ $(stat -c %s "$f") -lt 2000000 ]] && cp -f "$f" "$corpus/"; done ;;
    fuzz_safetensors) for f in "$shared"/models/*/hf/model.safetensors; do
                 cp -f "$f" "$corpus/$(basename "$(dirname "$(dirname "$f")")").safetensors"; done ;;
  esac
  echo "fuzz: $name for ${secs}s ($(ls "$corpus" | wc -l) seeds)"
  "$bin" -max_total_time="$secs" -rss_limit_mb=4096 -max_len=4000000 "$corpus" 2>&1 | tail -3
done
echo "fuzz: smoke run finished without a crash"
