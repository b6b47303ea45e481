"""memfs mcp driven by the official `mcp` Python package's client over stdio."""
import base64

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"


def server(memfs_bin, data_dir, *extra):
    return StdioServerParameters(command=memfs_bin, args=["--data", str(data_dir), "mcp", *extra])


def run(coro):
    return anyio.run(coro)


def test_handshake_tools_and_instructions(memfs_bin, data_dir):
    async def main():
        async with Client(server(memfs_bin, data_dir)) as client:
            assert client.protocol_version == "2025-11-25"
            assert client.server_info.name == "memfs"
            assert "MEMORY PROTOCOL" in client.instructions
            assert "ALWAYS VIEW YOUR MEMORY DIRECTORY" in client.instructions
            await client.send_ping()
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["memory"]
            schema = tools[0].input_schema
            assert schema["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert", "delete", "rename"]
            for field in ["path", "view_range", "file_text", "old_str", "new_str", "insert_line", "insert_text", "old_path", "new_path"]:
                assert field in schema["properties"], field
            assert tools[0].annotations.destructive_hint is True
            assert tools[0].annotations.read_only_hint is False

    run(main)


def test_tool_calls_results_and_errors(memfs_bin, data_dir):
    async def main():
        async with Client(server(memfs_bin, data_dir)) as client:
            r = await client.call_tool("memory", {"command": "create", "path": "/memories/a.md", "file_text": "hello\n"})
            assert not r.is_error
            assert r.content[0].text == "File created successfully at: /memories/a.md"
            r = await client.call_tool("memory", {"command": "str_replace", "path": "/memories/a.md", "old_str": "hello", "new_str": "hi"})
            assert r.content[0].text.startswith("The memory file has been edited.")
            r = await client.call_tool("memory", {"command": "view", "path": "/memories/a.md"})
            assert r.content[0].text == "Here's the content of /memories/a.md with line numbers:\n     1\thi"
            r = await client.call_tool("memory", {"command": "view", "path": "/memories/../etc/passwd"})
            assert r.is_error and r.content[0].text.startswith("Error: Invalid path")
            r = await client.call_tool("memory", {"command": "delete", "path": "/memories"})
            assert r.is_error and r.content[0].text == "Error: Cannot delete the /memories directory itself"
        assert (data_dir / "memories" / "a.md").read_text() == "hi\n"

    run(main)


def test_image_view_is_an_mcp_image_block(memfs_bin, data_dir):
    (data_dir / "memories").mkdir(parents=True)
    (data_dir / "memories" / "dot.png").write_bytes(PNG)

    async def main():
        async with Client(server(memfs_bin, data_dir)) as client:
            r = await client.call_tool("memory", {"command": "view", "path": "/memories/dot.png"})
            assert not r.is_error
            assert r.content[0].type == "image"
            assert r.content[0].mime_type == "image/png"
            assert base64.b64decode(r.content[0].data) == PNG

    run(main)


def test_protocol_errors_are_json_rpc_errors(memfs_bin, data_dir):
    from mcp.shared.exceptions import MCPError

    async def main():
        async with Client(server(memfs_bin, data_dir)) as client:
            with pytest.raises(MCPError) as unknown_tool:
                await client.session._dispatcher.send_raw_request("tools/call", {"name": "bash", "arguments": {}}, {})
            assert unknown_tool.value.error.code == -32602
            with pytest.raises(MCPError) as no_method:
                await client.session._dispatcher.send_raw_request("resources/list", {}, {})
            assert no_method.value.error.code == -32601

    run(main)


def test_the_readmes_mcp_client_example_runs(memfs_bin, data_dir):
    """examples/mcp/client.py, as the README shows it."""
    import pathlib
    import subprocess
    import sys
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "mcp" / "client.py"
    out = subprocess.run([sys.executable, str(example), memfs_bin, str(data_dir)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "tools: ['memory']" in out.stdout, out.stdout
    assert "File created successfully at: /memories/notes.md" in out.stdout, out.stdout
    assert "1\tAcme prefers email." in out.stdout, out.stdout
    # Again: the file is there, so the create fails, and so does the run.
    again = subprocess.run([sys.executable, str(example), memfs_bin, str(data_dir)],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "the create failed" in again.stderr, (again.stdout, again.stderr)
