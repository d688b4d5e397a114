"""Terminals through E2B's SDK: a size at the start, input, resize, kill, and a terminal
that outlives its stream and is connected to again."""

import time

import pytest
from e2b import AsyncSandbox, PtySize, Sandbox


@pytest.fixture(scope="module")
def sb(served):
    s = Sandbox.create()
    yield s
    s.kill()


def read_until(handle, want: bytes, within: float = 15.0) -> bytes:
    """Everything the terminal printed until `want` appeared (the stream stays open)."""
    got = b""
    deadline = time.time() + within
    for _stdout, _stderr, pty in handle:
        got += pty or b""
        if want in got or time.time() > deadline:
            break
    return got


def test_size_input_resize_and_exit(sb):
    h = sb.pty.create(PtySize(rows=24, cols=80))
    sb.pty.send_stdin(h.pid, b"stty size\n")
    assert b"24 80" in read_until(h, b"24 80")
    sb.pty.resize(h.pid, PtySize(rows=30, cols=100))
    sb.pty.send_stdin(h.pid, b"stty size; tput cols\n")
    assert b"30 100" in read_until(h, b"30 100")
    sb.pty.send_stdin(h.pid, b"exit 0\n")
    assert h.wait().exit_code == 0


def test_a_terminal_outlives_its_stream_and_is_killed(sb):
    h = sb.pty.create(PtySize(rows=24, cols=80))
    h.disconnect()
    again = sb.pty.connect(h.pid)
    sb.pty.send_stdin(h.pid, b"echo still-$((40+2))\n")
    assert b"still-42" in read_until(again, b"still-42")
    assert sb.pty.kill(h.pid) is True
    assert h.pid not in [p.pid for p in sb.commands.list()]


@pytest.mark.anyio
async def test_a_terminal_through_the_async_client(served):
    sb = await AsyncSandbox.create()
    try:
        seen = []
        h = await sb.pty.create(PtySize(rows=10, cols=40), on_data=seen.append)
        await sb.pty.send_stdin(h.pid, b"stty size; exit\n")
        await h.wait()
        assert b"10 40" in b"".join(seen)
    finally:
        await sb.kill()
