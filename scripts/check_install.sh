#!/usr/bin/env bash
# Checks `cmake --install` of a build tree: installs it under a temporary prefix, runs the
# installed binary, then builds a small program against the installed package
# (find_package(brisk), brisk::brisk) and, when the shared fixtures are present, runs it on a
# tiny model: the program loads it, tokenizes a prompt and decodes it through the public API
# (runtime/engine_api.h). Usage: scripts/check_install.sh BUILD_DIR   (ctest: install.prefix)
set -euo pipefail
build=$(cd "${1:?usage: check_install.sh BUILD_DIR}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
test -x "$prefix/bin/brisk" || { echo "check_install: no bin/brisk under the prefix"; exit 1; }
"$prefix/bin/brisk" --version | grep -q '^brisk ' || { echo "check_install: installed brisk --version failed"; exit 1; }
test -f "$prefix/include/brisk/runtime/engine_api.h" || { echo "check_install: headers missing"; exit 1; }
ls "$prefix"/lib*/libbrisk.a >/dev/null || { echo "check_install: libbrisk.a missing"; exit 1; }
if [[ -e "$prefix/include/brisk/cli" ]]; then echo "check_install: cli/ headers installed"; exit 1; fi

# A consumer of the installed package, component `runtime` alone installing only the binary.
cmake --install "$build" --prefix "$tmp/runtime-only" --component runtime >/dev/null
[[ "$(cd "$tmp/runtime-only" && find . -type f)" == "./bin/brisk" ]] ||
  { echo "check_install: component runtime installs more than bin/brisk"; exit 1; }

mkdir -p "$tmp/app"
cat >"$tmp/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(brisk_consumer LANGUAGES C CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(brisk REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE brisk::brisk)
CMAKE
cat >"$tmp/app/main.cpp" <<'CPP'
// Loads a model, tokenizes a prompt, decodes it and prints the most likely next token id.
#include <algorithm>
#include <cstdio>

#include "runtime/engine_api.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: consumer MODEL\n");
    return 0;
  }
  auto model = brisk::Model::load({.path = argv[1], .n_threads = 1});
  auto ctx = brisk::Context::create(model, {.n_ctx = 64, .n_threads = 1, .device = "cpu"});
  const std::vector<int32_t> ids = model->tokenizer()->encode("Hello, world", {});
  std::vector<brisk::BatchToken> batch;
  for (size_t i = 0; i < ids.size(); ++i)
    batch.push_back({.token = ids[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == ids.size()});
  ctx->decode(batch);
  const float* logits = ctx->logits(0);
  std::printf("%zu prompt tokens, next %ld\n", ids.size(),
              long(std::max_element(logits, logits + ctx->n_vocab()) - logits));
  return 0;
}
CPP
cmake -S "$tmp/app" -B "$tmp/app/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  >"$tmp/consumer-configure.log" 2>&1 || { cat "$tmp/consumer-configure.log"; exit 1; }
cmake --build "$tmp/app/build" >"$tmp/consumer-build.log" 2>&1 || { cat "$tmp/consumer-build.log"; exit 1; }
"$tmp/app/build/consumer" | grep -q usage

model=${BRISK_SHARED_DATA:-}/models/llama/model-q8_0.gguf
if [[ -n "${BRISK_SHARED_DATA:-}" && -f "$model" ]]; then
  out=$("$tmp/app/build/consumer" "$model")
  [[ "$out" =~ ^[0-9]+\ prompt\ tokens,\ next\ [0-9]+$ ]] || { echo "check_install: consumer printed '$out'"; exit 1; }
  echo "check_install: installed, consumer built and ran: $out"
else
  echo "check_install: installed and consumer built (no shared fixture model to run it on)"
fi
