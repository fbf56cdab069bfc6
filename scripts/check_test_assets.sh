#!/usr/bin/env bash
# Are the inputs the tests read present? The npm tokenizer packages and client SDKs (through the
# fetch scripts' --check) and the ../shared data folders. Run by ctest as `assets.present`:
# exit 0 when all are there; when one is missing, exit 77 (skip, with the list) or, in the
# required-assets mode (CI=true or BRISK_REQUIRE_ASSETS=1, set by .ci/run), exit 1.
# Usage: scripts/check_test_assets.sh [SHARED_DATA]
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
data=${1:-${BRISK_SHARED_DATA:-$ROOT/../shared/data}}
missing=()
"$ROOT"/scripts/fetch_test_assets.sh --check >/dev/null 2>&1 || missing+=("npm tokenizer packages (scripts/fetch_test_assets.sh)")
"$ROOT"/scripts/fetch_server_test_assets.sh --check >/dev/null 2>&1 || missing+=("client SDKs (scripts/fetch_server_test_assets.sh)")
command -v node >/dev/null || missing+=("node (the SDK tests run under it)")
command -v chromium >/dev/null || missing+=("chromium (scripts/setup.sh; the chat page's browser test)")
python3 -c 'import jinja2, jsonschema' 2>/dev/null || missing+=("python3-jinja2 / python3-jsonschema (scripts/setup.sh; the template oracle and the schema test)")
for d in vocab templates quant/index.json models; do
  [[ -e $data/$d ]] || missing+=("$data/$d (shared data)")
done
# Every architecture folder has its HF checkpoint and reference; the llama.cpp GGUFs where
# shared/README.md says they exist.
for dir in "$data"/models/*/; do
  arch=$(basename "$dir")
  [[ $arch == wave2 ]] && continue
  for f in hf/config.json hf/model.safetensors ref.json; do
    [[ -e $dir/$f ]] || missing+=("$dir$f (shared data)")
  done
  [[ $arch == qwen3_5* ]] && continue
  [[ -e $dir/model-f32.gguf ]] || missing+=("${dir}model-f32.gguf (shared data)")
done
if ((${#missing[@]} == 0)); then
  echo "assets: every test input is present"
  exit 0
fi
req=${BRISK_REQUIRE_ASSETS:-}
if [[ ( -n $req && $req != 0 ) || ( -z $req && ( ${CI:-} == true || ${CI:-} == 1 ) ) ]]; then
  printf 'FAIL: required test asset missing (CI / BRISK_REQUIRE_ASSETS=1): %s\n' "${missing[@]}"
  exit 1
fi
printf 'skip: missing %s\n' "${missing[@]}"
exit 77
