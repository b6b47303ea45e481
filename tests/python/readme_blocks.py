"""The code blocks of the READMEs a user reads, each with the kind of test
that runs it, as the README marks it: an HTML comment `<!-- snippet: KIND -->`
on the line before the block's fence.

Kinds, and the test that runs each:
- `setup`: the set-up block: its first line is run (with the next `stdio`
  block as its input) and its second must be what .ci/run runs (test_readme.py);
- `stdio`: tool calls, one JSON object a line, through `memfs serve --stdio`
  (test_readme.py);
- `shell`: run with bash in a directory of its own, memfs on PATH, a data dir
  ./memory and the files the block names (test_readme.py);
- `shell-server`: the same, a `serve --http` line started in the background
  and a printed token kept for the next block (test_readme.py);
- `python`: run with the tests' Python (the pinned `anthropic` and `mcp`)
  after the block before it (test_readme.py);
- `package`: run with the Python package's wheel installed in a clean venv,
  against the scripted Messages API (test_package.py);
- `npm`: run as an ES module in a project with the npm packages installed,
  against the scripted Messages API (test_npm_package.py);
- `doctest`: Rust, compiled by `cargo test` (src/lib.rs includes README.md
  as doc tests);
- `fragment`: not run; the words before it say it is a fragment.
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
READMES = [
    "README.md",
    "packages/python/README.md",
    "packages/npm/memfs-memory/README.md",
    "packages/npm/memfs-memory-linux-x64/README.md",
]
KINDS = {"setup", "stdio", "shell", "shell-server", "python", "package", "npm", "doctest", "fragment"}


class Block:
    def __init__(self, readme, line, lang, kind, text, before):
        self.readme, self.line, self.lang, self.kind = readme, line, lang, kind
        self.text, self.before = text, before

    def __repr__(self):
        return f"{self.readme}:{self.line} ({self.kind})"


def blocks(readme):
    """Every fenced block of `readme` (a path relative to the repository)."""
    lines = (ROOT / readme).read_text(encoding="utf-8").split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\S*)", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        marker = re.match(r"^<!-- snippet: (\S+) -->$", lines[i - 1]) if i else None
        kind = marker.group(1) if marker else None
        before = " ".join(l for l in lines[max(0, i - 6):i] if not l.startswith("<!--"))
        out.append(Block(readme, i + 1, m.group(1), kind, "\n".join(lines[i + 1:j]) + "\n", before))
        i = j + 1
    return out


def all_blocks():
    return [b for r in READMES for b in blocks(r)]


def of_kind(kind, readme=None):
    return [b for b in all_blocks() if b.kind == kind and (readme is None or b.readme == readme)]
