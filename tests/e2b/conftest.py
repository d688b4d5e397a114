"""Shared set-up for the E2B tests: a `moat serve` of its own serving E2B's API, driven only
through E2B's SDK from PyPI (scripts/test-e2b pins it).

Every pytest worker starts its own daemon on a private MOAT_HOME and a free port, and points
the SDK at it with the two variables the README gives users. Stopping the daemon ends every
sandbox it served, which the teardown checks.
"""

import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Two keys: each is an identity of its own, and sees only its own sandboxes.
KEY = "e2b_" + "0123456789abcdef" * 2 + "01234567"
OTHER_KEY = "e2b_" + "fedcba9876543210" * 2 + "76543210"


@pytest.fixture(scope="session")
def anyio_backend():
    return "asyncio"


def moat_bin() -> str:
    moat = os.environ.get("MOAT_BIN") or str(ROOT / "target" / "release" / "moat")
    if not os.access(moat, os.X_OK):
        pytest.fail(f"no moat binary at {moat} (run scripts/setup, or set MOAT_BIN)")
    return moat


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """One `moat serve` with E2B's API: its URL, home and process."""

    def __init__(self, home: Path, extra_config: str = ""):
        """`extra_config` follows the `[e2b]` table's keys: more of its keys, then other
        tables."""
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (home / "moat.toml").write_text(
            f'[e2b]\nlisten = "127.0.0.1:{self.port}"\napi_keys = ["{KEY}", "{OTHER_KEY}"]\n'
            + extra_config
        )
        moat = moat_bin()
        env = dict(os.environ, MOAT_HOME=str(home))
        env.pop("MOAT_SESSION", None)
        self.log = open(home / "serve.log", "wb")
        self.proc = subprocess.Popen([moat, "serve"], env=env, stdout=self.log, stderr=self.log)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"moat serve exited: {(home / 'serve.log').read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        pytest.fail("moat serve did not listen on e2b.listen within 30 s")

    def cli(self, *args: str) -> str:
        """What `moat ARGS` prints against this daemon's home."""
        env = dict(os.environ, MOAT_HOME=str(self.home))
        env.pop("MOAT_SESSION", None)
        out = subprocess.run([moat_bin(), *args], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("moat serve did not end within 60 s of SIGTERM")
        self.log.close()
        return (self.home / "serve.log").read_text()


def containers_of(home: Path) -> list[str]:
    """The containers that mount from `home` (every session container of it does)."""
    out = subprocess.run(
        ["docker", "ps", "-aq", "--no-trunc"], capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for cid in out:
        mounts = subprocess.run(
            ["docker", "inspect", "-f", "{{range .Mounts}}{{.Source}} {{end}}", cid],
            capture_output=True,
            text=True,
        ).stdout
        if str(home) in mounts:
            found.append(cid)
    return found


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("moat-e2b"))
    os.environ["E2B_API_URL"] = s.url
    os.environ["E2B_SANDBOX_URL"] = s.url
    os.environ["E2B_API_KEY"] = KEY
    os.environ.pop("E2B_DEBUG", None)
    yield s
    s.stop()
    # The daemon's end is the end of every sandbox it served: no container is left.
    assert containers_of(s.home) == [], "sandboxes outlived the moat that served them"


@pytest.fixture
def tag() -> str:
    """A value unique to one test, for metadata filters."""
    return uuid.uuid4().hex[:12]
