#!/usr/bin/env bash
# Speculative decoding from the command line: generate with --spec ngram and with a draft model
# gives the ids of plain greedy decoding and reports its acceptance with --verbose; bench --spec
# oracle and --verify report their rows; the bad inputs are usage errors naming what is wrong.
set -euo pipefail
BIN=${BRISK_BIN:?BRISK_BIN not set}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$BIN" make-random-model --shape tiny --type q8_0 --out "$tmp/tiny.gguf" 2>/dev/null
"$BIN" make-random-model --shape tiny --type q8_0 --seed 9 --out "$tmp/draft.gguf" 2>/dev/null
ids=1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8
plain=$("$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids $ids -n 48 --show-ids 2>/dev/null | tail -n 1)
for args in "--spec ngram" "--spec ngram --draft-max 7 --no-spec-adaptive" "--draft-model $tmp/draft.gguf" "-md $tmp/draft.gguf --draft-max 2"; do
  got=$("$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids $ids -n 48 --show-ids --verbose $args 2>"$tmp/err" | tail -n 1)
  [[ "$got" == "$plain" ]] || { echo "$args: got '$got' want '$plain'"; exit 1; }
  grep -Eq "speculative \((ngram|draft)\): [0-9]+ verify steps, [0-9]+ of [0-9]+ drafted tokens kept \([0-9.]+ %\)" "$tmp/err" \
    || { echo "$args: no acceptance line: $(cat "$tmp/err")"; exit 1; }
done
# The kill switch: plain decoding, no verify steps.
BRISK_NO_SPEC=1 "$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids $ids -n 16 --verbose --spec ngram 2>"$tmp/err" >/dev/null
grep -q "speculative (ngram): 0 verify steps" "$tmp/err" || { echo "BRISK_NO_SPEC ignored: $(cat "$tmp/err")"; exit 1; }

# Usage errors (exit 2) that name the option; a draft model of another vocabulary (exit 1).
for bad in "--draft-max 0" "--draft-max -3" "--spec bogus" "--spec ngram --draft-min 5 --draft-max 2"; do
  set +e
  "$BIN" generate --model "$tmp/tiny.gguf" --prompt-ids 1,2 -n 2 $bad 2>"$tmp/err" >/dev/null
  rc=$?
  set -e
  [[ $rc -eq 2 ]] || { echo "'$bad': exit $rc, want 2: $(cat "$tmp/err")"; exit 1; }
  grep -q -- "--draft\|--spec" "$tmp/err" || { echo "'$bad': unclear error: $(cat "$tmp/err")"; exit 1; }
done
M=${BRISK_SHARED_DATA:-}/models
if [[ -n "${BRISK_SHARED_DATA:-}" && -d "$M/llama/hf" && -d "$M/wave2/qwen3_5_moe/hf" ]]; then
  set +e
  "$BIN" generate --model "$M/llama/hf" --prompt-ids 1,2 -n 2 --draft-model "$M/wave2/qwen3_5_moe/hf" 2>"$tmp/err" >/dev/null
  rc=$?
  set -e
  [[ $rc -eq 1 ]] || { echo "other vocabulary: exit $rc: $(cat "$tmp/err")"; exit 1; }
  grep -q "512" "$tmp/err" && grep -q "1024" "$tmp/err" || { echo "sizes not named: $(cat "$tmp/err")"; exit 1; }
  # A hybrid target (recurrent state rolled back) with n-gram drafts and a hybrid draft model.
  h=$M/qwen3_5/hf
  hp=$("$BIN" generate --model "$h" --prompt-ids $ids -n 40 --show-ids 2>/dev/null | tail -n 1)
  for args in "--spec ngram" "--draft-model $M/qwen3_5_moe/hf"; do
    got=$("$BIN" generate --model "$h" --prompt-ids $ids -n 40 --show-ids $args 2>/dev/null | tail -n 1)
    [[ "$got" == "$hp" ]] || { echo "qwen3_5 $args: got '$got' want '$hp'"; exit 1; }
  done
fi

# bench: the oracle keeps every draft; --verify prints one ratio per k.
"$BIN" bench --model "$tmp/tiny.gguf" -p 0 -n 24 -r 1 --spec oracle --draft-max 4 --verify 1,4 --bw-mib 8 >"$tmp/bench" 2>&1
grep -q "tg24 spec-oracle k4" "$tmp/bench" || { echo "no spec row: $(cat "$tmp/bench")"; exit 1; }
grep -q "(100.0 %)" "$tmp/bench" || { echo "oracle drafts not all kept: $(cat "$tmp/bench")"; exit 1; }
grep -q "verify k=4 (5 tokens)" "$tmp/bench" || { echo "no verify row: $(cat "$tmp/bench")"; exit 1; }
grep -q "speculative / plain" "$tmp/bench" || { echo "no ratio: $(cat "$tmp/bench")"; exit 1; }
echo "speculative.sh: ok"
