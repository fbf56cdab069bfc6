#!/usr/bin/env bash
# System test for `brisk inspect`: every vocabulary GGUF and the tiny checkpoints inspect with
# exit 0 (a checkpoint of an architecture brisk does not run: listed, then exit 1); corrupted copies (truncations, absurd counts and lengths, bad magic/version) exit
# non-zero with exactly one line on stderr; seeded random byte flips never crash.
set -uo pipefail
bin=${BRISK_BIN:?BRISK_BIN not set}
data=${BRISK_SHARED_DATA:-}
shopt -s nullglob
vocab=("$data"/vocab/*.gguf)
source "$(dirname "$0")/lib/assets.bash"
if [[ -z $data || ${#vocab[@]} -eq 0 ]]; then
  skip_missing "no GGUF files under BRISK_SHARED_DATA/vocab ('$data')"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_ok PATH [ARGS...]: exit 0, something on stdout.
expect_ok() {
  local path=$1; shift
  if ! "$bin" inspect "$path" "$@" >"$tmp/out" 2>"$tmp/err"; then
    fail "inspect $path $* exited non-zero: $(head -c 300 "$tmp/err")"
  elif ! grep -q "tensors" "$tmp/out"; then
    fail "inspect $path $* printed no tensor section"
  fi
}

# expect_error PATH WHAT: non-zero exit (not a signal), exactly one line on stderr.
expect_error() {
  local path=$1 what=$2 rc
  "$bin" inspect "$path" >/dev/null 2>"$tmp/err"; rc=$?
  if [[ $rc -eq 0 ]]; then fail "$what: exit 0"; return; fi
  if [[ $rc -gt 128 ]]; then fail "$what: killed by signal $((rc - 128))"; return; fi
  local lines; lines=$(wc -l <"$tmp/err")
  [[ $lines -eq 1 ]] || fail "$what: $lines lines on stderr: $(head -c 300 "$tmp/err")"
}

# make_variants SRC DIR: writes corrupted copies of SRC into DIR, named by what they break.
# Fixed patches must fail; flip-*.gguf (seeded random bit flips) may parse but never crash.
make_variants() {
  python3 - "$@" <<'PY'
import os, random, sys
src, out = sys.argv[1], sys.argv[2]
orig = open(src, 'rb').read()
def patched(off, hexbytes):
    b = bytearray(orig)
    p = bytes.fromhex(hexbytes)
    b[off:off + len(p)] = p
    return b
variants = {
    'bad-magic': patched(0, '58474746'),
    'version-9': patched(4, '09000000'),
    'absurd-tensor-count': patched(8, 'ffffffffffffff7f'),
    'absurd-metadata-count': patched(16, 'ffffffffffffffff'),
    'absurd-key-length': patched(24, '0000000000000001'),
    'one-tensor-too-many': patched(8, '0100000000000000'),
}
for cut in [0, 3, 7, 15, 23, 24, 31, 40, 100, 1000, len(orig) // 3, len(orig) // 2, len(orig) - 40]:
    variants['cut-%d' % cut] = orig[:cut]
for name, b in variants.items():
    open(os.path.join(out, name + '.gguf'), 'wb').write(b)
for seed in range(1, 9):
    r = random.Random(seed)
    b = bytearray(orig)
    for _ in range(8):
        i = r.randrange(min(len(b), 4096)) if r.random() < 0.7 else r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)
    open(os.path.join(out, 'flip-%d.gguf' % seed), 'wb').write(b)
PY
}

for f in "${vocab[@]}"; do
  name=$(basename "$f" .gguf)
  expect_ok "$f"
  expect_ok "$f" --json
  python3 -m json.tool <"$tmp/out" >/dev/null || fail "$name --json is not valid JSON"
  rm -rf "$tmp/v" && mkdir "$tmp/v"
  make_variants "$f" "$tmp/v" || fail "$name: cannot make corrupted copies"
  for v in "$tmp"/v/*.gguf; do
    what="$name $(basename "$v" .gguf)"
    if [[ $(basename "$v") == flip-* ]]; then
      "$bin" inspect "$v" >/dev/null 2>"$tmp/err"; rc=$?
      [[ $rc -le 128 ]] || fail "$what: killed by signal $((rc - 128))"
      [[ $rc -eq 0 || $(wc -l <"$tmp/err") -eq 1 ]] || fail "$what: multi-line error"
    else
      expect_error "$v" "$what"
    fi
  done
done

# expect_listed PATH: the listing on stdout; exit 0, or (an architecture brisk does not run yet)
# exit 1 with the listing marked and one error line saying so.
expect_listed() {
  local path=$1 rc
  "$bin" inspect "$path" >"$tmp/out" 2>"$tmp/err"; rc=$?
  grep -q "tensors" "$tmp/out" || fail "inspect $path printed no tensor section"
  if [[ $rc -ne 0 ]]; then
    { [[ $rc -eq 1 ]] && [[ $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "is not supported by brisk" "$tmp/err" &&
      grep -q "^architecture: .* (not supported by brisk)$" "$tmp/out"; } ||
      fail "inspect $path: exit $rc: $(head -c 300 "$tmp/err")"
  fi
}
for m in "$data"/models/*/model-q8_0.gguf "$data"/models/*/hf; do
  expect_listed "$m"
done
# Content checks: architecture, types, and JSON totals that add up.
check_model() {
  local path=$1 arch=$2 type=$3
  [[ -e $path ]] || return 0
  "$bin" inspect "$path" >"$tmp/out" 2>"$tmp/err" || { fail "inspect $path"; return; }
  grep -q "^architecture: $arch\$" "$tmp/out" || fail "$path: architecture is not $arch"
  grep -q "  $type " "$tmp/out" || fail "$path: no $type tensor listed"
  "$bin" inspect "$path" --json >"$tmp/out.json" || { fail "inspect --json $path"; return; }
  python3 - "$tmp/out.json" <<'PY' || fail "$path: --json totals do not add up"
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
assert t["tensors"] == len(r["tensors"]) > 0
assert t["parameters"] == sum(x["elements"] for x in r["tensors"])
assert t["bytes"] == sum(x["bytes"] for x in r["tensors"])
assert abs(t["bits_per_weight"] - 8 * t["bytes"] / t["parameters"]) < 1e-9
PY
}
check_model "$data/models/llama/model-q8_0.gguf" llama Q8_0
check_model "$data/models/llama/model-f32.gguf" llama F32
check_model "$data/models/llama/hf" LlamaForCausalLM F32
check_model "$data/models/qwen3_moe/hf/model.safetensors" Qwen3MoeForCausalLM F32

# A model GGUF cut inside its data section, and a safetensors file cut in its data.
for m in "$data"/models/llama/model-q8_0.gguf; do
  head -c $(($(stat -c %s "$m") - 1000)) "$m" >"$tmp/cut.gguf"
  expect_error "$tmp/cut.gguf" "model gguf truncated in data"
done
for m in "$data"/models/llama/hf/model.safetensors; do
  head -c $(($(stat -c %s "$m") - 4)) "$m" >"$tmp/cut.safetensors"
  expect_error "$tmp/cut.safetensors" "safetensors truncated in data"
  { printf '\xff\xff\xff\xff\x00\x00\x00\x00'; tail -c +9 "$m"; } >"$tmp/bad.safetensors"
  expect_error "$tmp/bad.safetensors" "safetensors absurd header length"
done
expect_error "$tmp/does-not-exist.gguf" "missing file"

if [[ $failures -gt 0 ]]; then
  echo "inspect: $failures failures"
  exit 1
fi
echo "inspect: all checks passed"
