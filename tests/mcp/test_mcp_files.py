"""The file tools (read_file, write_file, list_dir, apply_patch) over `moat mcp` (stdio),
driven by the official MCP Python SDK. Each call travels client → moat mcp → the home's
daemon → the workspace; see docs/mcp.md, "File tools"."""

from contextlib import asynccontextmanager

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from checks import text_of
from conftest import moat_env

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connect(moat_bin, moat_home, session_key):
    params = StdioServerParameters(
        command=moat_bin,
        args=["mcp", "--session", session_key],
        env=moat_env(moat_home),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            yield client


async def ok(client, tool, args) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error is False, (tool, args, text_of(result))
    return text_of(result)


async def refused(client, tool, args) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error is True, (tool, args, text_of(result))
    return text_of(result)


async def sh(client, command) -> str:
    return await ok(client, "exec", {"command": command})


async def test_write_read_list(moat_bin, moat_home, session_key):
    async with connect(moat_bin, moat_home, session_key) as client:
        text = await ok(client, "write_file", {"path": "notes/a.txt", "content": "hello\nworld\n", "createDirs": True})
        assert "Created" in text, text
        # The sandbox sees it, owned by its own user.
        assert await sh(client, "cat notes/a.txt; [ \"$(stat -c %u notes/a.txt)\" = \"$(id -u)\" ] && echo mine") == "hello\nworld\nmine"
        assert await ok(client, "read_file", {"path": "/workspace/notes/a.txt"}) == "hello\nworld\n"
        text = await ok(client, "read_file", {"path": "notes/a.txt", "offset": 2, "limit": 1})
        assert text == "world\n", text
        listing = await ok(client, "list_dir", {"path": "notes"})
        assert "a.txt  12 bytes" in listing, listing
        await sh(client, "head -c 2000 /bin/sh > notes/bin")
        result = await client.call_tool("read_file", {"path": "notes/bin"})
        assert result.structured_content["binary"] is True
        assert "binary file (2000 bytes)" in text_of(result)
        # Without createDirs a missing directory is an error.
        text = await refused(client, "write_file", {"path": "nope/x.txt", "content": "x"})
        assert "no such file or directory" in text, text
        # Unknown parameters are refused, not ignored.
        text = await refused(client, "read_file", {"path": "notes/a.txt", "lines": 3})
        assert text.startswith("Invalid read_file arguments"), text


async def test_patch_all_or_nothing(moat_bin, moat_home, session_key):
    async with connect(moat_bin, moat_home, session_key) as client:
        await sh(client, "printf 'one\\ntwo\\n' > p1.txt; printf 'a\\nb\\n' > p2.txt")
        before = await sh(client, "sha256sum p1.txt p2.txt")
        bad = (
            "*** Begin Patch\n*** Update File: p1.txt\n@@\n one\n-two\n+TWO\n"
            "*** Update File: p2.txt\n@@\n-a\n+A\n@@\n-missing line\n+x\n*** End Patch"
        )
        text = await refused(client, "apply_patch", {"input": bad})
        assert "hunk 2" in text and "p2.txt" in text, text
        assert await sh(client, "sha256sum p1.txt p2.txt") == before
        good = (
            "*** Begin Patch\n*** Update File: p1.txt\n@@\n one\n-two\n+TWO\n"
            "*** Add File: p3.txt\n+three\n*** Delete File: p2.txt\n*** End Patch"
        )
        text = await ok(client, "apply_patch", {"input": good})
        assert "M p1.txt" in text and "A p3.txt" in text and "D p2.txt" in text, text
        assert await sh(client, "cat p1.txt p3.txt; test -e p2.txt || echo gone") == "one\nTWO\nthree\ngone"
        text = await refused(client, "apply_patch", {"input": "*** Update File: p1.txt\n"})
        assert "Begin Patch" in text, text


async def test_paths_that_leave_are_refused(moat_bin, moat_home, session_key):
    async with connect(moat_bin, moat_home, session_key) as client:
        await sh(client, "rm -f etc; ln -s /etc etc")
        with open("/etc/hostname", "rb") as f:
            host_hostname = f.read()
        for tool, args in (
            ("read_file", {"path": "etc/passwd"}),
            ("read_file", {"path": "../../../etc/passwd"}),
            ("read_file", {"path": "/etc/passwd"}),
            ("write_file", {"path": "etc/hostname", "content": "owned"}),
            ("write_file", {"path": "../x.txt", "content": "x"}),
            ("list_dir", {"path": "etc"}),
            ("list_dir", {"path": ".."}),
            ("apply_patch", {"input": "*** Begin Patch\n*** Add File: etc/moat-x\n+x\n*** End Patch"}),
            ("apply_patch", {"input": "*** Begin Patch\n*** Add File: ../moat-x\n+x\n*** End Patch"}),
        ):
            text = await refused(client, tool, args)
            assert "leaves the workspace" in text, (tool, args, text)
            assert text.startswith("Failed to use path"), text
        with open("/etc/hostname", "rb") as f:
            assert f.read() == host_hostname
