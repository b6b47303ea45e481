#!/usr/bin/env python3
"""Differential conformance: the same memory-tool command sequences through the
Python SDK's BetaLocalFilesystemMemoryTool and through `memfs serve --stdio`.

Every result pair must be identical, or be explained by a difference that
docs/SEMANTICS.md lists (by its id, D1, D2, ...). The final trees on disk must
match too, unless an explained difference changed state on purpose. Exits 1 on
any unexplained difference, printing it.

usage: conformance.py MEMFS_BINARY SEMANTICS_MD [--random N] [--seed S] [--show]
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata

from anthropic.lib.tools._beta_functions import ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool

HEADER_DIR_SDK = "excluding hidden items:"
HEADER_DIR_MEMFS = "excluding hidden items and node_modules:"


class Memfs:
    def __init__(self, binary, data):
        self.binary, self.data = binary, data
        self.proc = subprocess.Popen(
            [binary, "--data", data, "serve", "--stdio"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8",
        )

    def call(self, cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("memfs closed its output")
        r = json.loads(line)
        content = r["content"] if isinstance(r["content"], str) else json.dumps(r["content"])
        return (r["is_error"], content)

    def checkpoint(self):
        """The plain files are a moment behind memfs' journal: made current
        before they are read here."""
        subprocess.run([self.binary, "--data", self.data, "checkpoint"], check=True, capture_output=True)

    def close(self):
        self.proc.stdin.close()
        if self.proc.wait(timeout=30) != 0:
            raise SystemExit("memfs exited with an error")


def sdk_call(tool, cmd):
    try:
        return (False, tool.call(cmd))
    except ToolError as e:
        return (True, e.content)
    except Exception as e:  # the SDK lets some errors escape as exceptions
        return (True, "EXCEPTION " + type(e).__name__)


def strip_error(text):
    return text[len("Error: "):] if text.startswith("Error: ") else text


def listing_paths(text):
    return [line.split("\t", 1)[1].rstrip("/") for line in text.split("\n")[1:]]


def sdk_file_view_fixed(sdk_text):
    """The SDK numbers the empty string after a final newline as a line."""
    return re.sub(r"\n *\d+\t$", "", sdk_text)


# What the rules may look at besides the two answers: the SDK's memory as it
# was before the command (for the rules about links and spellings).
CTX = {"sdk_dir": None, "links": set()}


def cmd_paths(cmd):
    return [cmd[k] for k in ("path", "old_path", "new_path") if isinstance(cmd.get(k), str)]


def canonical(path):
    """memfs' spelling of a path: slashes folded, no trailing slash, NFC."""
    folded = re.sub("/+", "/", path)
    if folded != "/" and folded.endswith("/"):
        folded = folded.rstrip("/")
    return unicodedata.normalize("NFC", folded)


def links_below(sdk_dir):
    """Every path under the SDK's /memories that is a symlink, or is reached
    through one, as /memories/... spellings."""
    out = set()
    root = os.path.join(sdk_dir, "memories")
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                out.add("/memories/" + os.path.relpath(full, root))
    return out


def through_link(path):
    p = canonical(path)
    return any(p == link or p.startswith(link + "/") for link in CTX["links"])


# Each rule: (id, diverges, predicate(cmd, sdk, mem) -> bool). `diverges` means
# the two stores may now hold different trees: the SDK's tree is then reset to
# a copy of memfs' so that the rest of the sequence is still compared.
def _sdk_listing(sdk, skip_links):
    paths = [p.replace("//", "/") for p in listing_paths(sdk[1])]
    paths = [p for p in paths if "/node_modules" not in p]
    if skip_links:
        paths = [p for p in paths if not through_link(p)]
    return paths


def _is_dir_view(cmd, sdk, mem):
    return cmd["command"] == "view" and not sdk[0] and not mem[0] and HEADER_DIR_SDK in sdk[1].split("\n")[0]


