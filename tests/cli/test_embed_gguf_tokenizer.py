#!/usr/bin/env python3
"""System test: an encoder embedding folder with a WordPiece or Unigram tokenizer.json converts
(`brisk quantize FOLDER OUT F32`) into a GGUF that carries its tokenizer (bert / t5 keys), and
`brisk embed -m out.gguf TEXT...` then gives the same token counts and vectors as the folder.
The folders are the repository's tiny BERT (tests/fixtures/models/embed_bert_cls) and
XLM-RoBERTa (embed_xlmr_mean) checkpoints, which ship without tokenizer files, with a
tokenizer written here for their 512-row vocabularies: a lowercasing WordPiece (BERT layout)
and a Unigram with XLM-RoBERTa's normalizer, pre-tokenizer and template. Exit 77 = skipped."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import brisk, main  # noqa: E402

SOURCE = os.environ.get("BRISK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(SOURCE, "tests", "fixtures", "models")
FOLDERS = ("embed_bert_cls", "embed_xlmr_mean")

SPACE = "\u2581"
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Hello, World!  again   and again ",
         "naïve café résumé", "embeddings: 42 tokens? maybe", "x"]
WORDS = ("the quick brown fox jumps over lazy dog hello world again and cafe resume naive embed "
         "token tokens may be ding s 42 4 2").split()
def special(i, text):
    return {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def template(first, last):
    item = lambda t: {"SpecialToken": {"id": t, "type_id": 0}}
    seq = {"Sequence": {"id": "A", "type_id": 0}}
    return {"type": "TemplateProcessing", "single": [item(first), seq, item(last)], "pair": [],
            "special_tokens": {first: {"id": first, "ids": [VOCAB_IDS[first]], "tokens": [first]},
                               last: {"id": last, "ids": [VOCAB_IDS[last]], "tokens": [last]}}}


def wordpiece(n):
    """A BERT-layout WordPiece tokenizer.json of n tokens: specials, characters, ## pieces, words."""
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz0123456789.,!?:;'\"-()"))
    toks += chars + ["##" + c for c in chars if c.isalnum()] + WORDS + ["##" + w for w in ("s", "ing", "ed", "ings")]
    toks += [f"[unused{i}]" for i in range(n - len(toks))]
    global VOCAB_IDS
    VOCAB_IDS = {t: i for i, t in enumerate(toks)}
    return {"version": "1.0", "added_tokens": [special(i, t) for i, t in enumerate(toks[:5])],
            "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                           "strip_accents": None, "lowercase": True},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": template("[CLS]", "[SEP]"),
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": VOCAB_IDS}}, \
        {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
         "mask_token": "[MASK]"}


def unigram(n):
    """An XLM-RoBERTa-layout Unigram tokenizer.json of n pieces (no charsmap)."""
    toks = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), (SPACE, -2.0)]
    toks += [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyzéï0123456789.,!?:;'\"-()"]
    toks += [(SPACE + w, -3.0 - 0.1 * i) for i, w in enumerate(WORDS)] + [(w, -4.0) for w in ("s", "ing", "ed")]
    toks += [(f"{SPACE}pad{i}", -20.0) for i in range(n - 1 - len(toks))] + [("<mask>", 0.0)]
    global VOCAB_IDS
    VOCAB_IDS = {t: i for i, (t, _) in enumerate(toks)}
    metaspace = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True}
    return {"version": "1.0",
            "added_tokens": [special(i, t) for i, t in ((0, "<s>"), (1, "<pad>"), (2, "</s>"), (3, "<unk>"),
                                                         (n - 1, "<mask>"))],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Precompiled", "precompiled_charsmap": None},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
            "pre_tokenizer": metaspace, "post_processor": template("<s>", "</s>"), "decoder": metaspace,
            "model": {"type": "Unigram", "unk_id": 3, "vocab": [list(t) for t in toks], "byte_fallback": False}}, \
        {"bos_token": "<s>", "eos_token": "</s>", "cls_token": "<s>", "sep_token": "</s>", "unk_token": "<unk>",
         "pad_token": "<pad>", "mask_token": "<mask>"}


def embed(check, model):
    p = brisk("embed", "-m", model, "-t", "2", *TEXTS, timeout=300)
    check(f"embed -m {model}", p.returncode == 0, p.stderr)
    return [json.loads(line) for line in p.stdout.splitlines()] if p.returncode == 0 else []


def run_checks(check, tmp):
    for name, make in zip(FOLDERS, (wordpiece, unigram)):
        folder = os.path.join(tmp, name)
        shutil.copytree(os.path.join(FIXTURES, name, "hf"), folder)
        n_vocab = json.load(open(os.path.join(folder, "config.json")))["vocab_size"]
        tj, cfg = make(n_vocab)
        json.dump(tj, open(os.path.join(folder, "tokenizer.json"), "w"))
        json.dump(cfg, open(os.path.join(folder, "tokenizer_config.json"), "w"))
        out = os.path.join(tmp, name + ".gguf")
        p = brisk("quantize", folder, out, "F32", timeout=300)
        if not check(f"{name}: quantize", p.returncode == 0, p.stderr):
            continue
        p = brisk("tokenize", "-m", out, TEXTS[1])
        check(f"{name}: tokenize from the GGUF", p.returncode == 0, p.stderr)
        a, b = embed(check, folder), embed(check, out)
        check(f"{name}: vectors", len(a) == len(TEXTS) and len(b) == len(TEXTS), f"{len(a)} and {len(b)}")
        for x, y in zip(a, b):
            check(f"{name} input {x['index']}: tokens", x["tokens"] == y["tokens"], f"{x['tokens']} vs {y['tokens']}")
            diff = max(abs(u - v) for u, v in zip(x["embedding"], y["embedding"]))
            check(f"{name} input {x['index']}: vector", diff <= 1e-5, f"differs by {diff}")
        print(f"{name}: {len(b)} texts, token counts {[y['tokens'] for y in b]}")


if __name__ == "__main__":
    for name in FOLDERS:
        if not os.path.isdir(os.path.join(FIXTURES, name, "hf")):
            print(f"skip: fixture {name} missing under {FIXTURES}")
            sys.exit(77)
    sys.exit(main("embed_gguf_tokenizer", run_checks))
