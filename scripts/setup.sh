#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the tools need. Idempotent.
set -euo pipefail
PKGS=(
  build-essential g++ cmake ninja-build pkg-config git
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libutf8proc-dev libcurl4-openssl-dev
  libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev zlib1g-dev
  libsndfile1-dev libsoxr-dev
  clang libclang-rt-14-dev
  python3 python3-jinja2 python3-numpy python3-jsonschema
  tmux curl
  chromium
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Node.js (for the SDK-driven server tests); the machine image may ship its own build.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm || true
fi
echo "setup: all packages present"