def _dir_view(cmd, sdk, mem):
    return _is_dir_view(cmd, sdk, mem) and listing_paths(mem[1]) == _sdk_listing(sdk, False)


def _dir_view_links(cmd, sdk, mem):
    return (
        _is_dir_view(cmd, sdk, mem)
        and _sdk_listing(sdk, True) != _sdk_listing(sdk, False)
        and listing_paths(mem[1]) == _sdk_listing(sdk, True)
    )


def _dir_range(cmd, sdk, mem):
    """D18: the SDK ignores view_range on a directory; memfs picks rows."""
    if not (_is_dir_view(cmd, sdk, mem) and "view_range" in cmd):
        return False
    rows = [p for p in listing_paths(mem[1]) if not p.startswith("[showing")]
    return set(rows) <= set(_sdk_listing(sdk, True)) and rows != _sdk_listing(sdk, True)


def _links(cmd, sdk, mem):
    """D23: a command on a symlink, or on a path through one."""
    return any(through_link(p) for p in cmd_paths(cmd))


def _nfc(cmd, sdk, mem):
    """D20: a path spelled in another Unicode normal form than NFC."""
    return any(unicodedata.normalize("NFC", p) != p for p in cmd_paths(cmd))


def _credential(cmd, sdk, mem):
    """D21: memfs refuses a credential in a content or a name; the SDK stores it."""
    return not sdk[0] and mem[0] and "looks like a credential" in mem[1] and "nothing was changed" in mem[1]


def _field_types(cmd, sdk, mem):
    """D24: a boolean line number, or a view_range that is not two items."""
    if not mem[0] or "must be" not in mem[1] or sdk[0]:
        return False
    line = cmd.get("insert_line")
    rng = cmd.get("view_range")
    return (
        isinstance(line, bool)
        or (isinstance(rng, list) and (len(rng) != 2 or any(isinstance(v, bool) for v in rng)))
        or (rng is not None and not isinstance(rng, list))
    )


def _spelling(cmd, sdk, mem):
    """D25: the SDK echoes a path as given; memfs its canonical spelling."""
    text = sdk[1]
    for p in sorted(cmd_paths(cmd), key=len, reverse=True):
        text = text.replace(p, canonical(p))
    return text != sdk[1] and sdk[0] == mem[0] and (text == mem[1] or text == strip_error(mem[1]))


def _image(cmd, sdk, mem):
    """D26: an image is an image block in memfs; the SDK fails reading it as text."""
    if cmd["command"] != "view" or not sdk[0] or mem[0] or not mem[1].startswith("["):
        return False
    blocks = json.loads(mem[1])
    return len(blocks) == 1 and blocks[0].get("type") == "image"


def _outside(cmd, sdk, mem):
    """D28: a path outside /memories is said as every invalid path is, naming it."""
    return (
        sdk[0] and "must start with /memories" in sdk[1]
        and mem[0] and mem[1].startswith("Error: Invalid path `") and mem[1].endswith("the path must start with /memories")
    )


def _size(cmd, sdk, mem):
    """D27: memfs refuses a file over its size limit where it is written; the SDK stores it."""
    return (
        cmd["command"] == "create" and not sdk[0] and mem[0]
        and "over the limit of" in mem[1] and "bytes per file" in mem[1]
    )


def _long_echo(cmd, sdk, mem):
    """D19: a long old_str is cut at 200 characters in memfs' error."""
    old = cmd.get("old_str")
    if not (isinstance(old, str) and len(old) > 200 and sdk[0] and mem[0]):
        return False
    return strip_error(mem[1]) == sdk[1].replace(old, old[:200] + "…")


def _file_view(cmd, sdk, mem):
    if cmd["command"] != "view" or sdk[0] or mem[0]:
        return False
    return sdk_file_view_fixed(sdk[1]) == mem[1] or sdk_file_view_fixed(sdk[1]).rstrip("\n") == mem[1].rstrip("\n")


def _range_error(cmd, sdk, mem):
    return cmd["command"] == "view" and "view_range" in cmd and not sdk[0] and mem[0] and "Invalid `view_range`" in mem[1]


