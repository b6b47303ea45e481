#!/usr/bin/env python3
"""Import circles between memfs' modules, from the source (`crate::` and
`super::` paths in `use` lines and call sites).

Two levels are checked: the top-level modules of the library (`store`,
`journal`, `serve`, ...) and the modules inside each directory
(`serve::attach`, `serve::stream`, ...). A circle is a strongly connected
group of two or more modules. The circles that exist today are listed in
.ci/layers-baseline (one per line, its modules sorted and joined by spaces);
the check fails on any circle that is not inside one of those, so the
architecture can only get better. `--write-baseline` rewrites the file
(after a circle was removed, to keep it so).

A third check holds the library's top-level modules to their layers
(LAYERS below, lowest first): a module may use modules of its own layer or
below, never above, so nothing below calls up. A new module must be given
a layer here.

usage: scripts/layers.py [--write-baseline]
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# The workspace's crates below the root package (docs/DESIGN.md, "Crates"):
# their modules are re-exported by the root library under their own names,
# so they are checked as the library's top-level modules (the compiler
# already refuses a crate's use of one above it).
CRATES = sorted((ROOT / "crates").glob("*/src"))
BASELINE = ROOT / ".ci" / "layers-baseline"


def declared(file, src=SRC):
    """The modules a crate root declares (`mod x;`, `pub mod x;`)."""
    text = (src / file).read_text(encoding="utf-8")
    return set(re.findall(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_0-9]+)\s*;", text, re.M))


# The binary's own modules (main.rs declares them): not part of the library.
BINARY = declared("main.rs") | {"main"}
# A crate is either a set of top-level modules (memfs-core: its lib.rs
# declares them) or one top-level module itself (memfs-fuse is `fuse`).
SPREAD = {"core", "durable", "engine", "http", "web"}


def prefix_of(src):
    """The module path of a crate's lib.rs: () when it spreads its modules."""
    name = src.parent.name
    return () if name in SPREAD else (name,)


# The library's top-level modules (lib.rs and the crates' declare them): each has a layer.
LIBRARY = declared("lib.rs").union(
    *(declared("lib.rs", src) if not prefix_of(src) else set(prefix_of(src)) for src in CRATES)
)
# The library's layers, lowest first (docs/DESIGN.md, "Layers").
LAYERS = [
    # Leaves everyone uses: paths, hashing, units, clipping and labels,
    # JSON from peers, forms, the HTTP listener, the one domain error, the
    # ranked locks, the shared worker threads.
    {"path", "digest", "text", "units", "json", "merge", "form", "listen", "error", "lock", "pool"},
    # The tree, its one lock, change records.
    {"store"},
    # Below the store's changes: durability and history; policies on content.
    {"persist", "journal", "guard"},
    # A shared store upstream of the journal; the six commands; what an
    # import reads.
    {"shared", "tool", "transfer", "outside"},
    # The search index, derived from the journal and the tree.
    {"search"},
    # A store over HTTP kept in step with its cache (the tree, the
    # transfer client, merges).
    {"remote"},
    # The door-level commands beyond the tool.
    {"control"},
    # A store opened on a data dir with its journal and tool.
    {"memory"},
    # The doors.
    {"fuse", "serve", "web", "http"},
]


def module_of(path, src=SRC):
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    if parts == ["lib"]:
        parts = []
    return list(prefix_of(src)) + parts if src != SRC else parts


def use_paths(text):
    """Every `crate::a::b` and `super::a` path in the text, braces expanded."""
    out = []
    for m in re.finditer(r"\b(crate|super)::((?:\{[^;]*?\})|[A-Za-z_][A-Za-z0-9_:]*)", text):
        head, rest = m.group(1), m.group(2)
        if rest.startswith("{"):
            for item in split_top(rest[1:-1]):
                out.append((head, item.strip()))
        else:
            out.append((head, rest))
    return out


def split_top(s):
    depth, cur, items = 0, "", []
    for c in s:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += c
    if cur.strip():
        items.append(cur)
    return items


def graph():
    modules = {}
    for src in [SRC, *CRATES]:
        for path in src.rglob("*.rs"):
            mod = module_of(path, src)
            if src == SRC and mod and mod[0] in BINARY:
                continue
            if mod:
                modules[tuple(mod)] = path.read_text(encoding="utf-8")
    known = set(modules)
    edges = defaultdict(set)
    for mod, text in modules.items():
        # Test modules may reach anything.
        text = text.split("#[cfg(test)]\nmod tests", 1)[0]
        for head, rest in use_paths(text):
            names = [n for n in re.split(r"::", rest) if n and n[0].islower()]
            if head == "super":
                # The parent of a file's module (of `serve/attach.rs`: `serve`).
                target = tuple(mod[:-1]) + tuple(names)
            else:
                target = tuple(names)
            # The longest prefix that is a module.
            while target and target not in known:
                target = target[:-1]
            if target and target != mod:
                edges[mod].add(target)
    return known, edges


def level_edges(known, edges):
    """Edges between top-level modules, and between siblings in a directory."""
    top, inner = defaultdict(set), defaultdict(set)
    for a, targets in edges.items():
        for b in targets:
            # (The crate root, lib.rs, is above every module: its macros
            # name them.)
            if not a or not b:
                continue
            if a[0] != b[0]:
                top[a[0]].add(b[0])
            elif len(a) >= 2 and len(b) >= 2 and a[:-1] == b[:-1]:
                inner["::".join(a)].add("::".join(b))
    return top, inner


def circles(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(edges) | {b for t in edges.values() for b in t}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def upward(top):
    """Top-level edges that go up a layer (and modules with no layer)."""
    rank = {m: i for i, layer in enumerate(LAYERS) for m in layer}
    out = []
    for a, targets in sorted(top.items()):
        for b in sorted(targets):
            for m in (a, b):
                if m not in rank:
                    out.append(f"{m} has no layer in scripts/layers.py")
            if a in rank and b in rank and rank[b] > rank[a]:
                out.append(f"{a} (layer {rank[a]}) uses {b} (layer {rank[b]}): nothing below calls up")
    return sorted(set(out))


def unplaced():
    """Library modules with no layer, and layers naming no library module."""
    layered = set().union(*LAYERS)
    out = [f"{m} (declared in src/lib.rs) has no layer in scripts/layers.py" for m in sorted(LIBRARY - layered)]
    out += [f"{m} has a layer in scripts/layers.py but src/lib.rs declares no such module" for m in sorted(layered - LIBRARY)]
    return out


def main():
    known, edges = graph()
    top, inner = level_edges(known, edges)
    up = upward(top) + unplaced()
    for line in up:
        print(f"layers: {line}")
    found = circles(top) + circles(inner)
    lines = sorted(" ".join(c) for c in found)
    if "--write-baseline" in sys.argv:
        BASELINE.write_text("".join(l + "\n" for l in lines))
        print(f"layers: {len(lines)} circle(s) written to {BASELINE.relative_to(ROOT)}")
        return 0
    baseline = [set(l.split()) for l in BASELINE.read_text().splitlines() if l.strip()] if BASELINE.exists() else []
    new = [c for c in found if not any(set(c) <= b for b in baseline)]
    for c in found:
        mark = "NEW " if c in new else ""
        print(f"layers: {mark}circle: {' <-> '.join(c)}")
    print(f"layers: {len(found)} circle(s), {len(baseline)} known in .ci/layers-baseline, {len(new)} new; {len(up)} use(s) up a layer")
    return 1 if new or up else 0


if __name__ == "__main__":
    sys.exit(main())
