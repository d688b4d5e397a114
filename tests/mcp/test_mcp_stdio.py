"""`moat mcp` over stdio, driven by the official MCP Python SDK."""

from contextlib import asynccontextmanager

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import checks
from conftest import moat_env

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connect(moat_bin, moat_home, session_key, events=None):
    params = StdioServerParameters(
        command=moat_bin,
        args=["mcp", "--session", session_key],
        env=moat_env(moat_home),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, logging_callback=events) as client:
            init = await client.initialize()
            yield client, init


async def test_initialize_and_tools(moat_bin, moat_home, session_key, moat_version):
    async with connect(moat_bin, moat_home, session_key) as (client, init):
        checks.check_initialize(init, moat_version)
        await checks.check_tools(client)


async def test_exec(moat_bin, moat_home, session_key):
    async with connect(moat_bin, moat_home, session_key) as (client, _):
        await checks.check_echo(client)
        await checks.check_exit_code(client)
        await checks.check_bad_requests(client)


async def test_background_and_poll(moat_bin, moat_home, session_key):
    events = checks.Events()
    async with connect(moat_bin, moat_home, session_key, events) as (client, _):
        await checks.check_background_poll(client, events)


async def test_kill(moat_bin, moat_home, session_key):
    events = checks.Events()
    async with connect(moat_bin, moat_home, session_key, events) as (client, _):
        await checks.check_kill(client, events)


async def test_session_from_env(moat_bin, moat_home, session_key):
    """Without --session, MOAT_SESSION names the session."""
    env = moat_env(moat_home)
    env["MOAT_SESSION"] = session_key
    params = StdioServerParameters(command=moat_bin, args=["mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            await client.call_tool("exec", {"command": "echo marker > /workspace/from-env"})
    async with connect(moat_bin, moat_home, session_key) as (client, _):
        result = await client.call_tool("exec", {"command": "cat /workspace/from-env"})
        assert checks.text_of(result) == "marker"


async def test_signal_death(moat_bin, moat_home, session_key):
    async with connect(moat_bin, moat_home, session_key) as (client, _):
        await checks.check_signal_death(client)


async def test_cancelled_call_ends_its_command(moat_bin, moat_home, session_key):
    async with connect(moat_bin, moat_home, session_key) as (client, _):
        await checks.check_cancelled_call(client, "sleep 341")


async def test_log_pages_past_the_cap(moat_bin, moat_home, session_key):
    async with connect(moat_bin, moat_home, session_key) as (client, _):
        await checks.check_log_pages_past_the_cap(client)
