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
    fuzz_tokenizer_json) for f in "$shared"/models/*/hf/tokenizer.json; do
                 n=${f#"$shared"/}; cp -f "$f" "$corpus/${n//\//_}"; done ;;
    fuzz_jinja) for f in "$shared"/templates/*.jinja "$shared"/models/*/hf/chat_template.jinja; do
                 n=${f#"$shared"/}; cp -f "$f" "$corpus/${n//\//_}"; done ;;
  esac
  chmod -R u+w "$corpus"
  # Inputs stay near the size of real ones: binary model files are large, text parsers' are not.
  case $name in
    fuzz_gguf|fuzz_safetensors) max_len=4000000 ;;
    fuzz_tokenizer_json) max_len=262144 ;;
    *) max_len=65536 ;;
  esac
  echo "fuzz: $name for ${secs}s ($(ls "$corpus" | wc -l) seeds)"
  log=build/fuzz/corpus/$name.log
  if ! "$bin" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -max_len="$max_len" \
       -artifact_prefix=build/fuzz/"$name"- "$corpus" >"$log" 2>&1; then
    tail -60 "$log"
    echo "fuzz: $name failed; the input is saved as build/fuzz/$name-*" >&2
    exit 1
  fi
  tail -2 "$log"
done
echo "fuzz: smoke run finished without a crash"
