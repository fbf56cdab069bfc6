#!/usr/bin/env bash
# Installs, builds (release preset) and runs every test. The README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch_test_assets.sh || echo "test.sh: test assets unavailable; the tests that need them will skip"
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release
