"""Commands through E2B's SDK: output raw and apart, exit codes, environment, directories,
background processes, stdin, signals, deadlines, and a sandbox killed while a command runs."""

import threading
import time

import pytest
from e2b import AsyncSandbox, Sandbox
from e2b.exceptions import TimeoutException
from e2b.sandbox.commands.command_handle import CommandExitException


@pytest.fixture(scope="module")
def sb(served):
    s = Sandbox.create()
    yield s
    s.kill()


def test_stdout_and_stderr_apart_and_exit_codes(sb):
    r = sb.commands.run("echo out; echo err >&2")
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 0)
    with pytest.raises(CommandExitException) as e:
        sb.commands.run("echo why >&2; exit 3")
    assert e.value.exit_code == 3
    assert e.value.stderr == "why\n"


def test_output_is_raw_bytes_in_order(sb):
    # Not UTF-8: the SDK decodes it itself; moat passes the bytes untouched.
    chunks = []
    r = sb.commands.run(r"printf 'a\377b\033[31mred\n'", on_stdout=chunks.append)
    assert r.stdout == "a\ufffdb\x1b[31mred\n"
    # A large output arrives whole.
    r = sb.commands.run("head -c 3000000 /dev/zero | tr '\\0' x; echo")
    assert len(r.stdout) == 3_000_001


def test_env_cwd_and_bash(sb):
    assert sb.commands.run("echo $GREETING", envs={"GREETING": "hi there"}).stdout == "hi there\n"
    assert sb.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    # The SDK asks for bash: bash it is.
    assert sb.commands.run("echo ${BASH_VERSION:+bash}; [[ 1 == 1 ]] && echo ok").stdout == "bash\nok\n"
    with pytest.raises(CommandExitException):
        sb.commands.run("pwd", cwd="/no/such/dir")


def test_background_list_connect_and_kill(sb):
    h = sb.commands.run("for i in 1 2 3; do echo tick $i; sleep 0.3; done", background=True)
    assert h.pid in [p.pid for p in sb.commands.list()]
    again = sb.commands.connect(h.pid)
    result = again.wait()
    assert result.exit_code == 0
    assert "tick 3" in result.stdout
    long = sb.commands.run("sleep 600", background=True)
    assert sb.commands.kill(long.pid) is True
    # Ended and reaped when kill answers: the pid is gone.
    with pytest.raises(CommandExitException):
        sb.commands.run(f"kill -0 {long.pid}")
    assert long.pid not in [p.pid for p in sb.commands.list()]
    # Nothing to kill any more.
    assert sb.commands.kill(long.pid) is False


def test_stdin_when_asked_for_and_end_of_file_otherwise(sb):
    h = sb.commands.run("cat", background=True, stdin=True)
    sb.commands.send_stdin(h.pid, "hello\n")
    sb.commands.close_stdin(h.pid)
    assert h.wait().stdout == "hello\n"
    # Without stdin, a reader sees end of file at once.
    assert sb.commands.run("cat; echo done").stdout == "done\n"


def test_a_deadline_ends_the_command_too(sb):
    with pytest.raises(TimeoutException):
        sb.commands.run("sleep 30", timeout=2)
    deadline = time.time() + 10
    while time.time() < deadline and any("sleep 30" in " ".join([p.cmd] + p.args) for p in sb.commands.list()):
        time.sleep(0.2)
    assert not any("sleep 30" in " ".join([p.cmd] + p.args) for p in sb.commands.list())


def test_a_sandbox_killed_mid_run_ends_the_call_as_e2bs_would(served):
    sb = Sandbox.create()
    waiting = sb.commands.run("sleep 60", background=True)
    killer = threading.Timer(0.5, sb.kill)
    killer.start()
    started = time.time()
    # The SDK asks /health, hears the sandbox is gone, and says so.
    with pytest.raises(TimeoutException, match="sandbox was killed or reached its end of life"):
        waiting.wait()
    assert time.time() - started < 20
    killer.join()
    assert not sb.is_running()


@pytest.mark.anyio
async def test_commands_through_the_async_client(served):
    sb = await AsyncSandbox.create()
    try:
        r = await sb.commands.run("echo a; echo b >&2")
        assert (r.stdout, r.stderr) == ("a\n", "b\n")
        h = await sb.commands.run("sleep 600", background=True)
        assert await sb.commands.kill(h.pid) is True
        with pytest.raises(CommandExitException) as e:
            await sb.commands.run("exit 7")
        assert e.value.exit_code == 7
    finally:
        await sb.kill()
