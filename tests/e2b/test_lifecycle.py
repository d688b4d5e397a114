"""Pause, resume and metrics through E2B's SDK (docs/e2b.md, "Pause and resume" and
"Metrics"): a paused sandbox's processes are frozen and its memory kept, its own API says it is
paused, its lifetime waits, and `connect` brings it back where it stood."""

import datetime
import time

import pytest
import httpx
from e2b import AsyncSandbox, Sandbox, SandboxQuery, SandboxState
from e2b.exceptions import NotFoundException, SandboxException

from conftest import KEY, OTHER_KEY


def test_pause_freezes_and_connect_resumes_where_it_stood(served, tag):
    sb = Sandbox.create(metadata={"suite": tag})
    try:
        # A counter that runs in the background: frozen, it does not move.
        sb.commands.run(
            "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done",
            background=True,
        )
        sb.commands.run("echo kept > /tmp/in-memory-only; sleep 0.5")
        assert sb.pause() is True
        assert not sb.is_running()
        # Paused: the sandbox's own API answers E2B's 502 for it, before waiting on anything.
        with pytest.raises(Exception):
            sb.commands.run("true", request_timeout=10)
        info = Sandbox.get_info(sb.sandbox_id)
        assert info.state == SandboxState.PAUSED
        paused = Sandbox.list(query=SandboxQuery(metadata={"suite": tag}, state=[SandboxState.PAUSED])).next_items()
        assert [s.sandbox_id for s in paused] == [sb.sandbox_id]
        running = Sandbox.list(query=SandboxQuery(metadata={"suite": tag}, state=[SandboxState.RUNNING])).next_items()
        assert running == []
        # A second pause is E2B's 409, which the SDK reads as "already paused".
        assert Sandbox.pause(sb.sandbox_id) is False

        before = sb.pause  # noqa: F841 (the object stays usable across the pause)
        resumed = Sandbox.connect(sb.sandbox_id)
        assert resumed.is_running() and sb.is_running()
        # The background counter was frozen, not killed: it goes on from where it stood.
        first = int(sb.commands.run("cat /tmp/count").stdout)
        time.sleep(0.6)
        second = int(sb.commands.run("cat /tmp/count").stdout)
        assert second > first
        assert sb.commands.run("cat /tmp/in-memory-only").stdout == "kept\n"
        assert Sandbox.get_info(sb.sandbox_id).state == SandboxState.RUNNING
    finally:
        sb.kill()


def test_a_paused_sandbox_outlives_its_lifetime_and_is_killed_when_asked(served):
    sb = Sandbox.create(timeout=2)
    try:
        sb.pause()
        time.sleep(3)
        # Its lifetime waits while it is paused, as E2B's does.
        assert Sandbox.get_info(sb.sandbox_id).state == SandboxState.PAUSED
        resumed = Sandbox.connect(sb.sandbox_id, timeout=60)
        assert resumed.commands.run("echo back").stdout == "back\n"
        sb.pause()
    finally:
        # A paused sandbox is killed like a running one: nothing is left.
        assert sb.kill() is True
    with pytest.raises(NotFoundException):
        Sandbox.get_info(sb.sandbox_id)


def test_pause_and_resume_belong_to_the_key_and_a_filesystem_only_pause_is_refused(served):
    sb = Sandbox.create()
    try:
        # Another key's pause finds no such sandbox.
        with pytest.raises(NotFoundException):
            Sandbox.pause(sb.sandbox_id, api_key=OTHER_KEY)
        assert sb.is_running()
        # E2B's filesystem-only pause needs a kernel of the sandbox's own: refused, saying why.
        r = httpx.post(
            f"{served.url}/sandboxes/{sb.sandbox_id}/pause",
            headers={"X-API-KEY": KEY},
            json={"memory": False},
            timeout=10,
        )
        assert r.status_code == 400
        assert "kernel" in r.json()["message"]
        assert sb.is_running()
        # The older SDKs' resume of a running sandbox: 409.
        r = httpx.post(
            f"{served.url}/sandboxes/{sb.sandbox_id}/resume",
            headers={"X-API-KEY": KEY},
            json={"timeout": 60},
            timeout=10,
        )
        assert r.status_code == 409
        sb.pause()
        r = httpx.post(
            f"{served.url}/sandboxes/{sb.sandbox_id}/resume",
            headers={"X-API-KEY": KEY},
            json={"timeout": 60},
            timeout=30,
        )
        assert r.status_code == 201, r.text
        assert r.json()["sandboxID"] == sb.sandbox_id
        assert sb.commands.run("echo up").stdout == "up\n"
    finally:
        sb.kill()


def test_metrics_report_the_sandboxs_use_within_the_range_asked(served):
    start = datetime.datetime.now(datetime.timezone.utc)
    sb = Sandbox.create()
    try:
        # Memory the sandbox holds shows in its figures.
        sb.commands.run(
            "python3 -c 'import time; b = bytearray(64 << 20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(30)'",
            background=True,
        )
        sb.commands.run("head -c 8000000 /dev/urandom > ~/eight-mb && sleep 1")
        metrics = sb.get_metrics()
        assert len(metrics) >= 1
        m = metrics[-1]
        assert m.cpu_count >= 1
        assert 0 <= m.cpu_used_pct <= 100
        assert m.mem_used >= 64 << 20, m
        assert m.mem_total >= m.mem_used
        assert m.disk_total > 0
        assert m.disk_used >= 8_000_000, m
        end = datetime.datetime.now(datetime.timezone.utc)
        within = sb.get_metrics(start=start, end=end)
        assert within and all(
            start.timestamp() - 1 <= x.timestamp.timestamp() <= end.timestamp() + 1 for x in within
        )
        # Before the sandbox existed: nothing.
        assert sb.get_metrics(
            start=start - datetime.timedelta(hours=1),
            end=start - datetime.timedelta(minutes=30),
        ) == []
        # Another key's sandbox has no metrics for this one.
        with pytest.raises(NotFoundException):
            Sandbox.get_metrics(sb.sandbox_id, api_key=OTHER_KEY)
    finally:
        sb.kill()


@pytest.mark.anyio
async def test_async_pause_and_connect(served):
    sb = await AsyncSandbox.create()
    try:
        await sb.commands.run("echo kept > /tmp/k")
        await sb.pause()
        assert not await sb.is_running()
        again = await AsyncSandbox.connect(sb.sandbox_id)
        assert (await again.commands.run("cat /tmp/k")).stdout == "kept\n"
        metrics = await sb.get_metrics()
        assert metrics and metrics[0].mem_total > 0
    finally:
        await sb.kill()
