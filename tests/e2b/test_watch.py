"""Watching directories through E2B's SDK (docs/e2b.md, "Watching"): the events E2B's daemon
yields for the SDK's own writes, names relative to the watched directory, recursion into
directories made later, the async stream, and the bounds and confinement of watches."""

import asyncio
import os
import socket
import struct
import time
import uuid

import pytest
from e2b import AsyncSandbox, FileNotFoundException, FilesystemEventType, FileType, Sandbox
from e2b.exceptions import SandboxException

HOME = "/home/user"


@pytest.fixture(scope="module")
def sb(served):
    s = Sandbox.create()
    yield s
    s.kill()


@pytest.fixture
def d(sb):
    name = f"w-{uuid.uuid4().hex[:8]}"
    sb.files.make_dir(name)
    return name


def test_a_new_file_yields_create_chmod_write_and_a_rewrite_yields_writes(sb, d):
    handle = sb.files.watch_dir(d)
    sb.files.write(f"{d}/f.txt", "first")
    events = handle.get_new_events()
    assert [(e.type, e.name) for e in events] == [
        (FilesystemEventType.CREATE, "f.txt"),
        (FilesystemEventType.CHMOD, "f.txt"),
        (FilesystemEventType.WRITE, "f.txt"),
    ], events
    sb.files.write(f"{d}/f.txt", "second")
    again = handle.get_new_events()
    assert any(e.type == FilesystemEventType.WRITE and e.name == "f.txt" for e in again), again
    assert all(e.name == "f.txt" for e in again), "no temporary name is ever seen"
    # Polled again: nothing new.
    assert handle.get_new_events() == []
    handle.stop()
    with pytest.raises(SandboxException):
        handle.get_new_events()


def test_events_carry_the_entry_when_asked(sb, d):
    sb.files.write(f"{d}/e.txt", "x")
    handle = sb.files.watch_dir(d, include_entry=True)
    sb.files.write(f"{d}/e.txt", "changed")
    write = next(e for e in handle.get_new_events() if e.type == FilesystemEventType.WRITE)
    assert write.entry is not None
    assert write.entry.path == f"{HOME}/{d}/e.txt" and write.entry.type == FileType.FILE
    handle.stop()


def test_a_recursive_watch_names_nested_paths_and_follows_new_directories(sb, d):
    sb.files.make_dir(f"{d}/old")
    handle = sb.files.watch_dir(d, recursive=True)
    sb.files.write(f"{d}/old/a.txt", "a")
    sb.files.make_dir(f"{d}/new")
    sb.files.write(f"{d}/new/b.txt", "b")
    sb.commands.run(f"mv ~/{d}/old/a.txt ~/{d}/moved.txt && rm ~/{d}/new/b.txt")
    seen = {(e.type, e.name) for e in handle.get_new_events()}
    for want in [
        (FilesystemEventType.CREATE, "old/a.txt"),
        (FilesystemEventType.WRITE, "old/a.txt"),
        (FilesystemEventType.CREATE, "new"),
        (FilesystemEventType.WRITE, "new/b.txt"),
        (FilesystemEventType.RENAME, "old/a.txt"),
        (FilesystemEventType.CREATE, "moved.txt"),
        (FilesystemEventType.REMOVE, "new/b.txt"),
    ]:
        assert want in seen, (want, seen)
    handle.stop()


def test_a_flat_watch_sees_only_its_own_entries(sb, d):
    sb.files.make_dir(f"{d}/sub")
    handle = sb.files.watch_dir(d)
    sb.files.write(f"{d}/sub/deep.txt", "x")
    sb.files.write(f"{d}/top.txt", "x")
    assert {e.name for e in handle.get_new_events()} == {"top.txt"}
    handle.stop()


def test_what_cannot_be_watched_is_refused(sb, d):
    with pytest.raises(FileNotFoundException):
        sb.files.watch_dir(f"{d}/missing")
    sb.files.write(f"{d}/file.txt", "x")
    with pytest.raises(SandboxException):
        sb.files.watch_dir(f"{d}/file.txt")
    # A link out of the home is no directory of the sandbox's to watch.
    sb.commands.run(f"ln -s /etc ~/{d}/etc-link")
    with pytest.raises(SandboxException):
        sb.files.watch_dir(f"{d}/etc-link")
    with pytest.raises(SandboxException):
        sb.files.watch_dir("/etc")


def test_watches_are_bounded_per_sandbox(served):
    s = Sandbox.create()
    try:
        handles = [s.files.watch_dir(".") for _ in range(8)]
        with pytest.raises(SandboxException) as e:
            s.files.watch_dir(".")
        assert "8 watches" in str(e.value)
        handles.pop().stop()
        handles.append(s.files.watch_dir("."))
        for h in handles:
            h.stop()
    finally:
        s.kill()


@pytest.mark.anyio
async def test_the_async_stream_delivers_events_and_ends_with_the_sandbox(served):
    s = await AsyncSandbox.create()
    try:
        await s.files.make_dir("aw")
        got = []
        done = asyncio.Event()

        def on_event(e):
            got.append((e.type, e.name))
            if e.name == "x.txt" and e.type == FilesystemEventType.WRITE:
                done.set()

        handle = await s.files.watch_dir("aw", on_event, recursive=True)
        t0 = time.monotonic()
        await s.files.write("aw/x.txt", "hello")
        await asyncio.wait_for(done.wait(), 10)
        latency = time.monotonic() - t0
        assert (FilesystemEventType.CREATE, "x.txt") in got
        print(f"watch event latency (write to callback): {latency * 1000:.1f} ms")
        await handle.stop()
    finally:
        await s.kill()


def inotify_fds(pid: int) -> int:
    fd_dir = f"/proc/{pid}/fd"
    n = 0
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(f"{fd_dir}/{fd}") == "anon_inode:inotify":
                n += 1
        except OSError:
            pass
    return n


def test_a_stream_whose_reader_stalls_ends_with_its_sandbox(served):
    """The attack: open watch streams, never read them, flood events until moat's sends
    wait, then kill the sandbox, hoping the watches (and their places in the moat's count)
    outlive it. They end with the sandbox."""
    before = inotify_fds(served.proc.pid)
    s = Sandbox.create()
    s.files.make_dir("w")
    host, port = served.url.removeprefix("http://").split(":")
    body = b'{"path":"w"}'
    envelope = b"\x00" + struct.pack(">I", len(body)) + body
    socks = []
    for _ in range(4):
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        c.connect((host, int(port)))
        c.sendall(
            b"POST /filesystem.Filesystem/WatchDir HTTP/1.1\r\n"
            + f"Host: {host}\r\nContent-Type: application/connect+json\r\n".encode()
            + b"Connect-Protocol-Version: 1\r\n"
            + f"E2b-Sandbox-Id: {s.sandbox_id}\r\nX-Access-Token: {s._envd_access_token}\r\n".encode()
            + f"Content-Length: {len(envelope)}\r\n\r\n".encode()
            + envelope
        )
        socks.append(c)
    try:
        deadline = time.time() + 10
        while inotify_fds(served.proc.pid) < before + 4 and time.time() < deadline:
            time.sleep(0.1)
        assert inotify_fds(served.proc.pid) >= before + 4
        s.commands.run("cd ~/w && for i in $(seq 1 20000); do : > f$i; done", timeout=120)
        s.kill()
        deadline = time.time() + 10
        while inotify_fds(served.proc.pid) > before and time.time() < deadline:
            time.sleep(0.1)
        assert inotify_fds(served.proc.pid) == before, "watches outlived their sandbox"
    finally:
        for c in socks:
            c.close()
