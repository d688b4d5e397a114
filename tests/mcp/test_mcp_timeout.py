"""The exec timeout over MCP (stdio), in a home whose `exec.timeout_secs` is short: it applies
to a yielded or backgrounded command too, from the command's start; `timeout: 0` is none."""

import pytest

import checks
from conftest import stop_daemon
from test_mcp_stdio import connect

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def moat_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("moat-home-timeout")
    (home / "moat.toml").write_text("[exec]\ntimeout_secs = 2\n")
    yield home
    stop_daemon(home)


async def test_yielded_and_background_commands_time_out(moat_bin, moat_home, session_key):
    async with connect(moat_bin, moat_home, session_key) as (client, _):
        # The case: it used to finish with code 0 after 4 s.
        yielded = await client.call_tool("exec", {"command": "sleep 4; echo done", "yieldMs": 500})
        assert yielded.structured_content["status"] == "running", yielded
        background = await client.call_tool("exec", {"command": "sleep 4; echo done", "background": True})
        unbounded = await client.call_tool(
            "exec", {"command": "sleep 3; echo done", "background": True, "timeout": 0}
        )
        for started in (yielded, background):
            poll = await checks.wait_ended(client, started.structured_content["sessionId"])
            assert poll.structured_content["status"] == "failed", poll
            assert poll.structured_content["timedOut"] is True, poll
            assert "Process timed out after 2 seconds" in checks.text_of(poll)
            assert "done" not in poll.structured_content["aggregated"]
        poll = await checks.wait_ended(client, unbounded.structured_content["sessionId"])
        assert poll.structured_content["status"] == "completed", poll
        assert "done" in poll.structured_content["aggregated"]
