#!/usr/bin/env bash
# brisk generate / dump / make-random-model driven as a user would, on a random tiny GGUF
# (no shared data needed), and on the shared llama fixture when present.
set -euo pipefail
BIN=${BRISK_BIN:?BRISK_BIN not set}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$BIN" make-random-model --shape tiny --type q8_0 --out "$tmp/tiny.gguf" 2>/dev/null
out=$("$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids 1,2,3,4 -n 8 --show-ids --dump-logits "$tmp/logits.bin" 2>"$tmp/err")
ids_line=$(echo "$out" | tail -n 1)
[[ "$ids_line" =~ ^ids:( [0-9]+){8}$ ]] || { echo "bad ids line: $ids_line"; exit 1; }
grep -q "prompt: 4 tokens" "$tmp/err" || { echo "no prompt timing: $(cat "$tmp/err")"; exit 1; }
grep -q "tok/s" "$tmp/err" || { echo "no decode speed"; exit 1; }
[[ $(stat -c %s "$tmp/logits.bin") -eq $((1024 * 4)) ]] || { echo "logits file size wrong"; exit 1; }

# Greedy is deterministic; seeded sampling is reproducible.
out2=$("$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids 1,2,3,4 -n 8 --show-ids 2>/dev/null | tail -n 1)
[[ "$out2" == "$ids_line" ]] || { echo "greedy not deterministic"; exit 1; }
s1=$("$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids 5,6 -n 12 --temp 1.0 --seed 7 --show-ids 2>/dev/null | tail -n 1)
s2=$("$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids 5,6 -n 12 --temp 1.0 --seed 7 --show-ids 2>/dev/null | tail -n 1)
[[ "$s1" == "$s2" ]] || { echo "same seed gave different tokens"; exit 1; }

# Errors are one clear line and a non-zero exit.
if "$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids 1,99999 -n 2 2>"$tmp/err2"; then
  echo "out-of-range id accepted"; exit 1
fi
grep -q "out of range" "$tmp/err2" || { echo "unclear error: $(cat "$tmp/err2")"; exit 1; }

# dump writes an index and per-layer tensors.
"$BIN" dump --model "$tmp/tiny.gguf" --prompt-ids 1,2,3 --out "$tmp/dump" >/dev/null
python3 - "$tmp/dump" <<'PY'
import json, os, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "index.json")))
names = {(t["name"], t["layer"]) for t in idx["tensors"]}
for need in [("attn_norm", 0), ("l_out", 1), ("result_output", -1)]:
    assert need in names, need
for t in idx["tensors"]:
    r, c = t["shape"]
    assert os.path.getsize(os.path.join(d, t["file"])) == 4 * r * c, t
PY

# A real checkpoint with a tokenizer: the reference's greedy continuation.
if [[ -n "${BRISK_SHARED_DATA:-}" && -d "$BRISK_SHARED_DATA/models/llama/hf" ]]; then
  want=$(python3 -c "import json;r=json.load(open('$BRISK_SHARED_DATA/models/llama/ref.json'));print('ids: '+' '.join(map(str,r['greedy_continuation'][:16])))")
  ids=$(python3 -c "import json;r=json.load(open('$BRISK_SHARED_DATA/models/llama/ref.json'));print(','.join(map(str,r['input_ids'])))")
  got=$("$BIN" generate --model "$BRISK_SHARED_DATA/models/llama/hf" --prompt-ids "$ids" -n 16 --show-ids --kv-type f32 2>/dev/null | tail -n 1)
  [[ "$got" == "$want" ]] || { echo "llama greedy: got '$got' want '$want'"; exit 1; }
  # Tensor parallelism over 2 CPU ranks: the same continuation; a split the model refuses is one line.
  got_tp=$("$BIN" generate --model "$BRISK_SHARED_DATA/models/llama/hf" --prompt-ids "$ids" -n 16 --show-ids --kv-type f32 \
           --device cpu --tp 2 2>/dev/null | tail -n 1)
  [[ "$got_tp" == "$want" ]] || { echo "llama greedy with --tp 2: got '$got_tp' want '$want'"; exit 1; }
  if "$BIN" generate --model "$BRISK_SHARED_DATA/models/llama/hf" --prompt-ids 1,2 -n 1 --device cpu --tp 3 2>"$tmp/err4"; then
    echo "--tp 3 accepted for 4 heads"; exit 1
  fi
  grep -q "4 attention heads do not split over 3 ranks" "$tmp/err4" || { echo "unclear --tp error: $(cat "$tmp/err4")"; exit 1; }
  text=$("$BIN" generate --model "$BRISK_SHARED_DATA/models/llama/hf" --prompt "Hello" --raw -n 4 2>/dev/null)
  "$BIN" generate --model "$BRISK_SHARED_DATA/models/llama/hf" --prompt "Hello" -n 2 2>"$tmp/err3" >/dev/null
  grep -Eq "prompt: ([5-9]|[1-9][0-9]+) tokens" "$tmp/err3" || { echo "chat template not applied: $(cat "$tmp/err3")"; exit 1; }
  [[ -n "$text" ]] || { echo "no text streamed"; exit 1; }
fi
echo "generate.sh: ok"
