"""`[e2b] runtime`: E2B's sandboxes under another engine runtime than the operator's other
sessions, gVisor's runsc here (scripts/setup-runsc registers it)."""

import subprocess

import pytest
from e2b import Sandbox

from conftest import KEY, Served, containers_of


@pytest.fixture(scope="module")
def under_runsc(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("moat-e2b-runsc"), 'runtime = "runsc"\n')
    yield s
    s.stop()


def test_e2b_sandboxes_run_under_the_runtime_e2b_names(under_runsc):
    sb = Sandbox.create(api_key=KEY, api_url=under_runsc.url, sandbox_url=under_runsc.url)
    try:
        assert sb.commands.run("echo inside").stdout == "inside\n"
        [cid] = containers_of(under_runsc.home)
        runtime = subprocess.run(
            ["docker", "inspect", "-f", "{{.HostConfig.Runtime}}", cid],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        assert runtime == "runsc"
        # gVisor's own kernel answers, not the host's.
        assert "gVisor" in sb.commands.run("dmesg 2>/dev/null | head -n 3 || true").stdout
        # Root is gVisor's root: a command that asks for it is uid 0 there, and its process is
        # ended by a kill like any other (docs/security.md, "Root inside E2B's sandboxes").
        assert sb.commands.run("id -u", user="root").stdout == "0\n"
        h = sb.commands.run("sleep 600", background=True, user="root")
        assert sb.commands.kill(h.pid) is True
        assert h.pid not in [p.pid for p in sb.commands.list()]
    finally:
        sb.kill()
