"""MCP over streamable HTTP (`/mcp` under `moat serve`), driven by the official MCP Python SDK.

By default this starts `moat serve --tcp 127.0.0.1:<port>` with a private MOAT_HOME and one
agent token bound to a unique session. To test a server that is already running (say the
compose deployment), set MOAT_TEST_MCP_URL (e.g. http://localhost:7878/mcp) and
MOAT_TEST_MCP_TOKEN (an agent token).
"""

import os
import socket
import subprocess
import time
import uuid
from contextlib import asynccontextmanager, contextmanager

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import checks
from conftest import moat_env, stop_daemon

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base: str, token: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"moat serve exited with {proc.returncode}")
        try:
            r = httpx2.get(f"{base}/v1/health", headers={"Authorization": f"Bearer {token}"}, timeout=2)
            if r.status_code == 200:
                return
            last = r.status_code
        except httpx2.HTTPError as e:
            last = e
        time.sleep(0.2)
    raise AssertionError(f"moat serve did not become healthy: {last}")


@contextmanager
def serving(moat_bin, moat_home, session_key, extra_toml=""):
    """`moat serve` on a free port with one agent token bound to `session_key`; yields the
    MCP URL and the token, and ends the server after."""
    token = f"agent-{uuid.uuid4().hex}"
    operator = f"op-{uuid.uuid4().hex}"
    (moat_home / "moat.toml").write_text(
        "[serve]\n"
        f'operator_token = "{operator}"\n'
        "[[serve.agents]]\n"
        f'token = "{token}"\n'
        f'session = "{session_key}"\n'
        'agent = "mcp-test"\n' + extra_toml
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [moat_bin, "serve", "--tcp", f"127.0.0.1:{port}"],
        env=moat_env(moat_home),
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_healthy(base, operator, proc)
        yield f"{base}/mcp", token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def mcp_http(moat_bin, moat_home, session_key):
    url = os.environ.get("MOAT_TEST_MCP_URL")
    if url:
        yield url, os.environ["MOAT_TEST_MCP_TOKEN"]
        return
    with serving(moat_bin, moat_home, session_key) as served:
        yield served


@asynccontextmanager
async def connect(url, token, events=None):
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30, read=300),
    )
    async with http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, logging_callback=events) as client:
                init = await client.initialize()
                yield client, init


async def test_initialize_and_tools(mcp_http, moat_version):
    async with connect(*mcp_http) as (client, init):
        checks.check_initialize(init, moat_version)
        await checks.check_tools(client)


async def test_exec(mcp_http):
    async with connect(*mcp_http) as (client, _):
        await checks.check_echo(client)
        await checks.check_exit_code(client)
        await checks.check_bad_requests(client)


async def test_background_and_poll(mcp_http):
    events = checks.Events()
    async with connect(*mcp_http, events) as (client, _):
        await checks.check_background_poll(client, events)


async def test_kill(mcp_http):
    events = checks.Events()
    async with connect(*mcp_http, events) as (client, _):
        await checks.check_kill(client, events)


async def test_signal_death(mcp_http):
    async with connect(*mcp_http) as (client, _):
        await checks.check_signal_death(client)


async def test_cancelled_call_ends_its_command(mcp_http):
    async with connect(*mcp_http) as (client, _):
        await checks.check_cancelled_call(client, "sleep 342")


async def test_log_pages_past_the_cap(mcp_http):
    async with connect(*mcp_http) as (client, _):
        await checks.check_log_pages_past_the_cap(client)


async def test_refuses_unknown_token(mcp_http):
    url, _ = mcp_http
    with pytest.raises(Exception):
        async with connect(url, "not-a-token") as (client, _):
            await client.list_tools()


async def test_switches_apply_over_http(moat_bin, tmp_path):
    """`exec.process_tool = false`: no `process` tool, and a background request runs to its
    end; `exec.notify_on_exit = false`: a background exit sends no notification."""
    if os.environ.get("MOAT_TEST_MCP_URL"):
        pytest.skip("needs a server of its own configuration")
    key = f"mcp-sw-{uuid.uuid4().hex[:8]}"
    home = tmp_path / "home"
    home.mkdir()
    try:
        with serving(moat_bin, home, key, "[exec]\nprocess_tool = false\n") as served:
            async with connect(*served) as (client, _):
                names = [t.name for t in (await client.list_tools()).tools]
                assert "process" not in names and "exec" in names, names
                r = await client.call_tool("exec", {"command": "sleep 1; echo done-sync", "background": True})
                assert "done-sync" in checks.text_of(r), r
        events = checks.Events()
        with serving(moat_bin, home, key, "[exec]\nnotify_on_exit = false\n") as served:
            async with connect(*served, events) as (client, _):
                names = [t.name for t in (await client.list_tools()).tools]
                assert "process" in names, names
                await client.call_tool("exec", {"command": "echo tick-tock", "background": True})
                await anyio.sleep(3)
                exits = [m.data for m in events.messages if "exit" in str(m.data).lower()]
                assert not exits, exits
    finally:
        subprocess.run([moat_bin, "sessions", "rm", "--purge", key], env=moat_env(home), capture_output=True)
        stop_daemon(home)
