"""E2B's users and the base template (docs/e2b.md, "Users" and "The base template"): commands
run as `user` in its home unless they ask for root; root is real (sudo, `user="root"`) inside
the sandbox's own walls; root's processes are signalled and reaped like any other; the home is
the session's workspace; and a client stream of input (`StreamInput`) reaches a process."""

import http.client
import json
import struct

import pytest
from e2b import AsyncSandbox, Sandbox
from e2b.exceptions import AuthenticationException, SandboxException
from e2b.sandbox.commands.command_handle import CommandExitException


@pytest.fixture(scope="module")
def sb(served):
    s = Sandbox.create(envs={"FOO": "bar"})
    yield s
    s.kill()


def test_user_is_the_default_and_starts_in_its_home(sb):
    r = sb.commands.run('whoami; pwd; echo "$HOME $USER $LOGNAME"; umask; id -gn')
    assert r.stdout.split("\n")[:5] == ["user", "/home/user", "/home/user user user", "0022", "user"]
    # tput is there (terminal programs ask for it), and python3.
    assert sb.commands.run("tput -T xterm cols && python3 -c 'print(6*7)'").stdout.endswith("42\n")


def test_sudo_works_and_keeps_the_sandbox_env(sb):
    # E2B's own test: create-time envs reach a command run through sudo.
    assert sb.commands.run('sudo echo "$FOO"').stdout == "bar\n"
    assert sb.commands.run("sudo id -u").stdout == "0\n"


def test_root_when_asked_for(sb):
    r = sb.commands.run('whoami; pwd; echo "$HOME $USER"', user="root")
    assert r.stdout == "root\n/root\n/root root\n"
    # Root owns the container's files, not the host's: the root filesystem stays read-only.
    with pytest.raises(CommandExitException) as e:
        sb.commands.run("touch /etc/moat-root-was-here", user="root")
    assert "Read-only file system" in e.value.stderr
    # Root holds only the capabilities docs/security.md lists: no mounts, no raw sockets.
    with pytest.raises(CommandExitException):
        sb.commands.run("mount -t tmpfs none /mnt", user="root")
    caps = sb.commands.run("grep CapEff /proc/self/status", user="root").stdout.split()[1]
    assert int(caps, 16) & (1 << 21) == 0, "CAP_SYS_ADMIN"
    assert int(caps, 16) & (1 << 13) == 0, "CAP_NET_RAW"
    # The sandbox's user holds none at all.
    assert sb.commands.run("grep CapEff /proc/self/status").stdout.split()[1] == "0" * 16


def test_an_unknown_user_is_refused_as_e2b_refuses_it(sb):
    with pytest.raises((AuthenticationException, SandboxException)) as e:
        sb.commands.run("whoami", user="root123")
    assert "invalid username" in str(e.value)


def test_roots_processes_are_killed_and_reaped(sb):
    as_root = sb.commands.run("sleep 600", background=True, user="root")
    assert sb.commands.kill(as_root.pid) is True
    with pytest.raises(CommandExitException):
        sb.commands.run(f"sudo kill -0 {as_root.pid}")
    # A command of the user's that became root through sudo is ended with its group too.
    via_sudo = sb.commands.run("sudo sleep 601", background=True)
    assert sb.commands.kill(via_sudo.pid) is True
    left = sb.commands.run("ps -eo args | grep -c '^sleep 601' || true").stdout.strip()
    assert left == "0", f"{left} process(es) outlived the kill"


def test_the_home_is_the_workspace(sb):
    sb.commands.run("echo kept > ~/note.txt")
    assert sb.commands.run("cat /workspace/note.txt").stdout == "kept\n"
    # Its bound is the session's disk, not the container's root filesystem.
    assert sb.commands.run("stat -f -c %T /home/user").stdout.strip() != "overlayfs"


@pytest.mark.anyio
async def test_users_through_the_async_client(served):
    s = await AsyncSandbox.create()
    try:
        assert (await s.commands.run("whoami", user="root")).stdout == "root\n"
        assert (await s.commands.run("whoami")).stdout == "user\n"
    finally:
        await s.kill()


def envelope(msg) -> bytes:
    body = json.dumps(msg).encode()
    return bytes([0]) + struct.pack(">I", len(body)) + body


def test_a_client_stream_of_input_reaches_the_process(served, sb):
    h = sb.commands.run("head -c 10", background=True, stdin=True)
    body = envelope({"start": {"process": {"pid": h.pid}}})
    body += envelope({"keepalive": {}})
    body += envelope({"data": {"input": {"stdin": "aGVsbG8g"}}})  # "hello "
    body += envelope({"data": {"input": {"stdin": "d29ybGQ="}}})  # "world"
    c = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    c.request(
        "POST",
        "/process.Process/StreamInput",
        body,
        {
            "Content-Type": "application/connect+json",
            "E2b-Sandbox-Id": sb.sandbox_id,
            "X-Access-Token": sb._envd_access_token,
        },
    )
    r = c.getresponse()
    data = r.read()
    assert (r.status, r.getheader("Content-Type")) == (200, "application/connect+json")
    assert data.endswith(bytes([2]) + struct.pack(">I", 2) + b"{}")
    assert h.wait().stdout == "hello worl"
    # Data before the process is named is refused in the end envelope.
    c = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    c.request(
        "POST",
        "/process.Process/StreamInput",
        envelope({"data": {"input": {"stdin": "eA=="}}}),
        {
            "Content-Type": "application/connect+json",
            "E2b-Sandbox-Id": sb.sandbox_id,
            "X-Access-Token": sb._envd_access_token,
        },
    )
    r = c.getresponse()
    end = r.read()
    assert r.status == 200 and b'"invalid_argument"' in end and b"start" in end
