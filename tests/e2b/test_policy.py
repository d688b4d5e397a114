"""Commands through E2B's API are judged by the session's policy like any exec: a refusal
reaches the SDK with moat's sentence, and the command never runs."""


import pytest
from e2b import Sandbox
from e2b.exceptions import SandboxException

from conftest import KEY, Served


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("moat-e2b-deny"), '[policy.sandbox]\nsecurity = "deny"\n')
    yield s
    s.stop()


def test_a_refused_command_never_runs_and_says_why(locked):
    sb = Sandbox.create(api_key=KEY, api_url=locked.url, sandbox_url=locked.url)
    try:
        with pytest.raises(SandboxException) as e:
            sb.commands.run("touch /tmp/ran")
        assert "refused" in str(e.value).lower() or "denied" in str(e.value).lower(), str(e.value)
    finally:
        sb.kill()
