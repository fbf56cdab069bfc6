#!/usr/bin/env bash
# Fetches the official client SDKs the server system tests drive (npm packages, pinned):
# `openai`, `@anthropic-ai/sdk` and `ollama`, and `puppeteer-core` (drives the system Chromium
# for the chat page's test; it downloads no browser), into $BRISK_TEST_ASSETS/server (default
# <repo>/build/test-assets/server; a folder of its own, since npm prunes packages a later
# install does not name). Idempotent. Tests skip with a message when the SDKs are absent
# (fail in the required-assets mode, see docs/testing.md). `--check`: install nothing, exit 1
# when a pinned SDK is missing. Without npm: exit 0 with a note, or 1 in the required-assets
# mode (CI=true / BRISK_REQUIRE_ASSETS=1).
set -euo pipefail
check_only=0; [[ ${1:-} == --check ]] && check_only=1
required() { local r=${BRISK_REQUIRE_ASSETS:-}; [[ ( -n $r && $r != 0 ) || ( -z $r && ( ${CI:-} == true || ${CI:-} == 1 ) ) ]]; }
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${BRISK_TEST_ASSETS:-$ROOT/build/test-assets}/server"
PKGS=("openai@7.59.0" "@anthropic-ai/sdk@1.14.0" "ollama@0.6.4" "puppeteer-core@25.19.0")
ok=1
for spec in "${PKGS[@]}"; do
  name="${spec%@*}"; version="${spec##*@}"
  pj="$DEST/node_modules/$name/package.json"
  [[ -f "$pj" ]] && grep -q "\"version\": \"$version\"" "$pj" || ok=0
done
if ((ok)); then
  echo "fetch_server_test_assets: up to date in $DEST"
  exit 0
fi
if ((check_only)); then
  echo "fetch_server_test_assets: missing or not the pinned version in $DEST: ${PKGS[*]}" >&2
  exit 1
fi
if ! command -v npm >/dev/null; then
  if required; then echo "fetch_server_test_assets: npm not found and the SDKs are required" >&2; exit 1; fi
  echo "fetch_server_test_assets: npm not found; SDK tests will skip" >&2
  exit 0
fi
mkdir -p "$DEST"
[[ -f "$DEST/package.json" ]] || echo '{"private": true}' > "$DEST/package.json"
echo "fetch_server_test_assets: installing ${PKGS[*]} into $DEST"
PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$DEST" --no-audit --no-fund --silent "${PKGS[@]}"
