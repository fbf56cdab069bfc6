# Sourced by the shell system tests: skip_missing MESSAGE exits 77 (skip) when a test input is
# absent, or 1 in the required-assets mode (CI=true or BRISK_REQUIRE_ASSETS=1, set by .ci/run).
skip_missing() {
  local req=${BRISK_REQUIRE_ASSETS:-}
  if [[ ( -n $req && $req != 0 ) || ( -z $req && ( ${CI:-} == true || ${CI:-} == 1 ) ) ]]; then
    echo "FAIL: required test asset missing (CI / BRISK_REQUIRE_ASSETS=1): $*"
    exit 1
  fi
  echo "skip: $*"
  exit 77
}
