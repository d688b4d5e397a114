"""Shared set-up for the MCP tests: the moat binary, a private MOAT_HOME, a unique session.

Every test module gets its own MOAT_HOME (so its own containers) and removes the session
containers it created when it ends.
"""

import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="session")
def moat_bin() -> str:
    path = os.environ.get("MOAT_BIN") or str(ROOT / "target" / "release" / "moat")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no moat binary at {path} (run scripts/setup, or set MOAT_BIN)")
    return path


@pytest.fixture(scope="session")
def moat_version(moat_bin) -> str:
    out = subprocess.run([moat_bin, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[-1]


@pytest.fixture(scope="module")
def moat_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("moat-home")
    yield home
    stop_daemon(home)


def stop_daemon(home) -> None:
    """Stops the home's daemon (the first moat command started it), so nothing of the test
    outlives it; pytest keeps the home directory, so the daemon would wait for its idle exit."""
    try:
        pid = int((home / "daemon.lock").read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def session_key(moat_bin, moat_home):
    key = f"mcp-{uuid.uuid4().hex[:10]}"
    yield key
    env = moat_env(moat_home)
    # Purged: the session's own filesystems are unmounted and deleted with it.
    subprocess.run([moat_bin, "sessions", "rm", "--purge", key], env=env, capture_output=True)


def moat_env(moat_home) -> dict[str, str]:
    """The environment a moat child gets: ours (PATH, DOCKER_HOST, …) plus its own home."""
    env = dict(os.environ)
    env["MOAT_HOME"] = str(moat_home)
    env.pop("MOAT_SESSION", None)
    return env
