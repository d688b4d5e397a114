"""The wire itself, below the SDK: Connect envelopes, errors before the first event,
keepalives, health and tokens, as E2B's daemon and proxy answer them (docs/e2b.md,
"Connect", "Health", "Keys and tokens")."""

import http.client
import json
import struct
import time

import pytest
from e2b import Sandbox


@pytest.fixture(scope="module")
def sb(served):
    s = Sandbox.create()
    yield s
    s.kill()


def envelope(msg, flags=0) -> bytes:
    body = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
    return bytes([flags]) + struct.pack(">I", len(body)) + body


def envelopes(data: bytes):
    out = []
    while data:
        flags, n = data[0], struct.unpack(">I", data[1:5])[0]
        out.append((flags, json.loads(data[5 : 5 + n])))
        data = data[5 + n :]
    return out


def call(served, sb, method, body, token=None, headers=None, stream=True):
    c = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    h = {
        "Content-Type": "application/connect+json" if stream else "application/json",
        "E2b-Sandbox-Id": sb.sandbox_id,
        "X-Access-Token": token if token is not None else sb._envd_access_token,
    }
    h.update(headers or {})
    c.request("POST", f"/process.Process/{method}", body, h)
    r = c.getresponse()
    return r.status, r.getheader("Content-Type"), r.read()


def test_a_stream_is_envelopes_ending_in_an_end_envelope(served, sb):
    status, ctype, data = call(
        served, sb, "Start", envelope({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "printf hi; exit 4"]}})
    )
    assert (status, ctype) == (200, "application/connect+json")
    events = envelopes(data)
    assert "pid" in events[0][1]["event"]["start"]
    assert {"stdout": "aGk="} in [e["event"].get("data") for _, e in events[1:-2]]
    assert events[-2][1]["event"]["end"] == {"exitCode": 4, "exited": True, "status": "exit status 4"}
    assert events[-1] == (2, {})


def test_errors_before_the_first_event_are_an_end_envelope_with_200(served, sb):
    cases = [
        (b"", "invalid_argument"),
        (b"\x00\x00\x00", "invalid_argument"),
        (b"\x00\xff\xff\xff\xff{}", "invalid_argument"),
        (envelope({"process": {"cmd": "/bin/true"}}, flags=1), "invalid_argument"),
        (envelope(b"{not json"), "invalid_argument"),
        (envelope({"process": {"cmd": ""}}), "invalid_argument"),
    ]
    for body, code in cases:
        status, ctype, data = call(served, sb, "Start", body)
        assert (status, ctype) == (200, "application/connect+json"), body
        [(flags, end)] = envelopes(data)
        assert flags == 2 and end["error"]["code"] == code, (body, end)
    status, _, data = call(served, sb, "Connect", envelope({"process": {"pid": 999999}}))
    [(flags, end)] = envelopes(data)
    assert end["error"] == {"code": "not_found", "message": "process with pid 999999 not found"}


def test_unary_errors_carry_connects_status(served, sb):
    status, _, data = call(served, sb, "SendSignal", b'{"process":{"pid":999999},"signal":"SIGNAL_SIGKILL"}', stream=False)
    assert status == 404 and json.loads(data)["code"] == "not_found"
    status, _, data = call(served, sb, "SendSignal", b'{"process":{"pid":1},"signal":"SIGNAL_SIGSTOP"}', stream=False)
    assert status == 400 and json.loads(data)["code"] == "invalid_argument"
    status, _, data = call(served, sb, "List", b"{}", token="not-the-token", stream=False)
    assert status == 401 and json.loads(data)["code"] == "unauthenticated"


def test_keepalives_while_a_command_is_quiet(served, sb):
    status, _, data = call(
        served,
        sb,
        "Start",
        envelope({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "sleep 2.5"]}}),
        headers={"Keepalive-Ping-Interval": "1"},
    )
    kinds = [next(iter(e["event"])) for f, e in envelopes(data) if f == 0]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert kinds.count("keepalive") >= 2, kinds


def test_health_answers_as_e2bs_proxy(served, sb):
    c = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    c.request("GET", "/health", headers={"E2b-Sandbox-Id": sb.sandbox_id})
    r = c.getresponse()
    assert r.status == 204
    r.read()
    c.request("GET", "/health", headers={"E2b-Sandbox-Id": "gone0000000000000000"})
    r = c.getresponse()
    assert r.status == 502
    assert json.loads(r.read()) == {
        "sandboxId": "gone0000000000000000",
        "message": "The sandbox was not found",
        "code": 502,
    }
