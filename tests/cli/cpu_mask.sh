#!/usr/bin/env bash
# BRISK_CPU_MASK driven through the binary: `brisk info` names the kernel builds each masked
# level runs (so a mask that did nothing would show), a bad mask is one clear error, and
# generation on Q4_1 / Q5_1 files (the formats whose AVX-512 kernels once held AVX-VNNI
# instructions) runs at every level this CPU has, Zen 4's (AVX-512 without AVX-VNNI) included.
set -euo pipefail
BIN=${BRISK_BIN:?BRISK_BIN not set}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The output is captured before grep reads it: `grep -q` stops reading at its first match, and
# under pipefail the writer's SIGPIPE would fail the check.
info_of() { BRISK_CPU_MASK="$1" "$BIN" info; }
kernels_line() { local out; out=$(info_of "$1"); grep '^cpu kernels: ' <<< "$out"; }

line=$(kernels_line scalar)
[[ "$line" == "cpu kernels: scalar (dot scalar, gemm none, attention scalar)" ]] || { echo "scalar: $line"; exit 1; }
scalar_info=$(info_of scalar)
grep -q '^cpu: scalar$' <<< "$scalar_info" || { echo "scalar mask still reports features"; exit 1; }
grep -Eq '^  BRISK_CPU_MASK +scalar ' <<< "$scalar_info" || { echo "switch value not shown"; exit 1; }

hw=$("$BIN" info | sed -n 's/^cpu: //p')
has() { [[ " $hw " == *" $1 "* ]]; }
declare -A want=(
  [avx2]="avx2 (dot avx2, gemm avx2, attention avx2)"
  [avx2-vnni]="avx2-vnni (dot avx2-vnni, gemm avx2-vnni, attention avx2)"
  [avx512]="avx512 (dot avx512, gemm avx512, attention avx512)"
  [avx512-vbmi]="avx512-vbmi (dot avx512 + vbmi, gemm avx512, attention avx512)"
)
declare -A needs=([avx2]="avx2" [avx2-vnni]="avx2 avx_vnni" [avx512]="avx2 avx512 avx512_vnni"
                  [avx512-vbmi]="avx2 avx512 avx512_vnni avx512_vbmi")
levels=(scalar)
for level in avx2 avx2-vnni avx512 avx512-vbmi; do
  ok=1
  for f in ${needs[$level]}; do has "$f" || ok=0; done
  if [[ $ok == 0 ]]; then echo "level $level is not on this CPU: skipped"; continue; fi
  levels+=("$level")
  line=$(kernels_line "$level")
  [[ "$line" == "cpu kernels: ${want[$level]}" ]] || { echo "$level: $line"; exit 1; }
done
if has avx512_vbmi && has avx512_vnni; then
  line=$(kernels_line "avx512-vbmi,-avx_vnni")
  [[ "$line" == "cpu kernels: ${want[avx512-vbmi]}" ]] || { echo "zen4: $line"; exit 1; }
  grep '^cpu: ' <<< "$(info_of "avx512-vbmi,-avx_vnni")" | grep -vq avx_vnni || { echo "avx_vnni kept"; exit 1; }
  levels+=("avx512-vbmi,-avx_vnni")
fi

if BRISK_CPU_MASK=avx3 "$BIN" info >/dev/null 2>"$tmp/err"; then echo "bad mask accepted"; exit 1; fi
grep -q "BRISK_CPU_MASK: 'avx3' is neither a level nor a feature" "$tmp/err" || { echo "unclear: $(cat "$tmp/err")"; exit 1; }

for type in q4_1 q5_1; do
  "$BIN" make-random-model --shape tiny --type "$type" --out "$tmp/$type.gguf" 2>/dev/null
  for mask in "${levels[@]}"; do
    BRISK_CPU_MASK="$mask" "$BIN" generate --model "$tmp/$type.gguf" --prompt-ids 1,2,3,4,5,6,7,8,9,10,11,12 \
      -n 4 --show-ids >"$tmp/out" 2>"$tmp/err" || { echo "$type at $mask: $(cat "$tmp/err")"; exit 1; }
    grep -Eq '^ids:( [0-9]+){4}$' "$tmp/out" || { echo "$type at $mask: $(cat "$tmp/out")"; exit 1; }
  done
done
echo "cpu_mask: levels ${levels[*]}"
