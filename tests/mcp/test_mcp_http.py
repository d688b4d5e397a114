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
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import checks
from conftest import moat_env

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


@pytest.fixture(scope="module")
def mcp_http(moat_bin, moat_home, session_key):
    url = os.environ.get("MOAT_TEST_MCP_URL")
    if url:
        yield url, os.environ["MOAT_TEST_MCP_TOKEN"]
        return
    token = f"agent-{uuid.uuid4().hex}"
    operator = f"op-{uuid.uuid4().hex}"
    (moat_home / "moat.toml").write_text(
        "[serve]\n"
        f'operator_token = "{operator}"\n'
        "[[serve.agents]]\n"
        f'token = "{token}"\n'
        f'session = "{session_key}"\n'
        'agent = "mcp-test"\n'
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
