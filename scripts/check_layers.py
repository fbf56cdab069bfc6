#!/usr/bin/env python3
"""The include check: no file of a lower layer includes a file of a higher one.

The layer order is scripts/layers.txt (one line per layer, highest first; folders on one line
are peers; "peers A B" lines name subfolders that must not include each other). Every quoted
include of a file under src/, tests/, bench/, fuzz/ and tools/ that names a folder of src/
("backend/backend.h") is checked:
  - a file of src/X may include src/X and the layers below X's, nothing above or beside it;
  - a file under one of a "peers" group's subfolders may not include another of that group;
  - tests/, bench/, fuzz/ and tools/ sit above every layer, but may only name listed folders;
  - every folder of src/ must be listed, so that a new room is placed before it is used.
Prints one line per violation (file:line, the include, and why) and exits 1 when there is any.

Usage: check_layers.py [--root DIR]    (default: the repository holding this script)
       check_layers.py --self-test     (checks that the checker catches each kind of violation)
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
EXTENSIONS = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc")
OUTSIDE = ("tests", "bench", "fuzz", "tools")  # above every layer


def read_layers(path):
    """Returns ({folder: rank}, [set of peer subfolders]) from layers.txt; rank 0 is the top."""
    ranks, peers = {}, []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].split()
            if not line:
                continue
            if line[0] == "peers":
                if len(line) < 3:
                    raise SystemExit("%s:%d: a peers line names at least two subfolders" % (path, n))
                peers.append(set(line[1:]))
                continue
            rank = len(set(ranks.values()))
            for folder in line:
                if folder in ranks:
                    raise SystemExit("%s:%d: %s is listed twice" % (path, n, folder))
                ranks[folder] = rank
    return ranks, peers


def source_files(root, top):
    base = os.path.join(root, top)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(EXTENSIONS):
                yield os.path.join(dirpath, name)


def peer_room(rel, peers):
    """The peers subfolder ("backend/cuda") a src-relative path lies in, or None."""
    for group in peers:
        for room in group:
            if rel == room or rel.startswith(room + "/"):
                return group, room
    return None, None


def check(root):
    """Returns (violations, files checked, includes checked)."""
    ranks, peers = read_layers(os.path.join(root, "scripts", "layers.txt"))
    src = os.path.join(root, "src")
    problems = []
    for entry in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, entry)) and entry not in ranks:
            problems.append("src/%s: folder not placed in scripts/layers.txt" % entry)
    n_files = n_includes = 0
    for top in ("src",) + OUTSIDE:
        for path in source_files(root, top):
            n_files += 1
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            in_src = top == "src"
            own = rel.split("/")[1] if in_src else None
            own_rel = rel[len("src/"):] if in_src else None
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
            for n, line in enumerate(lines, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                parts = inc.split("/")
                if len(parts) < 2 or not os.path.isdir(os.path.join(src, parts[0])):
                    continue  # beside the including file, or not a path of src/
                n_includes += 1
                target = parts[0]
                where = "%s:%d: includes \"%s\"" % (rel, n, inc)
                if target not in ranks:
                    problems.append("%s: src/%s is not placed in scripts/layers.txt" % (where, target))
                    continue
                if not in_src:
                    continue
                if own not in ranks:
                    continue  # reported once above
                if own == target:
                    group, room = peer_room(own_rel, peers)
                    _, other = peer_room(inc, peers)
                    if group and other and other != room and other in group:
                        problems.append("%s: %s and %s are peers (scripts/layers.txt)" % (where, room, other))
                    continue
                if ranks[target] < ranks[own]:
                    problems.append("%s: %s is a higher layer than %s (scripts/layers.txt)" % (where, target, own))
                elif ranks[target] == ranks[own]:
                    problems.append("%s: %s and %s are peers of one layer (scripts/layers.txt)" % (where, target, own))
    return problems, n_files, n_includes


def self_test():
    """Builds small trees with one violation each and checks that each is reported."""
    layers = "top\nmid side\nlow\npeers low/a low/b\n"
    cases = {
        "upward": ({"src/low/x.h": '#include "top/y.h"\n', "src/top/y.h": ""}, "higher layer"),
        "peer layer": ({"src/mid/x.h": '#include "side/y.h"\n', "src/side/y.h": ""}, "peers of one layer"),
        "peer rooms": ({"src/low/a/x.h": '#include "low/b/y.h"\n', "src/low/b/y.h": ""}, "are peers"),
        "unplaced folder": ({"src/new/x.h": "", "src/top/y.h": '#include "new/x.h"\n'}, "not placed"),
        "test names unplaced": ({"src/new/x.h": "", "tests/t.cpp": '#include "new/x.h"\n'}, "not placed"),
    }
    clean = {"src/top/y.h": '#include "mid/z.h"\n#include "low/a/w.h"\n', "src/mid/z.h": '#include "low/b/v.h"\n',
             "src/low/a/w.h": '#include "low/u.h"\n#include "w2.h"\n', "src/low/b/v.h": "", "src/low/u.h": "",
             "src/side/s.h": "", "tests/t.cpp": '#include "top/y.h"\n#include "gtest/gtest.h"\n'}
    failures = []
    for name, (files, expect) in list(cases.items()) + [("clean", (clean, None))]:
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "scripts"))
            with open(os.path.join(d, "scripts", "layers.txt"), "w") as f:
                f.write(layers)
            for folder in ("top", "mid", "side", "low/a", "low/b"):
                os.makedirs(os.path.join(d, "src", folder), exist_ok=True)
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
                with open(os.path.join(d, rel), "w") as f:
                    f.write(text)
            problems, _, _ = check(d)
            if expect is None and problems:
                failures.append("%s: reported %r" % (name, problems))
            if expect is not None and not any(expect in p for p in problems):
                failures.append("%s: expected a report containing %r, got %r" % (name, expect, problems))
    for f in failures:
        print("self-test: " + f)
    print("check_layers self-test: %d cases, %d failures" % (len(cases) + 1, len(failures)))
    return 1 if failures else 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--root" in argv:
        root = argv[argv.index("--root") + 1]
    problems, n_files, n_includes = check(root)
    for p in problems:
        print(p)
    print("check_layers: %d files, %d includes of src/ checked, %d violations" % (n_files, n_includes, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
