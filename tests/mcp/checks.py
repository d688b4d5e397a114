"""The MCP checks, shared by the stdio and the streamable HTTP tests.

Each takes a connected, initialized `mcp.ClientSession` and an `Events` collector that was
passed as its `logging_callback`.
"""

import time

import anyio
import mcp_types as types

EXEC_PARAMS = {
    "command": "string",
    "workdir": "string",
    "env": "object",
    "yieldMs": "number",
    "background": "boolean",
    "timeout": "number",
    "pty": "boolean",
    "elevated": "boolean",
    "host": "string",
    "node": "string",
    "nodeHost": "string",
    "security": "string",
    "ask": "string",
}

PROCESS_PARAMS = {
    "action": "string",
    "sessionId": "string",
    "data": "string",
    "eof": "boolean",
    "keys": "array",
    "hex": "array",
    "literal": "string",
    "text": "string",
    "bracketed": "boolean",
    "offset": "integer",
    "charOffset": "integer",
    "limit": "integer",
    "timeout": "integer",
    "node": "string",
}


class Events:
    """Collects the server's logging notifications (moat's session events)."""

    def __init__(self):
        self.messages: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.messages.append(params)

    async def wait_for(self, needle: str, timeout: float = 20.0) -> types.LoggingMessageNotificationParams:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self.messages:
                if needle in str(m.data):
                    return m
            await anyio.sleep(0.1)
        raise AssertionError(f"no notification containing {needle!r}; got {[m.data for m in self.messages]}")


def as_dict(value) -> dict:
    """SDK models and plain dicts alike (the SDK keeps a tool's schema as a dict)."""
    if isinstance(value, dict):
        return value
    return value.model_dump(by_alias=True, exclude_none=True)


def text_of(result: types.CallToolResult) -> str:
    assert result.content, result
    first = result.content[0]
    assert first.type == "text", first
    return first.text


def check_initialize(init: types.InitializeResult, version: str) -> None:
    assert init.server_info.name == "moat"
    assert init.server_info.version == version
    assert init.capabilities.tools is not None
    assert init.capabilities.logging is not None
    assert "process" in (init.instructions or "")


async def check_tools(client) -> None:
    listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {"exec", "process", "read_file", "write_file", "list_dir", "apply_patch"}
    for name, params, required in (
        ("exec", EXEC_PARAMS, ["command"]),
        ("process", PROCESS_PARAMS, ["action"]),
    ):
        schema = as_dict(tools[name].input_schema)
        assert schema["type"] == "object"
        props = schema["properties"]
        assert set(props) == set(params), (name, sorted(props))
        for param, ty in params.items():
            assert props[param]["type"] == ty, (name, param, props[param])
        assert schema["required"] == required
        assert tools[name].description
    assert as_dict(tools["exec"].input_schema)["properties"]["env"]["additionalProperties"] == {"type": "string"}
    desc = tools["exec"].description
    for word in ("yieldMs", "background", "process", "poll", "pty"):
        assert word in desc, word


async def check_echo(client) -> None:
    result = await client.call_tool("exec", {"command": "echo hi"})
    assert result.is_error is False, result
    assert text_of(result) == "hi"
    assert result.structured_content["status"] == "completed"
    assert result.structured_content["exitCode"] == 0


async def check_exit_code(client) -> None:
    result = await client.call_tool("exec", {"command": "echo out; exit 3"})
    assert result.is_error is True, result
    text = text_of(result)
    assert text.startswith("out"), text
    assert "Command exited with code 3" in text
    assert result.structured_content["status"] == "failed"
    assert result.structured_content["exitCode"] == 3


async def check_bad_requests(client) -> None:
    result = await client.call_tool("exec", {"command": "  "})
    assert result.is_error is True
    assert text_of(result) == "Provide a command to start."
    result = await client.call_tool("exec", {"command": "true", "env": {"1X": "a"}})
    assert result.is_error is True
    assert text_of(result).startswith("Failed to set env var `1X`"), text_of(result)
    result = await client.call_tool("exec", {"command": "true", "workdir": "/etc"})
    assert result.is_error is True
    assert "allowed root" in text_of(result), text_of(result)
    result = await client.call_tool("exec", {"command": "true", "bogus": 1})
    assert result.is_error is True
    assert text_of(result).startswith("Invalid exec arguments: unknown field `bogus`"), text_of(result)
    result = await client.call_tool("process", {"action": "poll", "sessionId": "no-such-id"})
    assert result.is_error is True
    assert text_of(result) == "No session found for no-such-id"


