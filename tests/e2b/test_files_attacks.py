"""Attacks on E2B's files from inside the sandbox and from other callers, each shown to fail
(docs/e2b.md, "Files"; docs/security.md, "E2B's API"): the sandbox owns its home and may plant
links out of it, FIFOs and odd names there; moat serves files on the host, so none of them
may lead it to another path of the host or make it wait."""

import http.client
import json
import time
import uuid

import pytest
from e2b import FileType, Sandbox
from e2b.exceptions import FileNotFoundException, SandboxException

WS = "/workspace"


@pytest.fixture(scope="module")
def sb(served):
    s = Sandbox.create()
    yield s
    s.kill()


@pytest.fixture
def d(sb) -> str:
    name = f"a-{uuid.uuid4().hex[:10]}"
    sb.files.make_dir(name)
    return name


def refused(fn, words):
    with pytest.raises(SandboxException) as e:
        fn()
    assert words in str(e.value), str(e.value)


def test_links_out_of_the_home_are_never_followed(sb, d):
    # Links to the root and to files of the host's (and the container's) system: moat runs on
    # the host, so following one would read or write the host's own files.
    sb.commands.run(f"ln -s / {WS}/{d}/root && ln -s /etc/hostname {WS}/{d}/hn && ln -s ../../.. {WS}/{d}/up")
    for path in (f"{d}/hn", f"{d}/root/etc/hostname", f"{d}/up/etc/hostname"):
        refused(lambda: sb.files.read(path), "leads out of the user's home")
    refused(lambda: sb.files.write(f"{d}/root/tmp/planted", "x"), "leads out of the user's home")
    refused(lambda: sb.files.write_files([{"path": f"{d}/up/tmp/planted", "data": "x"}]), "leads out")
    refused(lambda: sb.files.list(f"{d}/root"), "leads out of the user's home")
    refused(lambda: sb.files.make_dir(f"{d}/root/tmp/made"), "leads out")
    refused(lambda: sb.files.rename(f"{d}/root/etc/hostname", f"{d}/stolen"), "leads out")
    # The link itself is shown as a link, with its text, and never followed.
    info = sb.files.get_info(f"{d}/hn")
    assert (info.type, info.symlink_target) == (FileType.SYMLINK, "/etc/hostname")
    listed = {e.name: e for e in sb.files.list(d, depth=3)}
    assert set(listed) == {"root", "hn", "up"}, "nothing below a link out is listed"
    # Removing a link removes the link, not what it names; writing over one is refused.
    sb.files.remove(f"{d}/root")
    assert not sb.files.exists(f"{d}/root")
    refused(lambda: sb.files.write(f"{d}/hn", "over the link"), "symbolic link")
    assert sb.commands.run("cat /etc/hostname").exit_code == 0


def test_a_link_swapped_in_on_the_way_is_refused_by_the_kernel(sb, d):
    # A directory on the way replaced by a link out, again and again, while moat reads and
    # writes beneath it: every call either works inside or is refused, none leaves the home.
    swapper = sb.commands.run(
        f"cd {WS}/{d} && mkdir -p real && echo inside > real/inner.txt && "
        "for i in $(seq 4000); do ln -sfn real sw.tmp && mv -T sw.tmp sw; ln -sfn / sw.tmp && mv -T sw.tmp sw; done",
        background=True,
    )
    seen = {"inside": 0, "refused": 0}
    try:
        for _ in range(60):
            try:
                assert sb.files.read(f"{d}/sw/inner.txt") == "inside\n"
                seen["inside"] += 1
            except SandboxException as e:
                assert "leads out" in str(e) or isinstance(e, FileNotFoundException), str(e)
                seen["refused"] += 1
            try:
                sb.files.read(f"{d}/sw/etc/hostname")
                pytest.fail("read a file through a link out of the home")
            except SandboxException:
                pass
    finally:
        swapper.kill()
    assert sum(seen.values()) == 60


def test_fifos_and_special_files_are_refused_at_once(sb, d):
    sb.commands.run(f"mkfifo {WS}/{d}/fifo")
    start = time.monotonic()
    refused(lambda: sb.files.read(f"{d}/fifo"), "not a regular file")
    refused(lambda: sb.files.write(f"{d}/fifo", "x"), "not a regular file")
    assert time.monotonic() - start < 5, "a FIFO made moat wait"
    info = sb.files.get_info(f"{d}/fifo")
    assert info.permissions.startswith("p") and info.type is None
    # The SDK leaves out what is neither file, directory nor link.
    assert [e.name for e in sb.files.list(d)] == []
    sb.files.remove(f"{d}/fifo")