def _prefix(cmd, sdk, mem):
    return sdk[0] == mem[0] and strip_error(mem[1]) == sdk[1]


def _snippet(cmd, sdk, mem):
    ok = "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
    return cmd["command"] == "str_replace" and not sdk[0] and not mem[0] and sdk[1].startswith(ok) and mem[1].startswith(ok)


def _insert_range_text(cmd, sdk, mem):
    return cmd["command"] == "insert" and sdk[0] and mem[0] and "Invalid `insert_line`" in sdk[1] and "range of lines of the file" in mem[1]


def _missing_insert(cmd, sdk, mem):
    return cmd["command"] == "insert" and sdk[0] and mem[0] and sdk[1].endswith("does not exist. Please provide a valid path.") and mem[1].endswith("does not exist")


def _dir_edit(cmd, sdk, mem):
    return cmd["command"] in ("str_replace", "insert") and sdk[0] and mem[0] and sdk[1].endswith("is not a file.") and "does not exist" in mem[1]


def _create_on_dir(cmd, sdk, mem):
    return cmd["command"] == "create" and sdk[0] and mem[0] and "already exists" in sdk[1] and "is a directory" in mem[1]


def _exception(cmd, sdk, mem):
    return sdk[0] and sdk[1].startswith("EXCEPTION") and mem[0] and mem[1].startswith("Error: ")


def _empty_old(cmd, sdk, mem):
    return cmd["command"] == "str_replace" and cmd.get("old_str") == "" and mem[0] and "must not be empty" in mem[1]


def _overlap(cmd, sdk, mem):
    return cmd["command"] == "str_replace" and not sdk[0] and mem[0] and "Multiple occurrences" in mem[1]


def _path_refused(cmd, sdk, mem):
    sdk_refused_or_took = not sdk[0] or any(s in sdk[1] for s in ("escape", "must start with", "EXCEPTION", "does not exist"))
    return mem[0] and mem[1].startswith("Error: Invalid path") and sdk_refused_or_took


def _rename_missing_parents(cmd, sdk, mem):
    return cmd["command"] == "rename" and sdk == (True, f"The path {cmd['old_path']} does not exist") and mem == (True, "Error: " + sdk[1])


def _rename_order(cmd, sdk, mem):
    return (
        cmd["command"] == "rename"
        and sdk == (True, f"The destination {cmd['new_path']} already exists")
        and mem == (True, f"Error: The path {cmd['old_path']} does not exist")
    )


def _omitted_new_str(cmd, sdk, mem):
    return cmd["command"] == "str_replace" and "new_str" not in cmd and sdk == (True, "EXCEPTION TypeError") and not mem[0]


# Specific rules first: the generic ones (D1, D15) would also match some
# answers whose real difference is a specific, state-changing one.
RULES = [
    ("D23", True, _links),
    ("D20", True, _nfc),
    ("D21", True, _credential),
    ("D24", True, _field_types),
    ("D26", False, _image),
    ("D27", True, _size),
    ("D28", False, _outside),
    ("D19", False, _long_echo),
    ("D18", False, _dir_range),
    ("D13", True, _rename_missing_parents),
    ("D16", True, _omitted_new_str),
    ("D15", False, _rename_order),
    ("D12", True, _path_refused),
    ("D14", True, _exception),
    ("D11", True, _overlap),
    ("D10", False, _empty_old),
    ("D23", False, _dir_view_links),
    ("D2", False, _dir_view),
    ("D3", False, _file_view),
    ("D4", False, _range_error),
    ("D5", False, _snippet),
    ("D6", False, _insert_range_text),
    ("D7", False, _missing_insert),
    ("D8", False, _dir_edit),
    ("D9", False, _create_on_dir),
    ("D25", False, _spelling),
    ("D1", False, _prefix),
]


