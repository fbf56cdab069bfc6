#!/usr/bin/env python3
"""Counts of a ctest run from its JUnit file (ctest --output-junit FILE): how many tests ran,
passed, failed and skipped, and every skip grouped by its reason (the test's skip message).
In the required-assets mode (CI=true or BRISK_REQUIRE_ASSETS=1) a skip whose reason is not
the hardware's (no GPU / CUDA device, an ISA level or kernel the CPU lacks) fails: CI may not
pass over a test that did not run. Usage: scripts/ctest_summary.py JUNIT.xml"""
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

# Skips that depend on the machine, not on what CI installed: the only ones CI accepts.
HARDWARE = re.compile(r"CUDA|GPU|ISA level|this CPU|AVX|VNNI|SIMD|tensor-core GEMM|isa\.level|"
                      r"two allowed CPUs")


def required():
    req = os.environ.get("BRISK_REQUIRE_ASSETS", "")
    if req:
        return req != "0"
    return os.environ.get("CI", "") in ("true", "1")


def skip_reason(out):
    """The skip message: gtest's line after `Skipped`, or a system test's `skip:` line."""
    lines = [l.strip() for l in out.splitlines()]
    for i, l in enumerate(lines):
        if l.endswith(": Skipped") and i + 1 < len(lines) and lines[i + 1]:
            return lines[i + 1]
    for l in lines:
        if re.match(r"(skip|SKIP)\b|.*skipped", l):
            return l
    return next((l for l in reversed(lines) if l), "(no message)")


def main(path):
    root = ET.parse(path).getroot()
    counts = collections.Counter()
    skips = collections.defaultdict(list)
    for case in root.iter("testcase"):
        status = case.get("status", "")
        name = case.get("name", "")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            out = case.findtext("system-out") or ""
            skips[skip_reason(out)].append(name)
            counts["skipped"] += 1
        elif case.find("failure") is not None or status == "fail":
            counts["failed"] += 1
        else:
            counts["passed"] += 1
    total = sum(counts.values())
    print("tests: %d, ran %d (passed %d, failed %d), skipped %d" %
          (total, counts["passed"] + counts["failed"], counts["passed"], counts["failed"], counts["skipped"]))
    bad = []
    for reason, names in sorted(skips.items(), key=lambda kv: -len(kv[1])):
        hw = bool(HARDWARE.search(reason))
        if not hw:
            bad.extend(names)
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        print("  skipped %3d  [%s] %s  (%s)" % (len(names), "hardware" if hw else "NOT HARDWARE", reason[:160], shown))
    if bad and required():
        print("FAIL: %d tests skipped for a reason other than the hardware in the required-assets mode"
              % len(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