def test_paths_out_of_the_home_are_refused_naming_the_rule(sb):
    for path in ("../../etc/passwd", "/etc/passwd", "/home/user/../../etc/passwd", "/tmp/x", "~/../x"):
        refused(lambda: sb.files.read(path), "outside the user's home (/home/user)")
        refused(lambda: sb.files.write(path, "x"), "outside the user's home")
    refused(lambda: sb.files.exists("/etc"), "outside the user's home")
    refused(lambda: sb.files.remove("/tmp"), "outside the user's home")
    refused(lambda: sb.files.list("/"), "outside the user's home")


def test_hostile_names_stay_names(sb, d):
    for name in ("a b", "-rf", "ünï", "x\\y", "quote\"d", "new\nline"):
        sb.files.write(f"{d}/{name}", name)
        assert sb.files.read(f"{d}/{name}") == name
    names = sorted(e.name for e in sb.files.list(d))
    assert names == sorted(["a b", "-rf", "ünï", "x\\y", "quote\"d", "new\nline"])


def raw(served, method, path, sandbox_id, token, body=None, ctype="application/json"):
    c = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    headers = {"E2b-Sandbox-Id": sandbox_id, "Content-Type": ctype}
    if token is not None:
        headers["X-Access-Token"] = token
    c.request(method, path, body, headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def test_another_sandboxs_token_reaches_nothing(served, sb):
    other = Sandbox.create()
    try:
        sb.files.write("mine.txt", "mine")
        stat = json.dumps({"path": "mine.txt"})
        for token in (other._envd_access_token, None, "0" * 40):
            status, _ = raw(served, "POST", "/filesystem.Filesystem/Stat", sb.sandbox_id, token, stat)
            assert status == 401
            status, _ = raw(served, "GET", "/files?path=mine.txt", sb.sandbox_id, token)
            assert status == 401
            status, _ = raw(served, "POST", "/files?path=mine.txt", sb.sandbox_id, token, b"x", "application/octet-stream")
            assert status == 401
        assert sb.files.read("mine.txt") == "mine"
        # Its own token reaches its own home only.
        assert not other.files.exists("mine.txt")
        # A signed URL of the other sandbox opens the other sandbox's file, never this one's.
        url = other.download_url("mine.txt")
        status, _ = raw(served, "GET", url[url.index("/files"):], sb.sandbox_id, None)
        assert status == 404
        status, _ = raw(served, "GET", "/files?path=mine.txt", "nosuchsandbox", sb._envd_access_token)
        assert status == 502
    finally:
        other.kill()


def test_bad_bodies_are_refused(served, sb):
    t = sb._envd_access_token
    status, data = raw(served, "POST", "/files?path=x.txt", sb.sandbox_id, t, b"not gzip", "application/octet-stream")
    assert status == 200
    c = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    c.request(
        "POST",
        "/files?path=x.gz",
        b"\x1f\x8b\x08\x00 broken gzip",
        {"E2b-Sandbox-Id": sb.sandbox_id, "X-Access-Token": t, "Content-Type": "application/octet-stream", "Content-Encoding": "gzip"},
    )
    r = c.getresponse()
    assert r.status == 400, r.read()
    status, data = raw(served, "POST", "/files", sb.sandbox_id, t, b"x", "application/octet-stream")
    assert status == 400 and b"?path=" in data
    status, data = raw(
        served, "POST", "/files", sb.sandbox_id, t, b"--b\r\nbroken", "multipart/form-data; boundary=b"
    )
    assert status == 400
    # A part whose headers never end is cut off at the parser's bound, not held.
    endless = b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\nX-Pad: " + b"a" * (3 << 20)
    status, data = raw(served, "POST", "/files", sb.sandbox_id, t, endless, "multipart/form-data; boundary=b")
    assert status == 400 and b"not file content" in data, data
    status, data = raw(served, "POST", "/filesystem.Filesystem/Stat", sb.sandbox_id, t, b"{not json")
    assert status == 400
    status, data = raw(served, "GET", "/files?path=x.txt&username=nobody", sb.sandbox_id, t)
    assert status == 401 and b"invalid username: 'nobody'" in data
