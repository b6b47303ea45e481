#!/usr/bin/env python3
"""Checks that what docs/DESIGN.md cites of the code exists in src/.

The document cites code by name, never by line (lines move; names are
renamed in the open). A citation is a backticked Rust path from the crate
root, `module::path::Item`, `module::path::Type::member` (a field, an
enum variant, or a method or associated item in an `impl` of the type or
in the trait), or `module::path` for a module; or a backticked file path
`src/dir/file.rs` (or `tests/file.rs`), which must exist. Each path must
resolve:

- the modules: `a::b` is declared (`mod b;` or `mod b { ... }`) by `a`,
  and a file module is src/a/b.rs or src/a/b/mod.rs;
- the item: `fn`, `struct`, `enum`, `trait`, `const`, `static`, `type`,
  `mod`, `union` or `macro_rules!` of that name at the top level of the
  module, or a `pub use` that names it (followed to where it is defined);
- a member: a field inside the struct's braces, a variant of the enum, an
  item of the trait, or an `fn`/`const`/`type` inside an `impl ... Type`
  block anywhere in the directory of the file that defines the type (its
  own module, its siblings and their children).

A two-part path that names no item but is a failpoint's name in the source
(`fail_point!("journal::write")`, `step!("persist::rename")`) is taken as
that failpoint; `a::*` stands for the module `a` (a family of failpoints).
A path whose first part is not a module of the crate must be an outside
crate (std, core, alloc, or one in Cargo.toml), else it is reported too.

Any `file.rs:NNN` line-number citation left in the document fails the
check.

The lock ranks (src/lock/rank.rs, `pub const NAME: Rank = Rank::new(N,
"path")`) must match the document's table of ranks row for row: a row
`| N | `lock::rank::NAME` | `path` |` for each constant, no row for one
that does not exist; each path is a citation, so it must resolve too. The source is read with comments and string literals blanked out,
so a name in a comment does not count.

usage (from the repository root): python3 scripts/design_refs.py [DOC]
  DOC defaults to docs/DESIGN.md; the source is src/ under the current
  directory. Prints each citation that does not resolve and exits 1, or a
  one-line summary and exits 0.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers  # noqa: E402 (its brace splitting)

import glob

SRC = "src"
# The workspace's crates below the root package (docs/DESIGN.md, "Crates"):
# the root library re-exports their modules under their own names, so a
# citation `store::Tree` is looked up in them too.
SRCS = [SRC] + sorted(glob.glob(os.path.join("crates", "*", "src")))
DEFAULT_DOC = os.path.join("docs", "DESIGN.md")

LINE_CITATION = re.compile(r"[\w./-]*\.rs:\d+(?:-\d+)?")
SPAN = re.compile(r"`([^`\n]+)`")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
RUST_PATH = re.compile(rf"^[a-z_][a-z0-9_]*(?:::(?:{IDENT}|\*))+$")
FILE_PATH = re.compile(r"^(?:src|tests|crates/[\w-]+/src)/[\w./-]+\.rs$")
ITEM_KINDS = r"fn|struct|enum|trait|const|static|type|mod|union"
CHAR_LITERAL = re.compile(
    r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])'"
)
FAILPOINT = re.compile(r"\b\w+!\(\s*\"([^\"]+)\"")


# ---- reading Rust -----------------------------------------------------------


def mask(text):
    """`text` with comments and the insides of string and char literals
    blanked (same length, newlines kept), so that braces and names are
    only the code's."""
    out = list(text)
    n = len(text)
    i = 0

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'(?:br|r)(#*)"', text[i:])
            if m:
                close = '"' + m.group(1)
                j = text.find(close, i + m.end())
                j = n if j < 0 else j + len(close)
                blank(i + m.end(), j - len(close))
                i = j
            elif text.startswith('b"', i):
                i += 1  # the string itself is taken next round
            elif text.startswith("b'", i):
                i += 1
            else:
                i += 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        elif c == "'":
            m = CHAR_LITERAL.match(text, i)
            if m:
                blank(i + 1, m.end() - 1)
                i = m.end()
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


