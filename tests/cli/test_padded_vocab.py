#!/usr/bin/env python3
"""A model whose embedding has more rows than its tokenizer has tokens (as Qwen pads 151,665
tokens to 151,936 rows): `brisk generate` and `brisk run` never sample a padding id, greedy or
sampled, even when the padding rows' logits are the largest (tiny_hf.py, padding_wins)."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_hf  # noqa: E402
from cli_util import brisk, main  # noqa: E402


def run_checks(check, tmp):
    model = tiny_hf.write(os.path.join(tmp, "tiny"), n_vocab=384, padding_wins=True)
    for name, args in [("greedy", ["--temp", "0"]),
                       ("sampled", ["--temp", "1.5", "--top-k", "0", "--top-p", "1", "--min-p", "0", "-s", "3"]),
                       ("top-k", ["--temp", "1", "--top-k", "300", "-s", "9"])]:
        for prompt in (["-p", "Hello"], ["--prompt-ids", "72,101,300,383"]):  # padding ids may be given
            r = brisk("generate", "-m", model, "-t", "1", "--show-ids", *prompt, "-n", "24", *args)
            m = re.search(r"^ids:((?: \d+)*)$", r.stdout, re.M)
            ids = [int(x) for x in m.group(1).split()] if m else []
            check("%s %s" % (name, prompt), r.returncode == 0 and ids and max(ids) < tiny_hf.N_TOKENS,
                  "exit %d, ids %s, %s" % (r.returncode, ids, r.stderr.strip()))
    r = brisk("run", model, "Hello", "-n", "16", "--temp", "0", "-t", "1")
    check("run", r.returncode == 0, r.stderr.strip())


if __name__ == "__main__":
    sys.exit(main("test_padded_vocab", run_checks))
