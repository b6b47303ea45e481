"""The conversation the package tests play through the SDKs' tool runners
(tests/python/test_package.py, test_npm_package.py): views, creates, edits,
each error string of the memory tool, a rename, an image, a delete; each
tool call with the exact result memfs must give (the spec's strings)."""
import json

LISTING = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n"
ANA = "/memories/notes/ana.md"
MOVED = "/memories/people/ana.md"


TOOL = "memory"


def use(i, input, content, is_error=False):
    return {"type": "tool_use", "id": f"toolu_{i:02}", "name": TOOL, "input": input,
            "expect": {"content": content, "is_error": is_error}}


def script(png_size, tool="memory", image=True):
    """The turns; `tool`: the memory tool's name as the client knows it
    (`mcp__memfs__memory` through Claude Code's MCP); `image`: with the
    image view (its result is an image block)."""
    turns = _turns(png_size)
    for turn in turns:
        for block in turn:
            if block.get("type") == "tool_use":
                block["name"] = tool
    if not image:
        turns[3] = [b for b in turns[3] if b.get("id") != "toolu_16"]
    return turns


def _turns(png_size):
    return [
        [
            {"type": "text", "text": "Let me check my memory."},
            use(1, {"command": "view", "path": "/memories"},
                LISTING + f"{png_size}\t/memories\n{png_size}\t/memories/pic.png"),
            use(2, {"command": "create", "path": ANA, "file_text": "Ana prefers email.\n"},
                f"File created successfully at: {ANA}"),
        ],
        [
            use(3, {"command": "str_replace", "path": ANA, "old_str": "email", "new_str": "phone"},
                "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tAna prefers phone."),
            use(4, {"command": "insert", "path": ANA, "insert_line": 1, "insert_text": "Ana lives in Lisbon.\n"},
                f"The file {ANA} has been edited."),
            use(5, {"command": "view", "path": ANA},
                f"Here's the content of {ANA} with line numbers:\n     1\tAna prefers phone.\n     2\tAna lives in Lisbon."),
        ],
        [
            use(6, {"command": "view", "path": "/memories/missing.md"},
                "The path /memories/missing.md does not exist. Please provide a valid path.", True),
            use(7, {"command": "create", "path": ANA, "file_text": "again\n"},
                f"Error: File {ANA} already exists", True),
            use(8, {"command": "str_replace", "path": ANA, "old_str": "Paris", "new_str": "Rome"},
                f"No replacement was performed, old_str `Paris` did not appear verbatim in {ANA}.", True),
            use(9, {"command": "str_replace", "path": ANA, "old_str": "Ana", "new_str": "She"},
                "No replacement was performed. Multiple occurrences of old_str `Ana` in lines: 1, 2. Please ensure it is unique",
                True),
            use(10, {"command": "insert", "path": ANA, "insert_line": 9, "insert_text": "x\n"},
                "Error: Invalid `insert_line` parameter: 9. It should be within the range of lines of the file: [0, 2]",
                True),
            use(11, {"command": "delete", "path": "/memories/nope.md"},
                "Error: The path /memories/nope.md does not exist", True),
            use(12, {"command": "rename", "old_path": "/memories/nope.md", "new_path": "/memories/n.md"},
                "Error: The path /memories/nope.md does not exist", True),
            use(13, {"command": "view", "path": "/etc/passwd"},
                "Error: Invalid path `/etc/passwd`: the path must start with /memories", True),
        ],
        [
            use(14, {"command": "rename", "old_path": ANA, "new_path": MOVED},
                f"Successfully renamed {ANA} to {MOVED}"),
            use(15, {"command": "rename", "old_path": "/memories/pic.png", "new_path": MOVED},
                f"Error: The destination {MOVED} already exists", True),
            use(16, {"command": "view", "path": "/memories/pic.png"}, {"images": 1, "text": ""}),
        ],
        [
            use(17, {"command": "delete", "path": MOVED}, f"Successfully deleted {MOVED}"),
        ],
        [{"type": "text", "text": "I noted that Ana prefers phone calls, then tidied up."}],
    ]


def agent_sessions(log_json: str) -> set:
    """The sessions `memfs log --json` credits agents' changes to."""
    rows = [json.loads(line) for line in log_json.splitlines()]
    return {r["actor"].get("session") for r in rows if r["actor"]["kind"] == "agent"}


def remember_ana():
    """The README's snippets' conversation ("Remember that Ana prefers
    email."): one create, then the model's answer."""
    return [
        [use(1, {"command": "create", "path": "/memories/ana.md", "file_text": "Ana prefers email.\n"},
             "File created successfully at: /memories/ana.md")],
        [{"type": "text", "text": "Noted: Ana prefers email."}],
    ]
