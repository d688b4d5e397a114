"""Attacks on E2B's files from inside the sandbox and from other callers, each shown to fail
(docs/e2b.md, "Files"; docs/security.md, "E2B's API"): the sandbox owns its home and may plant
links out of it, FIFOs and odd names there; moat serves files on the host, so none of them
may lead it to another path of the host or make it wait."""

import http.client
import json
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

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


# --- Bounds a client or the sandbox sets no matter what it sends or plants -------------------


def status_kib(pid: int, field: str) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


def reset_peak(pid: int):
    """Sets moat's VmHWM back to its VmRSS (Linux's clear_refs 5), so the next peak is this
    test's own."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def raw_upload(served, sb, head_extra=b"", content_length=None):
    """A socket that has sent the head of a multipart upload (chunked unless a length is
    given)."""
    s = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    length = (
        f"Content-Length: {content_length}\r\n" if content_length else "Transfer-Encoding: chunked\r\n"
    )
    s.sendall(
        (
            f"POST /files?path=x HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: {sb.sandbox_id}\r\n"
            f"X-Access-Token: {sb._envd_access_token}\r\n"
            f"Content-Type: multipart/form-data; boundary=B\r\n{length}\r\n"
        ).encode()
        + head_extra
    )
    return s


def chunk(b: bytes) -> bytes:
    return b"%x\r\n" % len(b) + b + b"\r\n"


def answer_of(s) -> bytes:
    s.settimeout(15)
    data = b""
    try:
        while True:
            got = s.recv(65536)
            if not got:
                break
            data += got
            if b"\r\n\r\n" in data and data.rstrip().endswith(b"}"):
                break
    except OSError:
        pass
    return data


TINY = b"\r\n--B\r\na:b\r\n\r\n"


def test_parts_of_any_name_count_against_the_part_bound(served, sb):
    # Parts not named `file` were skipped uncounted, each raising what the parser might hold.
    s = raw_upload(served, sb)
    s.sendall(chunk(b"--B\r\na:b\r\n\r\n"))
    for _ in range(11):
        s.sendall(chunk(TINY * 1000))
    s.sendall(chunk(b"\r\n--B--\r\n") + b"0\r\n\r\n")
    data = answer_of(s)
    s.close()
    assert b" 400 " in data.split(b"\r\n")[0] and b"more than 10000 parts" in data, data[:300]


def test_tiny_parts_earn_no_room_for_headers_that_never_end(served, sb):
    pid = served.proc.pid
    # The answer: 5,000 tiny parts, then headers that never end, cut off at the constant bound.
    s = raw_upload(served, sb)
    s.sendall(chunk(b"--B\r\na:b\r\n\r\n") + chunk(TINY * 5000) + chunk(b"\r\n--B\r\n"))
    for _ in range(3):
        s.sendall(chunk(b"a" * (1 << 20)))
    s.sendall(b"0\r\n\r\n")
    data = answer_of(s)
    s.close()
    assert b" 400 " in data.split(b"\r\n")[0] and b"not file content" in data, data[:300]
    # The memory: the same with 64 MiB of headers, as fast as moat reads them.
    before = status_kib(pid, "VmRSS")
    reset_peak(pid)
    s = raw_upload(served, sb)
    sent = 0
    try:
        s.sendall(chunk(b"--B\r\na:b\r\n\r\n") + chunk(TINY * 5000) + chunk(b"\r\n--B\r\n"))
        for _ in range(64):
            s.sendall(chunk(b"a" * (1 << 20)))
            sent += 1
    except OSError:
        pass  # moat stopped reading and closed: what the bound is for
    s.close()
    grown = status_kib(pid, "VmHWM") - before
    print(f"moat's peak grew {grown} KiB while {sent} MiB of endless headers were sent")
    assert sent < 64, "moat read 64 MiB of headers that never end"
    assert grown < 16 << 10, f"moat's peak grew {grown} KiB"


def test_a_listing_is_bounded_in_bytes_and_builds_no_path_past_path_max(served, sb, d):
    # 20 levels of 250-byte names: past PATH_MAX at the 17th, each level a path no call could
    # name. Made from inside, one level at a time, as the sandbox may.
    script = (
        "import os\n"
        f"os.chdir('{WS}/{d}'); os.mkdir('deep'); os.mkdir('wide')\n"
        "for top, levels in (('deep', 20), ('wide', 15)):\n"
        f"    os.chdir('{WS}/{d}/' + top)\n"
        "    for i in range(levels):\n"
        "        n = '%02d' % i + 'd' * 248\n"
        "        os.mkdir(n); os.chdir(n)\n"
        "for j in range(9000): open('%04d' % j + 'f' * 246, 'w').close()\n"
    )
    r = sb.commands.run(f"python3 -c \"{script}\"", timeout=120)
    assert r.exit_code == 0, r.stderr
    refused(lambda: sb.files.list(f"{d}/deep", depth=30), "longer than 4096 bytes")
    assert len(sb.files.list(f"{d}/deep", depth=16)) == 16
    # 9,000 files whose paths are near PATH_MAX: the answer would be 37 MB.
    pid = served.proc.pid
    before = status_kib(pid, "VmRSS")
    reset_peak(pid)
    t = time.monotonic()
    refused(lambda: sb.files.list(f"{d}/wide", depth=16), "more than 33554432 bytes")
    took = time.monotonic() - t
    grown = status_kib(pid, "VmHWM") - before
    print(f"ListDir of 37 MB refused in {took:.1f} s; moat's peak grew {grown} KiB")
    assert grown < 192 << 10, f"moat's peak grew {grown} KiB"
    # Less deep, it answers.
    assert len(sb.files.list(f"{d}/wide", depth=15)) == 15


def test_names_not_utf8_are_never_shown_for_another_file(sb, d):
    # `a\xff` and `a\xef\xbf\xbd` (which is `a` and U+FFFD) once both listed as `a\ufffd`, and
    # reading the first read the second.
    sb.commands.run(
        f"cd {WS}/{d} && printf REAL-A > \"$(printf 'a\\377')\" && printf OTHER-B > \"$(printf 'a\\357\\277\\275')\""
        f" && ln -s \"$(printf 'a\\377')\" link && mkdir \"$(printf 'd\\376')\" && touch \"$(printf 'd\\376')/inner\""
    )
    listed = {e.name: e for e in sb.files.list(d, depth=3)}
    assert set(listed) == {"a\ufffd", "link"}, sorted(listed)
    # Every path listed opens the file listed.
    assert sb.files.read(listed["a\ufffd"].path) == "OTHER-B"
    # A link to a name that is not UTF-8 is a link whose target is not shown.
    info = sb.files.get_info(f"{d}/link")
    assert info.symlink_target is None and info.type == FileType.SYMLINK, info


def loop_devices() -> str:
    """The host's loop devices and their image files (a sandbox's are named by its id)."""
    return subprocess.run(
        ["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"], capture_output=True, text=True, check=True
    ).stdout


def test_a_killed_sandboxs_transfers_end_with_it(served):
    own = Sandbox.create()
    sid, token = own.sandbox_id, own._envd_access_token
    own.commands.run("head -c 16M /dev/zero > ~/big")
    # With a disk of its own (moat as root: docs/security.md, "Disk bound") the disk must go
    # too; either way no descriptor of moat's may keep the file.
    has_image = sid in loop_devices()
    # An upload that stalls in its first part's headers, and a download nobody reads.
    up = raw_upload(served, own, b"--B\r\n", content_length=100000)
    down = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    down.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    down.sendall(
        f"GET /files?path=big HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: {sid}\r\nX-Access-Token: {token}\r\n\r\n".encode()
    )
    assert b" 200 " in down.recv(200)
    time.sleep(1)
    own.kill()
    start = time.monotonic()
    answer = answer_of(up)
    assert b" 502 " in answer.split(b"\r\n")[0] and b"not found" in answer, answer[:300]
    # And the connection closes: nothing more of its body is read.
    up.settimeout(10)
    try:
        assert up.recv(100) == b""
    except ConnectionResetError:
        pass
    up.close()
    got = 0
    down.settimeout(10)
    try:
        while True:
            b = down.recv(1 << 20)
            if not b:
                break
            got += len(b)
    except OSError:
        pass  # reset: what a killed sandbox's transfer ends with
    down.close()
    assert got < 16 << 20, "the whole file came after the kill"
    def held() -> list[str]:
        fds = Path(f"/proc/{served.proc.pid}/fd")
        found = []
        for fd in fds.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.endswith(("/big", "/big (deleted)")) or (has_image and sid in target):
                found.append(target)
        return found

    while (held() or (has_image and sid in loop_devices())) and time.monotonic() - start < 15:
        time.sleep(0.2)
    took = time.monotonic() - start
    print(f"the killed sandbox's files were let go {took:.1f} s after the kill (image: {has_image})")
    assert held() == [], "moat still holds a killed sandbox's file"
    if has_image:
        assert sid not in loop_devices(), "a killed sandbox's disk is still attached"
