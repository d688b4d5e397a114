"""Commands through E2B's API are judged by the session's policy like any exec: a refusal or
a wait for an operator reaches the SDK as moat's sentence, and the command does not run."""

import json

import pytest
from e2b import Sandbox
from e2b.exceptions import SandboxException

from conftest import KEY, Served


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("moat-e2b-deny"), '[policy.sandbox]\nsecurity = "deny"\n')
    yield s
    s.stop()


@pytest.fixture(scope="module")
def asking(tmp_path_factory):
    s = Served(
        tmp_path_factory.mktemp("moat-e2b-ask"),
        '[policy.sandbox]\nsecurity = "allowlist"\nask = "on-miss"\n',
    )
    yield s
    s.stop()


def connect(served: Served) -> Sandbox:
    return Sandbox.create(api_key=KEY, api_url=served.url, sandbox_url=served.url)


def test_a_refused_command_never_runs_and_says_why(locked):
    sb = connect(locked)
    try:
        with pytest.raises(SandboxException) as e:
            sb.commands.run("touch /tmp/ran")
        assert "refused" in str(e.value).lower() or "denied" in str(e.value).lower(), str(e.value)
    finally:
        sb.kill()


def test_a_command_that_needs_approval_names_it_and_waits_for_the_operator(asking):
    sb = connect(asking)
    try:
        with pytest.raises(SandboxException) as e:
            sb.commands.run("rm -f /tmp/never-ran")
        pending = json.loads(asking.cli("approvals", "list", "--json"))
        mine = [a for a in pending if a["session"] == f"e2b-{sb.sandbox_id}"]
        assert len(mine) == 1, (pending, str(e.value))
        assert f"moat approvals approve {mine[0]['id'][:8]}" in str(e.value), str(e.value)
        assert "rm -f /tmp/never-ran" in mine[0]["command"]
    finally:
        sb.kill()


@pytest.fixture(scope="module")
def with_secret(tmp_path_factory):
    home = tmp_path_factory.mktemp("moat-e2b-secret")
    (home / "token").write_text("s3cr3t-value-never-shown\n")
    (home / "token").chmod(0o600)
    s = Served(home, f'[secrets.DEPLOY_TOKEN]\nfile = "{home / "token"}"\nsessions = ["*"]\n')
    yield s
    s.stop()


def test_a_secret_never_reaches_a_raw_stream(with_secret):
    # moat redacts secrets from what it shows, but E2B's output is raw: no sandbox is made
    # where a secret would be given.
    with pytest.raises(SandboxException) as e:
        Sandbox.create(api_key=KEY, api_url=with_secret.url, sandbox_url=with_secret.url)
    assert "DEPLOY_TOKEN" in str(e.value)
    assert "s3cr3t" not in str(e.value)
