"""The control plane through E2B's SDK: create, connect, kill, list, timeouts and info, each
key seeing its own sandboxes only."""

import time

import pytest
from e2b import AsyncSandbox, Sandbox, SandboxQuery
from e2b.exceptions import AuthenticationException, NotFoundException, SandboxException

from conftest import OTHER_KEY


def test_create_run_kill(served):
    sb = Sandbox.create()
    try:
        assert sb.is_running()
        assert sb.commands.run("echo ready").stdout == "ready\n"
        info = sb.get_info()
        assert info.sandbox_id == sb.sandbox_id
        assert info.template_id == "base"
        assert info.state.value == "running"
        assert info.end_at > info.started_at
    finally:
        assert sb.kill() is True
    assert not sb.is_running()
    # Killed is gone: a second kill finds nothing.
    assert Sandbox.kill(sb.sandbox_id) is False


def test_connect_list_and_metadata_filters(served, tag):
    a = Sandbox.create(metadata={"suite": tag, "which": "a"})
    b = Sandbox.create(metadata={"suite": tag, "which": "b"})
    try:
        again = Sandbox.connect(a.sandbox_id)
        assert again.commands.run("echo $((6*7))").stdout == "42\n"
        mine = Sandbox.list(query=SandboxQuery(metadata={"suite": tag})).next_items()
        assert sorted(s.sandbox_id for s in mine) == sorted([a.sandbox_id, b.sandbox_id])
        only_b = Sandbox.list(query=SandboxQuery(metadata={"suite": tag, "which": "b"})).next_items()
        assert [s.sandbox_id for s in only_b] == [b.sandbox_id]
        assert only_b[0].metadata == {"suite": tag, "which": "b"}
        # Pages of one: two pages, then none.
        pages = Sandbox.list(query=SandboxQuery(metadata={"suite": tag}), limit=1)
        seen = pages.next_items()
        assert pages.has_next
        seen += pages.next_items()
        assert sorted(s.sandbox_id for s in seen) == sorted([a.sandbox_id, b.sandbox_id])
    finally:
        a.kill()
        b.kill()


def test_another_key_sees_nothing_of_this_keys_sandboxes(served, tag):
    sb = Sandbox.create(metadata={"suite": tag})
    try:
        theirs = Sandbox.list(query=SandboxQuery(metadata={"suite": tag}), api_key=OTHER_KEY).next_items()
        assert theirs == []
        with pytest.raises(NotFoundException):
            Sandbox.connect(sb.sandbox_id, api_key=OTHER_KEY)
        assert Sandbox.kill(sb.sandbox_id, api_key=OTHER_KEY) is False
        assert sb.is_running()
    finally:
        sb.kill()


def test_a_key_moat_does_not_know_is_refused(served):
    with pytest.raises(AuthenticationException):
        Sandbox.create(api_key="e2b_" + "0" * 40)


def test_an_unknown_template_is_a_clear_error(served):
    with pytest.raises(SandboxException, match="not one moat knows"):
        Sandbox.create(template="no-such-template")


def test_a_sandbox_ends_when_its_timeout_passes(served):
    sb = Sandbox.create(timeout=3)
    assert sb.is_running()
    # Longer, then shorter again: the last word counts.
    sb.set_timeout(60)
    sb.set_timeout(2)
    deadline = time.time() + 15
    while sb.is_running() and time.time() < deadline:
        time.sleep(0.25)
    assert not sb.is_running()
    assert Sandbox.kill(sb.sandbox_id) is False


def test_create_time_env_vars_reach_every_command(served):
    sb = Sandbox.create(envs={"FROM_CREATE": "yes", "BOTH": "create"})
    try:
        r = sb.commands.run('echo "$FROM_CREATE $BOTH"', envs={"BOTH": "command"})
        assert r.stdout == "yes command\n"
    finally:
        sb.kill()


@pytest.mark.anyio
async def test_the_async_client_too(served, tag):
    sb = await AsyncSandbox.create(metadata={"suite": tag})
    try:
        assert await sb.is_running()
        r = await sb.commands.run("echo async")
        assert r.stdout == "async\n"
        listed = await AsyncSandbox.list(query=SandboxQuery(metadata={"suite": tag})).next_items()
        assert [s.sandbox_id for s in listed] == [sb.sandbox_id]
    finally:
        assert await sb.kill() is True
    assert not await sb.is_running()


def test_sandboxes_and_their_processes_show_as_sessions(served):
    import json

    sb = Sandbox.create()
    run = served.cli
    try:
        h = sb.commands.run("sleep 600", background=True)
        session = f"e2b-{sb.sandbox_id}"
        assert session in run("sessions", "list")
        listed = json.loads(run("process", "list", "--session", session, "--json"))
        assert [p["command"] for p in listed["details"]["sessions"]] == ["sleep 600"], listed
        sb.commands.kill(h.pid)
    finally:
        sb.kill()
    assert f"e2b-{sb.sandbox_id}" not in run("sessions", "list")


def test_the_readme_example_runs(served):
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Use E2B's SDK with moat", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"python3 -c '(.*?)'\n", section, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello from moat\n\n"
