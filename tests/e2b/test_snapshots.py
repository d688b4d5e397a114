"""Snapshots and forks through E2B's SDK (docs/e2b.md, "Snapshots and forks"): a snapshot
keeps the sandbox's files (its home; its tmpfs mounts are memory); sandboxes made from it, and forks, are
apart from it and from each other; snapshots belong to the key that took them; and nothing is
left once they are deleted."""

import concurrent.futures
import subprocess
import threading
import time

import httpx
import pytest
from e2b import Sandbox
from e2b.exceptions import InvalidArgumentException, NotFoundException, SandboxException

from conftest import KEY, OTHER_KEY


def images(repo: str = "moat-e2b-snapshot") -> list[str]:
    out = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", repo],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def image_of(sandbox_id: str) -> str:
    """The image of the sandbox's container, as the engine names it."""
    out = subprocess.run(
        ["docker", "ps", "--filter", f"label=dev.moat.session=e2b-{sandbox_id}", "--format", "{{.Image}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(out) == 1, out
    return out[0]


def snapshot_files(served) -> list[str]:
    d = served.home / "e2b-snapshots"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_a_snapshot_keeps_the_home_and_the_root_filesystem_and_new_sandboxes_are_apart(served, tag):
    sb = Sandbox.create()
    try:
        sb.files.make_dir("/home/user/app")
        sb.files.write("/home/user/app/config.json", '{"env": "test"}')
        # Memory is not in a snapshot: nor is /tmp, a tmpfs (docs/e2b.md, "Snapshots and forks").
        sb.commands.run("echo in-memory > /tmp/outside")
        snap = sb.create_snapshot(name=f"snap-{tag}")
        assert snap.snapshot_id and any(f"snap-{tag}" in n for n in snap.names)
        # The source runs on, unchanged, after it was frozen for the copy.
        assert sb.is_running()
        sb.files.write("/home/user/app/config.json", "changed after the snapshot")
        a = Sandbox.create(snap.snapshot_id)
        b = Sandbox.create(snap.snapshot_id)
        try:
            for s in (a, b):
                assert s.files.read("/home/user/app/config.json") == '{"env": "test"}'
                assert s.commands.run("test -e /tmp/outside || echo none").stdout == "none\n"
                assert s.commands.run("whoami").stdout == "user\n"
            a.files.write("/home/user/app/config.json", "written in a")
            assert b.files.read("/home/user/app/config.json") == '{"env": "test"}'
            assert sb.files.read("/home/user/app/config.json") == "changed after the snapshot"
        finally:
            a.kill()
            b.kill()
        assert Sandbox.delete_snapshot(snap.snapshot_id) is True
        assert Sandbox.delete_snapshot(snap.snapshot_id) is False
        # Deleted: no image, no copy, and no sandbox can be made from it.
        assert f"moat-e2b-snapshot:{snap.snapshot_id.removeprefix('snapshot-')}" not in images()
        assert f"{snap.snapshot_id}.ext4" not in snapshot_files(served)
        with pytest.raises(SandboxException):
            Sandbox.create(snap.snapshot_id)
    finally:
        sb.kill()


def test_snapshots_are_listed_by_sandbox_and_name_and_belong_to_their_key(served, tag):
    sb = Sandbox.create()
    try:
        named = sb.create_snapshot(name=f"named-{tag}")
        plain = Sandbox.create_snapshot(sb.sandbox_id)
        try:
            mine = {s.snapshot_id for s in Sandbox.list_snapshots(sandbox_id=sb.sandbox_id).next_items()}
            assert mine == {named.snapshot_id, plain.snapshot_id}
            by_name = Sandbox.list_snapshots(name=f"named-{tag}").next_items()
            assert [s.snapshot_id for s in by_name] == [named.snapshot_id]
            assert Sandbox.list_snapshots(name=f"named-{tag}-none").next_items() == []
            # Another key sees none of them, cannot make a sandbox from one, nor delete one.
            theirs = Sandbox.list_snapshots(api_key=OTHER_KEY).next_items()
            assert named.snapshot_id not in {s.snapshot_id for s in theirs}
            with pytest.raises(SandboxException):
                Sandbox.create(named.snapshot_id, api_key=OTHER_KEY)
            assert Sandbox.delete_snapshot(named.snapshot_id, api_key=OTHER_KEY) is False
            # Nor snapshot this key's sandbox.
            with pytest.raises(NotFoundException):
                Sandbox.create_snapshot(sb.sandbox_id, api_key=OTHER_KEY)
            # An operator's template is not the caller's to delete.
            assert Sandbox.delete_snapshot("base") is False
        finally:
            Sandbox.delete_snapshot(named.snapshot_id)
            Sandbox.delete_snapshot(plain.snapshot_id)
    finally:
        sb.kill()


def test_a_snapshot_name_is_bounded(served):
    sb = Sandbox.create()
    try:
        for bad in ["x" * 129, "a\nb"]:
            r = httpx.post(
                f"{served.url}/sandboxes/{sb.sandbox_id}/snapshots",
                headers={"X-API-KEY": KEY},
                json={"name": bad},
                timeout=30,
            )
            assert r.status_code == 400, r.text
            assert "snapshot name" in r.json()["message"]
    finally:
        sb.kill()


def test_forks_start_from_the_sandbox_and_go_their_own_way(served):
    sb = Sandbox.create()
    try:
        sb.files.write("/home/user/state.txt", "state before fork")
        sb.commands.run("mkdir -p ~/.cache && echo 1 > ~/.cache/counter")
        forks = sb.fork(count=2, timeout=60)
        assert len(forks) == 2 and all(isinstance(f, Sandbox) for f in forks)
        try:
            ids = {f.sandbox_id for f in forks}
            assert len(ids) == 2 and sb.sandbox_id not in ids
            assert sb.is_running()
            for f in forks:
                assert f.is_running()
                assert f.files.read("/home/user/state.txt") == "state before fork"
                assert f.commands.run("cat ~/.cache/counter").stdout == "1\n"
            forks[0].files.write("/home/user/state.txt", "modified in a fork")
            assert forks[1].files.read("/home/user/state.txt") == "state before fork"
            assert sb.files.read("/home/user/state.txt") == "state before fork"
            # A fork keeps no snapshot of its own: none is listed, and its copy is gone.
            assert Sandbox.list_snapshots(sandbox_id=sb.sandbox_id).next_items() == []
            copy = f"snapshot-{image_of(forks[0].sandbox_id).split(':')[1]}.ext4"
            assert copy not in snapshot_files(served)
            used = {image_of(f.sandbox_id) for f in forks}
            assert len(used) == 1 and used.pop().startswith("moat-e2b-snapshot:")
            fork_image = image_of(forks[0].sandbox_id)
        finally:
            for f in forks:
                f.kill()
        # Its image went with the last fork that used it.
        assert fork_image not in images()
    finally:
        sb.kill()


def test_fork_is_bounded_and_a_killed_sandbox_has_none(served):
    with pytest.raises(InvalidArgumentException):
        Sandbox.fork("anything", count=0)
    sb = Sandbox.create()
    r = httpx.post(
        f"{served.url}/sandboxes/{sb.sandbox_id}/fork",
        headers={"X-API-KEY": KEY},
        json={"count": 17, "timeout": 30},
        timeout=30,
    )
    assert r.status_code == 400 and "count" in r.json()["message"]
    sb.kill()
    with pytest.raises(NotFoundException):
        sb.fork()


def test_a_paused_sandbox_can_be_snapshotted_and_stays_paused(served):
    sb = Sandbox.create()
    try:
        sb.files.write("/home/user/p.txt", "paused state")
        sb.pause()
        snap = Sandbox.create_snapshot(sb.sandbox_id)
        assert not sb.is_running()
        c = Sandbox.create(snap.snapshot_id)
        try:
            assert c.files.read("/home/user/p.txt") == "paused state"
        finally:
            c.kill()
            Sandbox.delete_snapshot(snap.snapshot_id)
    finally:
        sb.kill()


def test_a_snapshot_cut_off_by_its_client_is_finished_and_recorded_and_the_sandbox_thawed(served):
    """The attack: hang up mid-snapshot, hoping to leave a copy and an image that nothing
    records (and a frozen sandbox). The snapshot runs to its end on its own: it is listed,
    deletable, and the sandbox runs."""
    sb = Sandbox.create()
    try:
        # A home that takes a moment to copy.
        sb.commands.run("head -c 600000000 /dev/urandom > ~/big", timeout=120)
        with pytest.raises(httpx.TimeoutException):
            httpx.post(
                f"{served.url}/sandboxes/{sb.sandbox_id}/snapshots",
                headers={"X-API-KEY": KEY},
                json={},
                timeout=0.3,
            )
        listed = []
        for _ in range(120):
            listed = Sandbox.list_snapshots(sandbox_id=sb.sandbox_id).next_items()
            if listed:
                break
            time.sleep(0.5)
        assert len(listed) == 1, "the cut-off snapshot was not recorded"
        assert sb.commands.run("echo thawed", timeout=30).stdout == "thawed\n"
        assert Sandbox.delete_snapshot(listed[0].snapshot_id) is True
        assert snapshot_files(served) == []
    finally:
        sb.kill()


def test_requests_at_once_cannot_pass_the_snapshot_bound(served):
    sb = Sandbox.create()
    try:
        def one(_):
            return httpx.post(
                f"{served.url}/sandboxes/{sb.sandbox_id}/snapshots",
                headers={"X-API-KEY": KEY},
                json={},
                timeout=300,
            ).status_code

        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            codes = list(pool.map(one, range(20)))
        assert codes.count(201) == 16 and codes.count(429) == 4, codes
        mine = Sandbox.list_snapshots(sandbox_id=sb.sandbox_id, limit=100).next_items()
        assert len(mine) == 16
        for s in mine:
            Sandbox.delete_snapshot(s.snapshot_id)
    finally:
        sb.kill()


def test_moat_writes_nothing_into_the_home_while_a_snapshot_copies_it(served):
    """The attack: uploads and directory makes while the sandbox is frozen for a copy would
    change the disk under the copy. They wait for it instead: none finishes while the
    container is paused."""
    sb = Sandbox.create()
    try:
        sb.commands.run("head -c 400000000 /dev/urandom > ~/big", timeout=120)
        container = subprocess.run(
            ["docker", "ps", "-q", "--filter", f"label=dev.moat.session=e2b-{sb.sandbox_id}"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        stop = threading.Event()
        paused_at, finished_at = [], []

        def watch_paused():
            while not stop.is_set():
                out = subprocess.run(
                    ["docker", "inspect", "-f", "{{.State.Paused}}", container],
                    capture_output=True, text=True,
                ).stdout.strip()
                if out == "true":
                    paused_at.append(time.monotonic())

        def write():
            i = 0
            while not stop.is_set():
                sb.files.write(f"w/{i}.txt", "x")
                finished_at.append(time.monotonic())
                i += 1

        threads = [threading.Thread(target=watch_paused), threading.Thread(target=write)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        snap = sb.create_snapshot()
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join()
        assert paused_at, "the snapshot never froze the container"
        first, last = min(paused_at), max(paused_at)
        during = [t for t in finished_at if first < t < last]
        assert during == [], f"{len(during)} writes finished while the container was frozen"
        assert finished_at and max(finished_at) > last, "the writes never went on"
        Sandbox.delete_snapshot(snap.snapshot_id)
    finally:
        sb.kill()
