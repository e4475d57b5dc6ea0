#!/usr/bin/env python3
"""Counts the core's lines: every line of src/protocol, src/server and src/runtime except
the unit-test modules (a `#[cfg(test)]` line followed by `mod NAME {`, to its closing
brace). Prints each file's count and the total; with `--max N`, exits 1 above N.

    python3 docs/core-lines.py [--max 6000]
"""
import os
import re
import sys

CORE = ["src/protocol", "src/server", "src/runtime"]
TEST_MODULE = re.compile(r"\s*(pub(\(crate\))? )?mod \w+ \{")


def lines_without_test_modules(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    kept, i = 0, 0
    while i < len(lines):
        if lines[i].strip() == "#[cfg(test)]" and i + 1 < len(lines) and TEST_MODULE.match(lines[i + 1]):
            depth, i = 0, i + 1
            while i < len(lines):
                depth += lines[i].count("{") - lines[i].count("}")
                i += 1
                if depth == 0:
                    break
            continue
        kept += 1
        i += 1
    return kept


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    counts = []
    for top in CORE:
        for root, _, files in os.walk(top):
            counts += [(lines_without_test_modules(os.path.join(root, f)), os.path.join(root, f))
                       for f in files if f.endswith(".rs")]
    for n, path in sorted(counts, reverse=True):
        print(f"{n:6} {path}")
    total = sum(n for n, _ in counts)
    print(f"{total:6} total (protocol + server + runtime, without unit-test modules)")
    if "--max" in sys.argv:
        limit = int(sys.argv[sys.argv.index("--max") + 1])
        if total > limit:
            print(f"core-lines: {total} lines, more than {limit}", file=sys.stderr)
            sys.exit(1)


main()