async def check_background_poll(client, events: Events) -> None:
    result = await client.call_tool(
        "exec",
        {"command": "for i in 1 2 3; do echo tick$i; sleep 0.3; done", "background": True},
    )
    assert result.is_error is False, result
    details = result.structured_content
    assert details["status"] == "running", details
    pid = details["sessionId"]
    assert f"session {pid}" in text_of(result)

    output = ""
    status = "running"
    deadline = time.monotonic() + 60
    while status == "running":
        assert time.monotonic() < deadline, "the background process did not exit"
        poll = await client.call_tool("process", {"action": "poll", "sessionId": pid, "timeout": 5000})
        status = poll.structured_content["status"]
        body = text_of(poll).rsplit("\n\n", 1)[0]
        if body != "(no new output)":
            output += body + "\n"
    assert status == "completed", poll
    assert poll.is_error is False
    assert poll.structured_content["exitCode"] == 0
    assert "Process exited with code 0." in text_of(poll)
    for i in (1, 2, 3):
        assert f"tick{i}" in output, output

    listed = await client.call_tool("process", {"action": "list"})
    assert pid in text_of(listed)

    # notify-on-exit: the event arrives as a logging notification.
    msg = await events.wait_for(f"Exec completed ({pid[:8]}")
    assert msg.logger == "moat"
    assert msg.level == "notice"
    assert "tick3" in str(msg.data)


async def check_kill(client, events: Events) -> None:
    result = await client.call_tool("exec", {"command": "sleep 1000", "background": True})
    assert result.structured_content["status"] == "running", result
    pid = result.structured_content["sessionId"]

    killed = await client.call_tool("process", {"action": "kill", "sessionId": pid})
    assert text_of(killed) == f"Killed session {pid}."
    # The kill succeeded, so the call is not an error; the process it ended has failed.
    assert killed.is_error is False, killed
    assert killed.structured_content["exitSignal"] == "SIGTERM", killed

    poll = await client.call_tool("process", {"action": "poll", "sessionId": pid, "timeout": 5000})
    assert poll.structured_content["status"] == "failed", poll
    assert "Process exited with" in text_of(poll)
    await events.wait_for(f"Exec failed ({pid[:8]}")

    # Nothing of it is left running in the container.
    ps = await client.call_tool("exec", {"command": "ps -eo args | grep -c '^sleep 1000' || true"})
    assert text_of(ps).strip() == "0", text_of(ps)


async def check_signal_death(client) -> None:
    """A command a signal ended says which signal, not "exited with code 137"."""
    result = await client.call_tool("exec", {"command": "echo before; kill -9 $$"})
    assert result.is_error is True, result
    assert text_of(result).startswith("before"), text_of(result)
    assert text_of(result).endswith("Command aborted by signal SIGKILL"), text_of(result)
    assert result.structured_content["exitCode"] is None, result
    plain = await client.call_tool("exec", {"command": "exit 3"})
    assert text_of(plain).endswith("Command exited with code 3"), text_of(plain)


async def wait_ended(client, pid: str, seconds: float = 20.0):
    """Polls `pid` until it is no longer running; returns the last poll."""
    deadline = time.monotonic() + seconds
    while True:
        poll = await client.call_tool("process", {"action": "poll", "sessionId": pid, "timeout": 1000})
        if poll.structured_content["status"] != "running" or time.monotonic() > deadline:
            return poll


async def check_cancelled_call(client, marker: str) -> None:
    """A client that gives up on a foreground exec (the SDK sends notifications/cancelled):
    the command's whole tree is ended, and `process list` shows it with its outcome."""
    # Warm the container, so the call below is waiting on the command when it is cancelled.
    await client.call_tool("exec", {"command": "true"})
    command = f"sleep 300 & {marker}"
    with anyio.move_on_after(2) as scope:
        await client.call_tool("exec", {"command": command, "timeout": 0, "yieldMs": 60000})
    assert scope.cancelled_caught, "the call returned before it was cancelled"
    deadline = time.monotonic() + 15
    row = None
    while time.monotonic() < deadline:
        listed = await client.call_tool("process", {"action": "list"})
        rows = [r for r in listed.structured_content["sessions"] if r["command"] == command]
        if rows and rows[0]["status"] != "running":
            row = rows[0]
            break
        await anyio.sleep(0.2)
    assert row is not None, "the cancelled command is not listed as ended"
    assert row["status"] == "failed", row
    assert row["exitSignal"] == "SIGTERM", row
    ps = await client.call_tool("exec", {"command": "ps -eo args | grep -c '^sleep 3' || true"})
    assert text_of(ps).strip() == "0", text_of(ps)


async def check_log_pages_past_the_cap(client) -> None:
    """`process log` pages the whole output by line numbers of the whole output, including
    what the output cap cut from a foreground result (docs/mcp.md, `log`)."""
    result = await client.call_tool("exec", {"command": "seq 1 100000"})
    details = result.structured_content
    assert details["truncated"] is True, details
    pid = details["sessionId"]
    assert f"kept as session {pid}" in text_of(result)
    page = await client.call_tool(
        "process", {"action": "log", "sessionId": pid, "offset": 4222, "limit": 5}
    )
    text = text_of(page)
    assert text.startswith("4222\n4223\n4224\n4225\n4226\n\n[showing lines 4222-4226 of 100000"), text
    assert page.structured_content["totalLines"] == 100000
    assert page.structured_content["lines"] == [4222, 4226]