def resync(mem_dir, sdk_dir):
    """Makes the SDK's memory a copy of memfs' (after a known, state-changing difference)."""
    shutil.rmtree(os.path.join(sdk_dir, "memories"))
    shutil.copytree(os.path.join(mem_dir, "memories"), os.path.join(sdk_dir, "memories"), symlinks=True)


def tree(base):
    out = {}
    root = os.path.join(base, "memories")
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        out[rel + "/"] = None
        for f in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, f)
            if f.startswith(".tmp-"):
                continue
            if os.path.islink(full):
                out[os.path.join(rel, f)] = ("symlink", os.readlink(full))
                continue
            with open(full, "rb") as fh:
                out[os.path.join(rel, f)] = fh.read()
    return out


# A 1x1 PNG, planted on disk (the tool writes text only).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def plant_links(memories, outside):
    with open(os.path.join(memories, "real.txt"), "w") as f:
        f.write("real\nline two\n")
    os.makedirs(os.path.join(memories, "dir"))
    with open(os.path.join(memories, "dir", "f.txt"), "w") as f:
        f.write("in dir\n")
    os.symlink("real.txt", os.path.join(memories, "in-link"))
    os.symlink("dir", os.path.join(memories, "dir-link"))
    with open(os.path.join(outside, "secret.txt"), "w") as f:
        f.write("outside the root\n")
    os.symlink(os.path.join(outside, "secret.txt"), os.path.join(memories, "out-link"))


def plant_images(memories, outside):
    with open(os.path.join(memories, "dot.png"), "wb") as f:
        f.write(PNG)
    with open(os.path.join(memories, "dot-named.txt"), "wb") as f:
        f.write(PNG)
    with open(os.path.join(memories, "pic.jpg"), "w") as f:
        f.write("not really an image\n")


# Files put on disk, in both memories, before the scenario's first command.
PLANTS = {"symlinks": plant_links, "images": plant_images}


