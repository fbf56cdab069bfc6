#!/usr/bin/env python3
"""Feature-by-feature comparison of `brisk template` with Python Jinja2 (tests/jinja/render_oracle.py):
each snippet of tests/jinja/snippets.jinja-list (separated by lines "=====") is rendered as a
template with the conversation tests/jinja/conversations/02_system_multi_turn.json. Output must
be byte-identical; where Jinja2 raises, brisk must fail (non-zero exit)."""
import json
import os
import subprocess
import sys
import tempfile

SOURCE_DIR = os.environ.get("BRISK_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "jinja"))
import render_oracle  # noqa: E402


def main():
    brisk = os.environ.get("BRISK_BIN")
    if not brisk or not os.path.exists(brisk):
        print("skip: BRISK_BIN not set")
        return 77
    with open(os.path.join(SOURCE_DIR, "tests", "jinja", "snippets.jinja-list"), encoding="utf-8") as f:
        snippets = f.read().split("\n=====\n")
    conv_path = os.path.join(SOURCE_DIR, "tests", "jinja", "conversations", "02_system_multi_turn.json")
    with open(conv_path, encoding="utf-8") as f:
        conv = json.load(f)
    failures = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for i, snippet in enumerate(snippets):
            path = os.path.join(tmpdir, f"snippet{i}.jinja")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(snippet)
            try:
                expected, error = render_oracle.render(snippet, conv), None
            except Exception as e:
                expected, error = None, f"{type(e).__name__}: {e}"
            r = subprocess.run([brisk, "template", "--template", path, "--input", conv_path], capture_output=True)
            got = r.stdout.decode("utf-8", errors="surrogateescape")
            head = snippet.strip().split("\n")[0][:70]
            if error is not None:
                if r.returncode == 0:
                    failures.append(f"#{i} {head!r}: Jinja2 raised ({error}) but brisk rendered {got!r}")
            elif r.returncode != 0:
                failures.append(f"#{i} {head!r}: brisk failed: {r.stderr.decode(errors='replace').strip()}")
            elif got != expected:
                failures.append(f"#{i} {head!r}:\n   brisk:  {got!r}\n   jinja2: {expected!r}")
    for f in failures:
        print("FAIL", f)
    print(f"snippets: {len(snippets) - len(failures)}/{len(snippets)} identical")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
