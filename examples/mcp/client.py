"""The memory tool of `memfs mcp`, called from a program with the official
`mcp` package's client over stdio (what an MCP host does for its model).

usage: python examples/mcp/client.py [MEMFS_BIN] [DATA_DIR]
"""
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main(memfs, data):
    server = StdioServerParameters(command=memfs, args=["--data", data, "mcp"])
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        print("tools:", [t.name for t in tools])
        for call in ({"command": "create", "path": "/memories/notes.md", "file_text": "Acme prefers email.\n"},
                     {"command": "view", "path": "/memories/notes.md"}):
            result = await client.call_tool("memory", call)
            print(result.content[0].text)
            if result.is_error:
                # A failed call is a failed run.
                sys.exit(f"the {call['command']} failed")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "memfs",
              sys.argv[2] if len(sys.argv) > 2 else "./memory")
