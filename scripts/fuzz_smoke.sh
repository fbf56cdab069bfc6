#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset, clang) and runs each for a short smoke period,
# seeded with real files and with header-only / metadata-only cuts of the binary ones.
# Usage: scripts/fuzz_smoke.sh [SECONDS_PER_TARGET]
# Without an argument each target gets its own time (target_secs below, docs/fuzzing.md);
# with one, every target gets that many seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
secs_all=${1:-}
# Seconds per target in CI, set from where each target's coverage stops growing (docs/fuzzing.md).
target_secs() {
  case $1 in
    fuzz_model_gguf|fuzz_gguf) echo 40 ;;
    fuzz_model_safetensors|fuzz_jinja|fuzz_tokenizer_to_gguf) echo 30 ;;
    fuzz_tokenizer_gguf) echo 15 ;;
    fuzz_json_constraint|fuzz_server_head) echo 10 ;;
    *) echo 20 ;;
  esac
}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j2 --target brisk_fuzzers
shared=../shared/data
shopt -s nullglob
# One target per core at a time (libFuzzer runs on one thread): each gets its seconds, the run
# takes the sum over the cores. Each target's summary is printed when it ends.
jobs=$(nproc 2>/dev/null || echo 1)
run_target() {
  local bin=$1 name corpus f n d max_len secs log
  name=$(basename "$bin")
  corpus=build/fuzz/corpus/$name
  mkdir -p "$corpus"
  # Seeds: fuzz/seeds/NAME/* in the repo, plus real files chosen by the target's suffix.
  for f in fuzz/seeds/"$name"/*; do cp -f "$f" "$corpus/"; done
  case $name in
    fuzz_gguf) for f in "$shared"/vocab/*.gguf "$shared"/models/*/model-q8_0.gguf; do
                 [[ $(stat -c %s "$f") -lt 2000000 ]] && cp -f "$f" "$corpus/"; done
               for f in "$shared"/models/*/model-q8_0.gguf; do
                 n=$(basename "$(dirname "$f")")
                 python3 fuzz/gguf_header_seed.py "$f" "$corpus/$n-header.gguf"
                 python3 fuzz/gguf_header_seed.py --metadata-only "$f" "$corpus/$n-metadata.gguf"; done ;;
    fuzz_model_gguf) for f in "$shared"/models/*/model-q8_0.gguf; do
                 cp -f "$f" "$corpus/$(basename "$(dirname "$f")").gguf"; done ;;
    fuzz_model_safetensors)  # config.json, a NUL byte, model.safetensors
               for d in "$shared"/models/*/hf tests/fixtures/models/*; do
                 [[ -f $d/config.json && -f $d/model.safetensors ]] || continue
                 [[ $(stat -c %s "$d/model.safetensors") -lt 1200000 ]] || continue
                 n=${d#"$shared"/models/}; n=${n//\//_}
                 { cat "$d/config.json"; printf '\0'; cat "$d/model.safetensors"; } > "$corpus/$n.bin"; done ;;
    fuzz_tokenizer_gguf) for f in "$shared"/vocab/*.gguf; do
                 [[ $(stat -c %s "$f") -lt 2000000 ]] && cp -f "$f" "$corpus/"; done
               for f in "$shared"/models/*/model-q8_0.gguf; do
                 python3 fuzz/gguf_header_seed.py --metadata-only "$f" "$corpus/$(basename "$(dirname "$f")").gguf"; done ;;
    fuzz_safetensors) for f in "$shared"/models/*/hf/model.safetensors; do
                 cp -f "$f" "$corpus/$(basename "$(dirname "$(dirname "$f")")").safetensors"; done ;;
    fuzz_tokenizer_json) for f in "$shared"/models/*/hf/tokenizer.json; do
                 n=${f#"$shared"/}; cp -f "$f" "$corpus/${n//\//_}"; done ;;
    fuzz_tokenizer_to_gguf)  # tokenizer.json, NUL, tokenizer_config.json, NUL, config.json
               for d in "$shared"/models/*/hf; do
                 [[ -f $d/tokenizer.json ]] || continue
                 n=${d#"$shared"/models/}; n=${n//\//_}
                 { cat "$d/tokenizer.json"; printf '\0'; cat "$d/tokenizer_config.json" 2>/dev/null || true
                   printf '\0'; cat "$d/config.json" 2>/dev/null || true; } > "$corpus/$n.bin"; done ;;
    fuzz_jinja) for f in "$shared"/templates/*.jinja "$shared"/models/*/hf/chat_template.jinja; do
                 n=${f#"$shared"/}; cp -f "$f" "$corpus/${n//\//_}"; done ;;
  esac
  chmod -R u+w "$corpus"
  # Inputs stay near the size of real ones: binary model files are large, text parsers' are not.
  case $name in
    fuzz_gguf|fuzz_safetensors|fuzz_tokenizer_gguf) max_len=4000000 ;;
    fuzz_model_gguf|fuzz_model_safetensors) max_len=1300000 ;;
    fuzz_tokenizer_json|fuzz_tokenizer_to_gguf) max_len=262144 ;;
    *) max_len=65536 ;;
  esac
  secs=${secs_all:-$(target_secs "$name")}
  log=build/fuzz/corpus/$name.log
  local seeds; seeds=$(ls "$corpus" | wc -l)
  if ! "$bin" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -max_len="$max_len" \
       -artifact_prefix=build/fuzz/"$name"- "$corpus" >"$log" 2>&1; then
    tail -60 "$log"
    echo "fuzz: $name failed; the input is saved as build/fuzz/$name-*" >&2
    return 1
  fi
  # The executions and the coverage at the end (libFuzzer's last status line).
  echo "fuzz: $name for ${secs}s ($seeds seeds): $(grep -E '^#[0-9]+' "$log" | tail -1)"
}
failed=0
running=0
for bin in build/fuzz/fuzz/fuzz_*; do
  [[ -x $bin && -f $bin ]] || continue
  if ((running >= jobs)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  run_target "$bin" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
((failed == 0)) || { echo "fuzz: a target failed (above)" >&2; exit 1; }
echo "fuzz: smoke run finished without a crash"