def matching_brace(code, i):
    """The index of the `}` closing the `{` at `i`."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code)


def top_level(code, start, end):
    """code[start:end] with everything inside nested braces blanked (the
    braces themselves kept), so that a search finds only this level's
    items; offsets stay those of `code` less `start`."""
    out = list(code[start:end])
    depth = 0
    for k in range(start, end):
        c = code[k]
        if c == "}":
            depth -= 1
        if depth > 0 and c != "\n":
            out[k - start] = " "
        if c == "{":
            depth += 1
    return "".join(out)


class Source:
    def __init__(self, roots):
        self.root, self.roots = roots[0], roots
        self.cache = {}
        self.failpoints = set()
        for root in roots:
            for dirpath, _, names in os.walk(root):
                for name in names:
                    if name.endswith(".rs"):
                        raw = self.raw(os.path.join(dirpath, name))
                        self.failpoints.update(FAILPOINT.findall(raw))

    def raw(self, path):
        with open(path, encoding="utf-8") as f:
            return f.read()

    def code(self, path):
        if path not in self.cache:
            self.cache[path] = mask(self.raw(path))
        return self.cache[path]


class Scope:
    """A module: its file, the span of its items in that file (the whole
    file, or an inline `mod x { ... }`'s braces), and where its child
    modules' files are."""

    def __init__(self, src, path, start, end, child_dir, name):
        self.src, self.path, self.start, self.end = src, path, start, end
        self.child_dir, self.name = child_dir, name

    @property
    def code(self):
        return self.src.code(self.path)

    def flat(self):
        return top_level(self.code, self.start, self.end)

    def rel(self):
        return os.path.relpath(self.path)


def file_scope(src, path, name):
    base = os.path.basename(path)
    if base in ("mod.rs", "lib.rs", "main.rs"):
        child_dir = os.path.dirname(path)
    else:
        child_dir = os.path.join(os.path.dirname(path), base[:-3])
    return Scope(src, path, 0, len(src.code(path)), child_dir, name)


def declares_mod(scope, name):
    """The child module `name` that `scope` declares, or None."""
    flat = scope.flat()
    m = re.search(rf"(?<![\w:])mod\s+{name}\s*([;{{])", flat)
    if not m and scope.name == "crate":
        # (A module the root library re-exports from a crate below it.)
        for other in crate_roots(scope.src):
            if other.path != scope.path and re.search(rf"(?<![\w:])mod\s+{name}\s*;", other.flat()):
                return declares_mod(other, name)
        return None
    if not m:
        return None
    if m.group(1) == "{":
        open_at = scope.start + m.end() - 1
        close = matching_brace(scope.code, open_at)
        return Scope(scope.src, scope.path, open_at + 1, close,
                     os.path.join(scope.child_dir, name), name)
    for candidate in (os.path.join(scope.child_dir, name + ".rs"),
                      os.path.join(scope.child_dir, name, "mod.rs")):
        if os.path.isfile(candidate):
            return file_scope(scope.src, candidate, name)
    return None


def crate_roots(src):
    return [file_scope(src, os.path.join(root, f), "crate")
            for root in src.roots
            for f in ("lib.rs", "main.rs") if os.path.isfile(os.path.join(root, f))]


def top_module(src, name):
    for root in crate_roots(src):
        found = declares_mod(root, name)
        if found:
            return found
    # A crate that is one module (crates/fuse is `fuse`: the root re-exports it).
    lib = os.path.join("crates", name, "src", "lib.rs")
    if os.path.isfile(lib):
        return file_scope(src, lib, name)
    return None


def find_item(scope, name, seen=0):
    """(scope, kind, offset in the file) of item `name` defined in
    `scope`, following a `pub use` that names it; None if it is not."""
    flat = scope.flat()
    m = re.search(
        rf"(?<![\w:])(?:{ITEM_KINDS})\s+{name}\b|macro_rules!\s*{name}\b", flat)
    if m:
        kind = "macro" if m.group(0).startswith("macro_rules") else m.group(0).split()[0]
        return scope, kind, scope.start + m.start()
    if seen > 8:
        return None
    for m in re.finditer(r"(?<![\w:])pub(?:\s*\([^)]*\))?\s+use\s", flat):
        at = scope.start + m.end()
        stop = scope.code.find(";", at)
        tree = " ".join(scope.code[at:stop].split())
        for segs, alias in expand_use(tree):
            if (alias or segs[-1]) != name:
                continue
            target = walk_use(scope, segs[:-1])
            if target:
                found = find_item(target, segs[-1], seen + 1)
                if found:
                    return found
    return None


def split_top(text):
    """The comma-separated parts of `text` outside braces (layers.py's)."""
    return [p.strip() for p in layers.split_top(text) if p.strip()]


def expand_use(tree, prefix=()):
    """The paths a use tree brings in: [(segments, alias or None)]."""
    tree = tree.strip()
    j = tree.find("{")
    if j >= 0 and tree.endswith("}"):
        head = [s for s in tree[:j].strip().rstrip(":").split("::") if s]
        out = []
        for part in split_top(tree[j + 1:-1]):
            out.extend(expand_use(part, prefix + tuple(head)))
        return out
    alias = None
    m = re.match(rf"^(.*?)\s+as\s+({IDENT})$", tree)
    if m:
        tree, alias = m.group(1), m.group(2)
    segs = list(prefix) + [s for s in tree.split("::") if s]
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    return [(segs, alias)] if segs else []


def parent_scope(scope):
    """The module above a file module (for `super::` in a `use`)."""
    if scope.start != 0:
        return None  # `super` inside an inline module: not followed
    path = scope.path
    base = os.path.basename(path)
    d = os.path.dirname(path)
    if base in ("lib.rs", "main.rs"):
        return None
    if base == "mod.rs":
        d = os.path.dirname(d)
    for f in ("mod.rs", "lib.rs"):
        candidate = os.path.join(d, f)
        if os.path.isfile(candidate):
            return file_scope(scope.src, candidate, "super")
    candidate = d + ".rs"
    if os.path.isfile(candidate):
        return file_scope(scope.src, candidate, "super")
    return None


def walk_use(scope, segs):
    """The module a `use` path's leading segments name, from `scope`."""
    cur = scope
    for i, seg in enumerate(segs):
        if seg == "crate" and i == 0:
            cur = crate_roots(scope.src)[0]
        elif seg == "self" and i == 0:
            cur = scope
        elif seg == "super":
            cur = parent_scope(cur)
        else:
            cur = declares_mod(cur, seg) if cur else None
        if cur is None:
            return None
    return cur


def type_name_of_impl(header):
    """The self type's last name in an `impl` header (`impl<T> A for
    b::C<T> where ...`)."""
    h = header.strip()
    if h.startswith("<"):
        depth = 0
        for k, c in enumerate(h):
            depth += (c == "<") - (c == ">")
            if depth == 0:
                h = h[k + 1:]
                break
    h = re.split(r"\bwhere\b", h)[0]
    parts = re.split(r"\bfor\b", h)
    ty = parts[-1].strip()
    ty = re.sub(r"<.*", "", ty)
    ty = ty.lstrip("&").replace("dyn ", "").strip()
    return ty.split("::")[-1].strip()


def member_of(src, scope, kind, at, type_name, member):
    """Whether `member` is a field, variant or trait item of the type
    defined at `at`, or in an `impl` of it near its file."""
    code = scope.code
    brace = code.find("{", at)
    semi = code.find(";", at)
    if kind in ("struct", "enum", "trait", "union") and brace >= 0 and (semi < 0 or brace < semi):
        close = matching_brace(code, brace)
        body = top_level(code, brace + 1, close)
        body = re.sub(r"#\[[^\[\]]*(?:\[[^\]]*\][^\[\]]*)*\]", " ", body)
        if kind in ("struct", "union") and re.search(rf"(?<![\w:]){member}\s*:(?!:)", body):
            return True
        if kind == "enum" and re.search(rf"(?:^|,)\s*{member}\b(?!\s*:)", body):
            return True
        if kind == "trait" and re.search(rf"\b(?:fn|const|type)\s+{member}\b", body):
            return True
    root = os.path.dirname(scope.path)
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            code = src.code(path)
            for m in re.finditer(r"(?<![\w:])impl\b", code):
                brace = code.find("{", m.end())
                if brace < 0:
                    continue
                if type_name_of_impl(code[m.end():brace]) != type_name:
                    continue
                close = matching_brace(code, brace)
                body = top_level(code, brace + 1, close)
                if re.search(rf"\b(?:fn|const|type)\s+{member}\b", body):
                    return True
    return False


# ---- checking a citation -----------------------------------------------------


def outside_crates():
    names = {"std", "core", "alloc"}
    try:
        with open("Cargo.toml", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return names
    section = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("["):
            section = s.strip("[]")
            m = re.match(r"(?:.*\.)?(?:dev-|build-)?dependencies\.([\w-]+)$", section)
            if m:
                names.add(m.group(1).replace("-", "_"))
            continue
        if re.search(r"(?:^|\.)(?:dev-|build-)?dependencies$", section):
            m = re.match(r"([\w-]+)\s*=", s)
            if m:
                names.add(m.group(1).replace("-", "_"))
    return names


def check(src, cite, outside):
    """None if `cite` resolves, else why not."""
    if FILE_PATH.match(cite):
        return None if os.path.isfile(cite) else "no such file"
    segs = cite.split("::")
    scope = top_module(src, segs[0])
    if scope is None:
        if segs[0] in outside:
            return None
        return f"`{segs[0]}` is not a module of the crate"
    failpoint = cite in src.failpoints
    rest = segs[1:]
    while rest and rest[0] != "*":
        child = declares_mod(scope, rest[0])
        if child is None:
            break
        scope, rest = child, rest[1:]
    where = f"(in {scope.rel()})"
    if not rest or rest == ["*"]:
        return None
    if len(rest) == 1:
        if find_item(scope, rest[0]) or failpoint:
            return None
        return f"no item `{rest[0]}` in module `{'::'.join(segs[:-1])}` {where}"
    if len(rest) == 2:
        found = find_item(scope, rest[0])
        if found is None:
            if failpoint:
                return None
            return f"no item `{rest[0]}` in module `{'::'.join(segs[:-2])}` {where}"
        tscope, kind, at = found
        if kind not in ("struct", "enum", "trait", "union", "type"):
            return f"`{rest[0]}` is a {kind}, not a type {where}"
        if member_of(src, tscope, kind, at, rest[0], rest[1]):
            return None
        return (f"no field, variant or method `{rest[1]}` of `{rest[0]}` "
                f"(in {tscope.rel()} or an impl beside it)")
    return f"`{rest[0]}` is not a module {where}, and a type's member takes one name"


def citations(doc_text):
    """[(line number, text)] of the backticked citations, outside fenced
    code blocks."""
    out = []
    fenced = False
    for n, line in enumerate(doc_text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for m in SPAN.finditer(line):
            text = m.group(1).strip()
            if RUST_PATH.match(text) or FILE_PATH.match(text):
                out.append((n, text))
    return out


RANK_CONST = re.compile(
    r'pub const ([A-Z_0-9]+): Rank = Rank::new\(\s*(\d+),\s*"([^"]+)"\s*\)', re.S
)
RANK_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`lock::rank::([A-Z_0-9]+)`\s*\|\s*`([^`]+)`\s*\|")
RANKS_FILE = next((p for p in (os.path.join(r, "lock", "rank.rs") for r in SRCS) if os.path.exists(p)),
                  os.path.join(SRC, "lock", "rank.rs"))


def rank_problems(doc, text, src, outside):
    """The differences between src/lock/rank.rs and the document's rows."""
    if not os.path.exists(RANKS_FILE):
        return []
    with open(RANKS_FILE, encoding="utf-8") as f:
        code = {m.group(1): (int(m.group(2)), m.group(3)) for m in RANK_CONST.finditer(f.read())}
    rows = {}
    problems = []
    for n, line in enumerate(text.splitlines(), 1):
        m = RANK_ROW.match(line)
        if m:
            rows[m.group(2)] = (n, int(m.group(1)), m.group(3))
    for name, (order, path) in sorted(code.items()):
        why = check(src, path, outside)
        if why:
            problems.append(f"{RANKS_FILE}: rank {name} names `{path}`: {why}")
        if name not in rows:
            problems.append(f"{doc}: no row for the rank `lock::rank::{name}` ({order}, `{path}`)")
            continue
        n, row_order, row_path = rows[name]
        if (row_order, row_path) != (order, path):
            problems.append(
                f"{doc}:{n}: `lock::rank::{name}` is {order}, `{path}` in the code, "
                f"{row_order}, `{row_path}` here"
            )
    for name, (n, _, _) in rows.items():
        if name not in code:
            problems.append(f"{doc}:{n}: `lock::rank::{name}` is no rank in {RANKS_FILE}")
    return problems


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 2
    doc = argv[1] if len(argv) == 2 else DEFAULT_DOC
    if not os.path.isdir(SRC):
        print(f"design_refs: no {SRC}/ here; run it from the repository root", file=sys.stderr)
        return 2
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    src = Source(SRCS)
    outside = outside_crates()
    problems = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in LINE_CITATION.finditer(line):
            problems.append(f"{doc}:{n}: `{m.group(0)}` cites a line; name the item instead")
    cites = citations(text)
    for n, cite in cites:
        why = check(src, cite, outside)
        if why:
            problems.append(f"{doc}:{n}: `{cite}`: {why}")
    problems += rank_problems(doc, text, src, outside)
    for p in problems:
        print(p)
    if problems:
        print(f"design_refs: {len(problems)} of the citations in {doc} do not hold", file=sys.stderr)
        return 1
    distinct = len({c for _, c in cites})
    print(f"design_refs: {doc}: all {len(cites)} citations ({distinct} distinct) resolve in {SRC}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
