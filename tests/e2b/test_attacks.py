"""Attacks on the E2B port from its hostile review, each shown to fail (docs/security.md,
"E2B's API")."""

import http.client
import json
import socket
import struct
import threading
import time

import pytest
from e2b import Sandbox

from conftest import KEY, Served, containers_of


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A daemon whose connection budget is small enough to fill in a test."""
    s = Served(
        tmp_path_factory.mktemp("moat-e2b-small"),
        "[serve]\nmax_connections = 24\nmax_connections_per_token = 8\n",
    )
    yield s
    s.stop()
    assert containers_of(s.home) == []


def api(served, method, path, body=None, key=KEY):
    c = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    headers = {"X-API-KEY": key, "Content-Type": "application/json"}
    c.request(method, path, json.dumps(body) if body is not None else None, headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def test_a_kill_racing_a_create_leaves_no_container(small):
    """A DELETE aimed at a sandbox while it is made must not leave its container behind."""
    for _ in range(3):
        created = {}

        def create():
            created["answer"] = api(small, "POST", "/sandboxes", {"timeout": 300})

        t = threading.Thread(target=create)
        t.start()
        while t.is_alive():
            status, data = api(small, "GET", "/v2/sandboxes")
            for s in json.loads(data) if status == 200 else []:
                api(small, "DELETE", f"/sandboxes/{s['sandboxID']}")
            time.sleep(0.005)
        t.join()
        status, data = created["answer"]
        if status == 201:
            api(small, "DELETE", f"/sandboxes/{json.loads(data)['sandboxID']}")
        assert containers_of(small.home) == [], "a container outlived its sandbox"


def test_silent_connections_are_closed_and_never_crowd_out_callers(small):
    """Connections that never identify themselves hold nothing for long: the oldest go when
    the daemon is full, and a caller with a key (and the operator) are still served."""
    silent = [socket.create_connection(("127.0.0.1", small.port)) for _ in range(60)]
    try:
        sb = Sandbox.create(api_key=KEY, api_url=small.url, sandbox_url=small.url)
        try:
            assert sb.commands.run("echo served").stdout == "served\n"
        finally:
            sb.kill()
        # The operator's socket answers (cli() asserts the command succeeded).
        small.cli("sessions", "list")
        # Every silent connection is closed by the daemon (evicted, or at its deadline).
        deadline = time.time() + 20
        open_ = list(silent)
        while open_ and time.time() < deadline:
            for s in list(open_):
                s.settimeout(0.05)
                try:
                    if s.recv(1) == b"":
                        open_.remove(s)
                except socket.timeout:
                    pass
                except OSError:
                    open_.remove(s)
        assert open_ == [], f"{len(open_)} silent connections still open"
    finally:
        for s in silent:
            s.close()


def test_no_body_is_read_before_the_caller_is_known(small):
    """A request without a key is answered at once from its headers: its (huge) body is
    never waited for or held."""
    s = socket.create_connection(("127.0.0.1", small.port))
    s.settimeout(5)
    s.sendall(
        b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 8450048\r\n\r\n"
    )
    answer = s.recv(4096)
    s.close()
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_a_tag_is_bounded(small):
    sb = Sandbox.create(api_key=KEY, api_url=small.url, sandbox_url=small.url)
    try:
        body = json.dumps(
            {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "true"]}, "tag": "x" * 100_000}
        ).encode()
        env = b"\x00" + struct.pack(">I", len(body)) + body
        c = http.client.HTTPConnection("127.0.0.1", small.port, timeout=30)
        c.request(
            "POST",
            "/process.Process/Start",
            env,
            {
                "Content-Type": "application/connect+json",
                "E2b-Sandbox-Id": sb.sandbox_id,
                "X-Access-Token": sb._envd_access_token,
            },
        )
        data = c.getresponse().read()
        assert data[0] == 2 and b"invalid_argument" in data and b"tag" in data, data[:300]
    finally:
        sb.kill()


def test_a_client_that_hangs_up_mid_create_leaves_nothing_unowned(small):
    """A create whose client goes away still finishes: the sandbox is then listed (and ends
    with its lifetime or a kill), never a container nobody sees that holds the key's slot."""
    for delay in (0.02, 0.15, 0.4):
        s = socket.create_connection(("127.0.0.1", small.port))
        body = b'{"timeout":30}'
        s.sendall(
            b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"X-API-KEY: {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(delay)
        s.close()
    # Every container of this home belongs to a listed sandbox once the creates are done.
    deadline = time.time() + 30
    while time.time() < deadline:
        listed = json.loads(api(small, "GET", "/v2/sandboxes")[1])
        if len(containers_of(small.home)) == len(listed):
            break
        time.sleep(0.5)
    listed = json.loads(api(small, "GET", "/v2/sandboxes")[1])
    assert len(containers_of(small.home)) == len(listed)
    for sb in listed:
        assert api(small, "DELETE", f"/sandboxes/{sb['sandboxID']}")[0] == 204
    assert containers_of(small.home) == []
