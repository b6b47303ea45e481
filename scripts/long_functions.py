#!/usr/bin/env python3
"""No function in src/ or crates/*/src/ over 60 lines without a reason in its doc comment
(a line starting "Long because"), unless .ci/long-functions-baseline names
it (path and function, one per line: the known ones, to be split). Fails
on a new one, and on a baseline entry that is no longer long (so the
baseline only shrinks).

usage: scripts/long_functions.py [--list]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 60


def functions():
    # The root package's src/ and every crate of the workspace (crates/*/src).
    files = list((ROOT / "src").rglob("*.rs")) + list((ROOT / "crates").glob("*/src/**/*.rs"))
    for p in sorted(files):
        lines = p.read_text().split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"^(\s*)(pub(\([^)]*\))? )?(async )?(unsafe )?fn (\w+)", lines[i])
            if not m:
                i += 1
                continue
            indent, name = m.group(1), m.group(6)
            j = i
            # A declaration without a body (a trait's) ends with ';'.
            while j < len(lines) and not lines[j].rstrip().endswith("{") and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith(";"):
                i = j + 1
                continue
            end = j
            while end < len(lines) and lines[end] != indent + "}":
                end += 1
            k, doc = i - 1, []
            while k >= 0 and (lines[k].strip().startswith("///") or lines[k].strip().startswith("#[")):
                doc.append(lines[k])
                k -= 1
            rel = str(p.relative_to(ROOT))
            yield rel, name, i + 1, end - i + 1, any("Long because" in d for d in doc)
            i = end + 1


def main():
    baseline_file = ROOT / ".ci" / "long-functions-baseline"
    baseline = set()
    if baseline_file.exists():
        baseline = {tuple(l.split()) for l in baseline_file.read_text().splitlines() if l.strip() and not l.startswith("#")}
    long_ones = [(path, name, line, n) for path, name, line, n, reasoned in functions() if n > LIMIT and not reasoned]
    found = {(path, name) for path, name, _, _ in long_ones}
    new = [f for f in long_ones if (f[0], f[1]) not in baseline]
    gone = sorted(baseline - found)
    if "--list" in sys.argv:
        for path, name, line, n in sorted(long_ones, key=lambda f: -f[3]):
            print(f"{n:4} {path}:{line} {name}")
    for path, name, line, n in new:
        print(f"long_functions: {path}:{line} {name} is {n} lines with no reason in its doc comment "
              f"(\"Long because ...\"), and is not in .ci/long-functions-baseline: split it or say why")
    for path, name in gone:
        print(f"long_functions: {path} {name} is in .ci/long-functions-baseline but no longer long: take it out")
    print(f"long_functions: {len(long_ones)} over {LIMIT} lines without a reason, {len(baseline)} known, {len(new)} new")
    sys.exit(1 if new or gone else 0)


if __name__ == "__main__":
    main()
