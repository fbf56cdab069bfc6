#!/usr/bin/env bash
# Installs, builds (release preset) and runs every test. The README's test command.
# In the required-assets mode (CI=true or BRISK_REQUIRE_ASSETS=1; .ci/run sets it) a failed
# asset fetch fails the run and so does a test skipped for a reason other than the hardware;
# outside it, tests whose inputs are missing skip with a message. The run ends with the count
# of tests run and skipped, and each skip's reason (scripts/ctest_summary.py; docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
required() { local r=${BRISK_REQUIRE_ASSETS:-}; [[ ( -n $r && $r != 0 ) || ( -z $r && ( ${CI:-} == true || ${CI:-} == 1 ) ) ]]; }
scripts/setup.sh
for fetch in scripts/fetch_test_assets.sh scripts/fetch_server_test_assets.sh; do
  if ! "$fetch"; then
    if required; then echo "test.sh: $fetch failed and the assets are required" >&2; exit 1; fi
    echo "test.sh: $fetch failed; the tests that need its assets will skip"
  fi
done
# Unity batches (as the asan preset): a clean build of everything in about two thirds of the
# time. Set BRISK_UNITY_BUILD=OFF to keep one object per file (incremental builds).
cmake --preset release -DBRISK_UNITY_BUILD="${BRISK_UNITY_BUILD:-ON}" >/dev/null
cmake --build --preset release
junit=build/release/ctest-junit.xml
status=0
ctest --preset release --output-junit "$PWD/$junit" || status=$?
python3 scripts/ctest_summary.py "$junit" || status=1
exit $status
