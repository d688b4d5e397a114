"""Files through E2B's SDK: read and write (text, bytes, streams, many at once, gzip both
ways), exists, info, list with depth, make_dir, rename, remove and signed URLs, on the
sandbox's home, which is the session's workspace (docs/e2b.md, "Files")."""

import io
import json
import os
import urllib.error
import urllib.request
import uuid

import pytest
from e2b import AsyncSandbox, FileType, Sandbox
from e2b.envd.filesystem import filesystem_pb
from e2b.exceptions import FileNotFoundException, InvalidArgumentException, SandboxException
from e2b.sandbox.filesystem.filesystem import WriteEntry

HOME = "/home/user"
# The same directory as commands see it today; the home is mounted there too.
WS = "/workspace"


@pytest.fixture(scope="module")
def sb(served):
    s = Sandbox.create()
    yield s
    s.kill()


@pytest.fixture
def d(sb) -> str:
    """A directory of the home of this test's own."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    sb.files.make_dir(name)
    return name


def test_text_and_bytes_round_trip_and_land_in_the_workspace(sb, d):
    info = sb.files.write(f"{d}/a.txt", "héllo\n")
    assert (info.name, info.type, info.path) == ("a.txt", FileType.FILE, f"{HOME}/{d}/a.txt")
    # Relative, `~/` and absolute under the home are one file.
    for path in (f"{d}/a.txt", f"~/{d}/a.txt", f"{HOME}/{d}/a.txt", f"{HOME}/{d}/../{d}/a.txt"):
        assert sb.files.read(path) == "héllo\n"
    assert sb.commands.run(f"cat {WS}/{d}/a.txt").stdout == "héllo\n"
    raw = bytes(range(256)) * 3
    sb.files.write(f"{d}/b.bin", raw)
    got = sb.files.read(f"{d}/b.bin", format="bytes")
    assert isinstance(got, bytearray) and bytes(got) == raw
    # Overwritten in place of the old, parents made as needed.
    sb.files.write(f"{d}/a.txt", "second")
    sb.files.write(f"{d}/new/deeper/c.txt", "c")
    assert sb.files.read(f"{d}/a.txt") == "second"
    assert sb.files.read(f"{d}/new/deeper/c.txt") == "c"
    # Owned by the sandbox's user, 0644, as a file it wrote itself.
    who = sb.commands.run("id -un").stdout.strip()
    out = sb.commands.run(f"stat -c '%U %a' {WS}/{d}/a.txt {WS}/{d}/new/deeper").stdout.split("\n")
    assert out[:2] == [f"{who} 644", f"{who} 755"]
    with pytest.raises(FileNotFoundException):
        sb.files.read(f"{d}/missing.txt")
    empty = sb.commands.run(f"touch {WS}/{d}/empty").exit_code
    assert empty == 0 and sb.files.read(f"{d}/empty") == ""


def test_many_files_in_one_multipart_upload(sb, d):
    files = [WriteEntry(path=f"{d}/m/{i % 7}/f{i}.txt", data=f"file {i}") for i in range(60)]
    infos = sb.files.write_files(files)
    assert [i.path for i in infos] == [f"{HOME}/{f['path']}" for f in files]
    for f in files[::7]:
        assert sb.files.read(f["path"]) == f["data"]
    assert sb.commands.run(f"find {WS}/{d}/m -type f | wc -l").stdout.strip() == "60"
    assert sb.files.write_files([]) == []


def test_streams_and_gzip_both_ways(sb, d):
    big = ("Streamed content. " * 300_000).encode()  # about 5 MB
    sb.files.write(f"{d}/big.bin", io.BytesIO(big))  # octet-stream, streamed
    assert b"".join(sb.files.read(f"{d}/big.bin", format="stream")) == big
    assert b"".join(sb.files.read(f"{d}/big.bin", format="stream", gzip=True)) == big
    sb.files.write(f"{d}/gz.txt", "compressed on the way in", gzip=True)
    assert sb.files.read(f"{d}/gz.txt") == "compressed on the way in"
    assert sb.files.read(f"{d}/gz.txt", gzip=True) == "compressed on the way in"
    assert bytes(sb.files.read(f"{d}/big.bin", format="bytes", gzip=True)) == big
    sb.files.write_files([WriteEntry(path=f"{d}/g{i}.txt", data=f"g{i}") for i in range(3)], gzip=True)
    assert [sb.files.read(f"{d}/g{i}.txt") for i in range(3)] == ["g0", "g1", "g2"]
    sb.files.write(f"{d}/text-io.txt", io.StringIO("text io"), use_octet_stream=True)
    assert sb.files.read(f"{d}/text-io.txt") == "text io"


def test_a_large_file_moves_at_bounded_memory(served, sb, d, tmp_path):
    """128 MiB up and down (raw and gzip) while the daemon's peak memory grows by far less
    than the file: bytes stream through, no transfer is held whole."""

    def peak_mib():
        for line in open(f"/proc/{served.proc.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmHWM")

    size = 128 << 20
    src = tmp_path / "large.bin"
    with open(src, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
    before = peak_mib()
    with open(src, "rb") as f:
        sb.files.write(f"{d}/large.bin", f)
    with open(src, "rb") as f:
        sb.files.write_files([WriteEntry(path=f"{d}/large2.bin", data=f)], use_octet_stream=False)
    for gzip in (False, True):
        got = 0
        for chunk in sb.files.read(f"{d}/large.bin", format="stream", gzip=gzip):
            got += len(chunk)
        assert got == size
    assert sb.files.get_info(f"{d}/large2.bin").size == size
    grew = peak_mib() - before
    print(f"peak grew {grew:.1f} MiB from {before:.1f}")
    assert grew < 48, f"the daemon's peak memory grew by {grew:.0f} MiB for a 128 MiB file"


def test_exists_info_and_make_dir(sb, d):
    who = sb.commands.run("id -un").stdout.strip()
    group = sb.commands.run("id -gn").stdout.strip()
    assert sb.files.make_dir(f"{d}/x/y") is True
    assert sb.files.make_dir(f"{d}/x/y") is False
    assert sb.files.exists(f"{d}/x/y") and not sb.files.exists(f"{d}/nope")
    info = sb.files.get_info(f"{d}/x")
    assert (info.name, info.type, info.path) == ("x", FileType.DIR, f"{HOME}/{d}/x")
    assert (info.mode, info.permissions, info.owner, info.group) == (0o755, "drwxr-xr-x", who, group)
    assert info.size > 0 and info.modified_time.tzinfo is not None
    sb.files.write(f"{d}/x/f.txt", "four")
    info = sb.files.get_info(f"{d}/x/f.txt")
    assert (info.type, info.size, info.mode, info.permissions) == (FileType.FILE, 4, 0o644, "-rw-r--r--")
    assert info.symlink_target is None
    with pytest.raises(InvalidArgumentException):
        sb.files.make_dir(f"{d}/x/f.txt")
    with pytest.raises(FileNotFoundException):
        sb.files.get_info(f"{d}/nope")
    home = sb.files.get_info("~")
    assert (home.path, home.type) == (HOME, FileType.DIR)
    # A link inside the home reports what it leads to, and where, and (2.63's `isSymlink`)
    # that it is a link: an SDK that reads the flag shows it as one.
    sb.commands.run(f"ln -s f.txt {WS}/{d}/x/link")
    info = sb.files.get_info(f"{d}/x/link")
    reads_flag = "is_symlink" in filesystem_pb.EntryInfo.__slots__
    assert info.type == (FileType.SYMLINK if reads_flag else FileType.FILE)
    assert (info.symlink_target, info.mode) == (f"{HOME}/{d}/x/f.txt", 0o644)


def test_list_with_depth_walks_lexically(sb, d):
    for sub in ("s1/s1_1", "s1/s1_2", "s2/s2_1", "s2/s2_2"):
        sb.files.make_dir(f"{d}/{sub}")
    sb.files.write(f"{d}/file1.txt", "Hello")
    one = sb.files.list(d)
    assert [(e.name, e.type) for e in one] == [("file1.txt", FileType.FILE), ("s1", FileType.DIR), ("s2", FileType.DIR)]
    assert [e.path for e in one] == [f"{HOME}/{d}/{n}" for n in ("file1.txt", "s1", "s2")]
    two = sb.files.list(d, depth=2)
    assert [e.name for e in two] == ["file1.txt", "s1", "s1_1", "s1_2", "s2", "s2_1", "s2_2"]
    assert two[2].path == f"{HOME}/{d}/s1/s1_1"
    assert [e.name for e in sb.files.list(d, depth=5)] == [e.name for e in two]
    with pytest.raises(InvalidArgumentException):
        sb.files.list(f"{d}/file1.txt")
    with pytest.raises(FileNotFoundException):
        sb.files.list(f"{d}/nope")
    with pytest.raises(InvalidArgumentException):
        sb.files.list(d, depth=0)  # the SDK's own check


def test_root_makes_roots_files_under_the_home(sb, d):
    info = sb.files.write(f"{HOME}/{d}/r/root.txt", "root's", user="root")
    assert info.path == f"{HOME}/{d}/r/root.txt"
    assert sb.files.get_info(f"{HOME}/{d}/r/root.txt", user="root").owner == "root"
    assert sb.commands.run(f"stat -c '%U' {HOME}/{d}/r {HOME}/{d}/r/root.txt").stdout == "root\nroot\n"
    assert sb.files.read(f"{HOME}/{d}/r/root.txt", user="root") == "root's"
    # Root's `~` is /root, which moat does not serve.
    with pytest.raises(SandboxException) as e:
        sb.files.write("relative.txt", "x", user="root")
    assert "outside the user's home" in str(e.value)
    with pytest.raises(Exception) as e:
        sb.files.read(f"{d}/r/root.txt", user="nobody")
    assert "invalid username" in str(e.value)
    with pytest.raises(Exception) as e:
        sb.files.list(d, user="nobody")
    assert "invalid username" in str(e.value)


def test_rename_and_remove(sb, d):
    sb.files.write(f"{d}/old.txt", "moving")
    info = sb.files.rename(f"{d}/old.txt", f"{d}/moved/new.txt")
    assert (info.path, info.type) == (f"{HOME}/{d}/moved/new.txt", FileType.FILE)
    assert not sb.files.exists(f"{d}/old.txt")
    assert sb.files.read(f"{d}/moved/new.txt") == "moving"
    with pytest.raises(FileNotFoundException):
        sb.files.rename(f"{d}/nope", f"{d}/other")
    sb.files.write(f"{d}/tree/a/b/c.txt", "c")
    sb.files.remove(f"{d}/tree")
    assert not sb.files.exists(f"{d}/tree")
    sb.files.remove(f"{d}/tree")  # nothing there: no error
    sb.files.remove(f"{d}/moved/new.txt")
    assert sb.files.list(f"{d}/moved") == []
    with pytest.raises(InvalidArgumentException):
        sb.files.remove("~")
    with pytest.raises(InvalidArgumentException):
        sb.files.rename("~", f"{d}/home-moved")


def test_metadata_is_kept_as_extended_attributes(sb, d):
    meta = {"author": "mish", "purpose": "upload"}
    assert sb.files.write(f"{d}/m.txt", "with metadata", metadata=meta).metadata == meta
    assert sb.files.get_info(f"{d}/m.txt").metadata == meta
    assert sb.files.write(f"{d}/o.txt", "octet", metadata=meta, use_octet_stream=True).metadata == meta
    infos = sb.files.write_files([WriteEntry(path=f"{d}/w{i}.txt", data="w") for i in range(2)], metadata={"Source": "suite"})
    assert [i.metadata for i in infos] == [{"source": "suite"}] * 2, "keys are lowercased"
    listed = {e.name: e.metadata for e in sb.files.list(d)}
    assert listed["m.txt"] == meta and listed["w0.txt"] == {"source": "suite"}
    assert sb.files.rename(f"{d}/m.txt", f"{d}/m2.txt").metadata == meta
    # An upload replaces the metadata: none given, none kept.
    assert sb.files.write(f"{d}/m2.txt", "again").metadata is None
    assert sb.files.get_info(f"{d}/m2.txt").metadata is None
    # They are the file's own attributes, as the sandbox sees them.
    out = sb.commands.run(f"python3 -c \"import os; print(os.getxattr('{WS}/{d}/o.txt', 'user.e2b.author').decode())\"")
    assert out.stdout == "mish\n"


def test_signed_urls_with_and_without_expiry(served):
    sb = Sandbox.create(secure=True)
    try:
        sb.files.write("signed.txt", "signed content")
        for url in (sb.download_url("signed.txt", "user"), sb.download_url("signed.txt", "user", 120)):
            assert "E2b-Sandbox-Id" not in url
            with urllib.request.urlopen(url) as r:
                assert (r.status, r.read()) == (200, b"signed content")
        expired = sb.download_url("signed.txt", "user", use_signature_expiration=-120)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(expired)
        assert e.value.code == 401
        assert json.loads(e.value.read()) == {"code": 401, "message": "signature is already expired"}
        # A signature is for its own path and operation.
        other = sb.download_url("signed.txt", "user").replace("path=signed.txt", "path=other.txt")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(other)
        assert e.value.code == 401
        # An upload URL takes a multipart body, without any header of the SDK's.
        up = sb.upload_url("up/by-url.txt", "user", 60)
        boundary = "moat-test-boundary"
        body = (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"up/by-url.txt\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\nuploaded by url\r\n--{boundary}--\r\n"
        ).encode()
        req = urllib.request.Request(up, data=body, method="POST")
        req.add_header("Content-Type", f"multipart/form-data; boundary={boundary}")
        with urllib.request.urlopen(req) as r:
            assert json.loads(r.read())[0]["path"] == f"{HOME}/up/by-url.txt"
        assert sb.files.read("up/by-url.txt") == "uploaded by url"
        # A signed URL writes its own path only: a second part naming another is refused.
        two = body.replace(f"--{boundary}--".encode(), b"") + (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"elsewhere.txt\"\r\n\r\n"
            f"smuggled\r\n--{boundary}--\r\n"
        ).encode()
        req = urllib.request.Request(sb.upload_url("up/by-url.txt", "user", 60), data=two, method="POST")
        req.add_header("Content-Type", f"multipart/form-data; boundary={boundary}")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == 400 and b"signed for" in e.value.read()
        assert not sb.files.exists("elsewhere.txt")
        # A URL signed for no path writes nothing.
        req = urllib.request.Request(sb.upload_url("", "user"), data=two, method="POST")
        req.add_header("Content-Type", f"multipart/form-data; boundary={boundary}")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == 400
        assert not sb.files.exists("elsewhere.txt")
        # A download URL does not write.
        down = sb.download_url("up/by-url.txt", "user")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(down, data=body, method="POST"))
        assert e.value.code == 401
    finally:
        sb.kill()
    # The sandbox is gone, and so is what its signatures opened.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(sb.download_url("signed.txt", "user"))
    assert e.value.code == 401




@pytest.mark.anyio
async def test_files_through_the_async_client(served):
    sb = await AsyncSandbox.create()
    try:
        info = await sb.files.write("async/a.txt", "from async")
        assert info.path == f"{HOME}/async/a.txt"
        assert await sb.files.read("async/a.txt") == "from async"
        assert await sb.files.read("async/a.txt", gzip=True) == "from async"
        assert [e.name for e in await sb.files.list("async")] == ["a.txt"]
        assert await sb.files.make_dir("async/d") is True
        assert (await sb.files.rename("async/a.txt", "async/d/b.txt")).path == f"{HOME}/async/d/b.txt"
        assert await sb.files.exists("async/d/b.txt")
        await sb.files.remove("async")
        assert not await sb.files.exists("async")
        with pytest.raises(FileNotFoundException):
            await sb.files.read("async/d/b.txt")
    finally:
        await sb.kill()