SCENARIOS = {
    "basics": [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/notes.txt", "file_text": "Meeting notes:\n- timeline\n- next steps\n"},
        {"command": "view", "path": "/memories/notes.txt"},
        {"command": "view", "path": "/memories/notes.txt", "view_range": [2, -1]},
        {"command": "view", "path": "/memories/notes.txt", "view_range": [1, 2]},
        {"command": "view", "path": "/memories/notes.txt", "view_range": [5, 9]},
        {"command": "str_replace", "path": "/memories/notes.txt", "old_str": "timeline", "new_str": "roadmap"},
        {"command": "str_replace", "path": "/memories/notes.txt", "old_str": "absent", "new_str": "x"},
        {"command": "create", "path": "/memories/dup.txt", "file_text": "a\nb\na\n"},
        {"command": "str_replace", "path": "/memories/dup.txt", "old_str": "a", "new_str": "c"},
        {"command": "str_replace", "path": "/memories/dup.txt", "old_str": "b\n"},
        {"command": "insert", "path": "/memories/notes.txt", "insert_line": 0, "insert_text": "TOP\n"},
        {"command": "insert", "path": "/memories/notes.txt", "insert_line": 4, "insert_text": "END\n"},
        {"command": "insert", "path": "/memories/notes.txt", "insert_line": 99, "insert_text": "x\n"},
        {"command": "view", "path": "/memories/notes.txt"},
        {"command": "create", "path": "/memories/notes.txt", "file_text": "again"},
        {"command": "view", "path": "/memories/missing.txt"},
        {"command": "delete", "path": "/memories/missing.txt"},
        {"command": "delete", "path": "/memories/dup.txt"},
        {"command": "view", "path": "/memories"},
    ],
    "directories": [
        {"command": "create", "path": "/memories/a/b/c/d.md", "file_text": "deep\n"},
        {"command": "create", "path": "/memories/a/top.md", "file_text": "top\n"},
        {"command": "create", "path": "/memories/.hidden/x.md", "file_text": "h\n"},
        {"command": "create", "path": "/memories/node_modules/m.js", "file_text": "m\n"},
        {"command": "view", "path": "/memories"},
        {"command": "view", "path": "/memories/a"},
        {"command": "view", "path": "/memories/"},
        {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/z/a2"},
        {"command": "view", "path": "/memories/z/a2/b/c/d.md"},
        {"command": "rename", "old_path": "/memories/z/a2/top.md", "new_path": "/memories/z/a2/b/c/d.md"},
        {"command": "rename", "old_path": "/memories/nothing", "new_path": "/memories/q/r"},
        {"command": "rename", "old_path": "/memories/z", "new_path": "/memories/z/inside"},
        {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
        {"command": "str_replace", "path": "/memories/z", "old_str": "a", "new_str": "b"},
        {"command": "insert", "path": "/memories/z", "insert_line": 0, "insert_text": "b\n"},
        {"command": "create", "path": "/memories/z", "file_text": "b\n"},
        {"command": "delete", "path": "/memories/z"},
        {"command": "delete", "path": "/memories"},
        {"command": "view", "path": "/memories"},
    ],
    "hostile": [
        {"command": "create", "path": "/memories/ok.md", "file_text": "ok\n"},
        {"command": "view", "path": "/memories/../../etc/passwd"},
        {"command": "view", "path": "/etc/passwd"},
        {"command": "create", "path": "/memoriesX/a", "file_text": "1"},
        {"command": "view", "path": "/memories/sub/../ok.md"},
        {"command": "view", "path": "/memories/%2e%2e/%2e%2e/etc/passwd"},
        {"command": "create", "path": "/memories/ok.md/child", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/ok.md", "old_str": "", "new_str": "x"},
        {"command": "str_replace", "path": "/memories/ok.md", "old_str": "aa", "new_str": "x"},
        {"command": "view", "path": "/memories"},
    ],
    "line_endings": [
        {"command": "create", "path": "/memories/crlf.txt", "file_text": "one\r\ntwo\r\n"},
        {"command": "view", "path": "/memories/crlf.txt"},
        {"command": "str_replace", "path": "/memories/crlf.txt", "old_str": "two", "new_str": "2"},
        {"command": "insert", "path": "/memories/crlf.txt", "insert_line": 1, "insert_text": "1.5\r\n"},
        {"command": "create", "path": "/memories/empty.txt", "file_text": ""},
        {"command": "view", "path": "/memories/empty.txt"},
        {"command": "insert", "path": "/memories/empty.txt", "insert_line": 0, "insert_text": "first\n"},
        {"command": "view", "path": "/memories/empty.txt"},
        {"command": "create", "path": "/memories/tabs.txt", "file_text": "\ta\tb\n\n\nend\n"},
        {"command": "view", "path": "/memories/tabs.txt"},
        {"command": "create", "path": "/memories/uni.txt", "file_text": "héllo wörld ✓\n"},
        {"command": "str_replace", "path": "/memories/uni.txt", "old_str": "wörld", "new_str": "welt"},
        {"command": "view", "path": "/memories/uni.txt"},
        {"command": "create", "path": "/memories/blank-end.txt", "file_text": "a\n\n"},
        {"command": "insert", "path": "/memories/blank-end.txt", "insert_line": 0, "insert_text": "top\n"},
    ],
    "overlap": [
        {"command": "create", "path": "/memories/o.txt", "file_text": "aaa\n"},
        {"command": "str_replace", "path": "/memories/o.txt", "old_str": "aa", "new_str": "b"},
    ],
    "rename_order": [
        {"command": "create", "path": "/memories/there.txt", "file_text": "t\n"},
        {"command": "rename", "old_path": "/memories/gone.txt", "new_path": "/memories/there.txt"},
    ],
    "long_echo": [
        {"command": "create", "path": "/memories/l.txt", "file_text": "short\n"},
        {"command": "str_replace", "path": "/memories/l.txt", "old_str": "y" * 300, "new_str": "z"},
    ],
    "dir_range": [
        {"command": "create", "path": "/memories/r/a.md", "file_text": "a\n"},
        {"command": "create", "path": "/memories/r/b.md", "file_text": "b\n"},
        {"command": "create", "path": "/memories/r/c.md", "file_text": "c\n"},
        {"command": "view", "path": "/memories/r", "view_range": [1, 2]},
    ],
    "insert_newlines": [
        {"command": "create", "path": "/memories/i.txt", "file_text": "one\ntwo\n"},
        {"command": "insert", "path": "/memories/i.txt", "insert_line": 1, "insert_text": "multi\nline\n\n\n"},
        {"command": "create", "path": "/memories/j.txt", "file_text": "a\nb"},
        {"command": "insert", "path": "/memories/j.txt", "insert_line": 2, "insert_text": "c"},
        {"command": "create", "path": "/memories/k.txt", "file_text": ""},
        {"command": "insert", "path": "/memories/k.txt", "insert_line": 0, "insert_text": "first"},
        {"command": "create", "path": "/memories/m.txt", "file_text": "a"},
        {"command": "insert", "path": "/memories/m.txt", "insert_line": 1, "insert_text": ""},
        {"command": "view", "path": "/memories/m.txt"},
    ],
    "symlinks": [
        {"command": "view", "path": "/memories"},
        {"command": "view", "path": "/memories/in-link"},
        {"command": "view", "path": "/memories/dir-link/f.txt"},
        {"command": "view", "path": "/memories/out-link"},
        {"command": "str_replace", "path": "/memories/in-link", "old_str": "real", "new_str": "edited"},
        {"command": "insert", "path": "/memories/in-link", "insert_line": 0, "insert_text": "top\n"},
        {"command": "create", "path": "/memories/dir-link/new.txt", "file_text": "through a link\n"},
        {"command": "create", "path": "/memories/in-link", "file_text": "replaced\n"},
        {"command": "rename", "old_path": "/memories/dir-link", "new_path": "/memories/moved-link"},
        {"command": "delete", "path": "/memories/out-link"},
        {"command": "view", "path": "/memories"},
    ],
    "field_types": [
        {"command": "create", "path": "/memories/f.txt", "file_text": "a\nb\nc\n"},
        {"command": "insert", "path": "/memories/f.txt", "insert_line": "1", "insert_text": "s\n"},
        {"command": "insert", "path": "/memories/f.txt", "insert_line": 2.0, "insert_text": "f\n"},
        {"command": "view", "path": "/memories/f.txt", "view_range": ["1", "2"]},
        {"command": "view", "path": "/memories/f.txt", "view_range": [1]},
        {"command": "view", "path": "/memories/f.txt", "view_range": [1, 2, 3]},
        {"command": "view", "path": "/memories/f.txt", "view_range": []},
        {"command": "insert", "path": "/memories/f.txt", "insert_line": True, "insert_text": "t\n"},
        {"command": "view", "path": "/memories/f.txt"},
    ],
    "spelling": [
        {"command": "create", "path": "/memories//double.txt", "file_text": "d\n"},
        {"command": "create", "path": "/memories/trail/", "file_text": "t\n"},
        {"command": "str_replace", "path": "/memories//double.txt", "old_str": "d", "new_str": "e"},
        {"command": "insert", "path": "/memories/trail/", "insert_line": 0, "insert_text": "x\n"},
        {"command": "delete", "path": "/memories//trail"},
        {"command": "view", "path": "/memories"},
    ],
    "nfc": [
        {"command": "create", "path": "/memories/cafe\u0301.md", "file_text": "nfd\n"},
        {"command": "create", "path": "/memories/caf\u00e9.md", "file_text": "nfc\n"},
        {"command": "view", "path": "/memories/cafe\u0301.md"},
        {"command": "view", "path": "/memories"},
    ],
    "credentials": [
        {"command": "create", "path": "/memories/deploy.md", "file_text": "token: ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8\n"},
        {"command": "create", "path": "/memories/keys/sk-ant-api03-" + "x" * 93 + "AA", "file_text": "k\n"},
        {"command": "view", "path": "/memories"},
    ],
    "size": [
        {"command": "create", "path": "/memories/big.md", "file_text": "a" * 1_500_000 + "\n"},
        {"command": "create", "path": "/memories/small.md", "file_text": "a\n"},
        {"command": "view", "path": "/memories"},
    ],
    "images": [
        {"command": "view", "path": "/memories/dot.png"},
        {"command": "view", "path": "/memories/dot-named.txt"},
        {"command": "view", "path": "/memories/pic.jpg"},
    ],
}


def random_sequence(rng, n):
    names = ["a", "b", "c.md", "d"]

    def path():
        return "/memories/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 3)))

    def text():
        lines = [rng.choice(["x", "y z", "xy", "", "é", "x\ty"]) for _ in range(rng.randint(0, 5))]
        return "".join(l + "\n" for l in lines)

    seq = []
    for _ in range(n):
        k = rng.choice(["view", "view", "create", "create", "str_replace", "insert", "delete", "rename"])
        if k == "view":
            c = {"command": "view", "path": rng.choice([path(), "/memories"])}
        elif k == "create":
            c = {"command": "create", "path": path(), "file_text": text()}
        elif k == "str_replace":
            c = {"command": "str_replace", "path": path(), "old_str": rng.choice(["x", "y z", "é", "xy\n"]), "new_str": rng.choice(["", "q", "new\nline"])}
        elif k == "insert":
            c = {"command": "insert", "path": path(), "insert_line": rng.randint(0, 4), "insert_text": rng.choice(["i\n", "two\nlines\n"])}
        elif k == "delete":
            c = {"command": "delete", "path": path()}
        else:
            c = {"command": "rename", "old_path": path(), "new_path": path()}
        seq.append(c)
    return seq


def sdk_insert(before, line, text):
    """The SDK's insert: every trailing newline of the text stripped, lines
    split on LF, a final newline always."""
    lines = before.split("\n")
    if lines[-1] == "":
        lines.pop()
    lines.insert(line, text.rstrip("\n"))
    out = "\n".join(lines)
    return out if out.endswith("\n") else out + "\n"


def memfs_insert(before, line, text):
    """memfs' insert rule (docs/SEMANTICS.md, insert)."""
    lines = before.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    n = len(lines)
    body = text[:-1] if text.endswith("\n") else text
    lines.insert(line, body)
    out = "\n".join(lines)
    if before == "":
        final = text.endswith("\n")
    else:
        final = before.endswith("\n") or (line == n and (body == "" or body.endswith("\n")))
    return out + "\n" if final else out


def insert_contents_differ(cmd, before, sdk_dir, mem_dir):
    """After an insert both accepted: None if the files agree, else the rule id
    that explains the difference, or "?" when nothing does."""
    rel = canonical(cmd["path"])[len("/memories/"):]
    a = open(os.path.join(sdk_dir, "memories", rel), "rb").read()
    b = open(os.path.join(mem_dir, "memories", rel), "rb").read()
    if a == b:
        return None
    # D17: the SDK drops a file's last, blank line when inserting above it.
    if before is not None and before.endswith("\n\n") and a + b"\n" == b:
        return "D17"
    # D22: each did what its rule says with the newlines.
    line, text = int(cmd["insert_line"]), cmd["insert_text"]
    if before is not None and a.decode() == sdk_insert(before, line, text) and b.decode() == memfs_insert(before, line, text):
        return "D22"
    return "?"


def read_before(cmd, sdk_dir):
    """The file an insert is about to change, as the SDK's memory holds it."""
    if cmd["command"] != "insert" or not isinstance(cmd.get("path"), str):
        return None
    try:
        with open(os.path.join(sdk_dir, "memories", canonical(cmd["path"])[len("/memories/"):]), encoding="utf-8") as f:
            return f.read()
    except (OSError, ValueError):
        return None


def run(binary, name, seq, counts, failures):
    with tempfile.TemporaryDirectory() as sdk_dir, tempfile.TemporaryDirectory() as mem_dir, \
            tempfile.TemporaryDirectory() as outside:
        if name in PLANTS:
            for base in (sdk_dir, mem_dir):
                os.makedirs(os.path.join(base, "memories"))
                PLANTS[name](os.path.join(base, "memories"), outside)
        sdk = BetaLocalFilesystemMemoryTool(base_path=sdk_dir)
        mem = Memfs(binary, mem_dir)
        try:
            for i, cmd in enumerate(seq):
                CTX["sdk_dir"], CTX["links"] = sdk_dir, links_below(sdk_dir)
                before = read_before(cmd, sdk_dir)
                a, b = sdk_call(sdk, cmd), mem.call(cmd)
                if a == b:
                    counts["identical"] = counts.get("identical", 0) + 1
                    if cmd["command"] == "insert" and not a[0]:
                        mem.checkpoint()
                        why = insert_contents_differ(cmd, before, sdk_dir, mem_dir)
                        if why == "?":
                            failures.append(f"{name} #{i} {json.dumps(cmd)}: the files differ after the insert")
                            return
                        if why:
                            counts[why] = counts.get(why, 0) + 1
                            if CTX.get("show"):
                                print(f"{why}: {name} #{i} {json.dumps(cmd, ensure_ascii=False)[:120]}")
                            resync(mem_dir, sdk_dir)
                    continue
                rule = next((r for r in RULES if r[2](cmd, a, b)), None)
                if rule is None:
                    failures.append(f"{name} #{i} {json.dumps(cmd)}\n  sdk:   {a!r}\n  memfs: {b!r}")
                    return
                counts[rule[0]] = counts.get(rule[0], 0) + 1
                if CTX.get("show"):
                    print(f"{rule[0]}: {name} #{i} {json.dumps(cmd, ensure_ascii=False)[:120]}")
                if rule[1]:
                    mem.checkpoint()
                    resync(mem_dir, sdk_dir)
        finally:
            mem.close()
        if tree(sdk_dir) != tree(mem_dir):
            failures.append(f"{name}: trees differ\n  sdk:   {tree(sdk_dir)}\n  memfs: {tree(mem_dir)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("semantics")
    ap.add_argument("--random", type=int, default=100)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--show", action="store_true", help="print each difference with the row that explains it")
    args = ap.parse_args()
    CTX["show"] = args.show
    semantics = open(args.semantics, encoding="utf-8").read()
    documented = set(re.findall(r"\bD\d+\b", semantics))
    rows = re.findall(r"^\| (D\d+) \|", semantics, re.M)
    missing = sorted({r for r in [r[0] for r in RULES] + ["D17", "D22"] if r not in documented})
    if missing:
        raise SystemExit(f"rules not documented in {args.semantics}: {missing}")
    unrecognised = [r for r in rows if r not in {x[0] for x in RULES} | {"D17", "D22"}]
    if unrecognised:
        raise SystemExit(f"rows of the table no rule here recognises: {unrecognised}")
    counts, failures = {}, []
    for name, seq in SCENARIOS.items():
        run(args.binary, name, seq, counts, failures)
    rng = random.Random(args.seed)
    for k in range(args.random):
        run(args.binary, f"random-{k}", random_sequence(rng, 25), counts, failures)
    total = sum(counts.values())
    print(f"conformance: {total} results compared: {counts.get('identical', 0)} identical")
    for rule_id in sorted((r for r in counts if r != "identical"), key=lambda r: int(r[1:])):
        if counts.get(rule_id):
            print(f"  {rule_id}: {counts[rule_id]} explained by docs/SEMANTICS.md")
    never = [r for r in rows if not counts.get(r)]
    for r in never:
        failures.append(f"{r}: a row of the table that no scenario produced")
    for f in failures:
        print("UNEXPLAINED DIFFERENCE:", f)
    passed = len(SCENARIOS) + args.random - len(failures)
    print(f"{passed} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
