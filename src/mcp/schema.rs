//! The two tools as MCP clients see them: names, descriptions and input schemas.
//!
//! The schemas are written by hand rather than derived, because the contract (SPEC §2, §5)
//! fixes every parameter's name and JSON type, and a derived schema would add `null` to every
//! optional field. Enum-like strings (`host`, `security`, `ask`, `action`) stay plain strings
//! with their values in the description: moat trims them and ignores case, and an unknown
//! value counts as "not given", which a JSON `enum` would wrongly reject.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};

pub const EXEC: &str = "exec";
pub const PROCESS: &str = "process";

const EXEC_DESCRIPTION: &str = "\
Run a shell command in this session's sandbox: a long-lived, isolated Linux container \
(Debian, `sh -lc`, workspace mounted at /workspace, no network unless the operator enabled \
it). Files and background processes persist between calls in the same session.

Returns the command's output (stdout and stderr interleaved, ANSI stripped, capped at \
200,000 characters with the middle cut out) and its exit status. A non-zero exit, a timeout \
or a policy refusal is returned as an error result whose text says what happened.

Long-running commands: the call waits up to `yieldMs` (default 10000 ms), then returns \
status `running` with a process id (`sessionId`, e.g. `warm-river`) while the command keeps \
running. Do not re-run it; follow up with the `process` tool: `poll` for new output and the \
exit code (pass `timeout` to wait for it), `log` to page the whole output, `write` to send \
stdin, `kill` to stop it. Start servers, watchers and long builds with `background: true` to \
get the process id at once. The timeout (default 1800 s) counts from the start whether the \
command runs in the foreground or the background; pass `timeout: 0` for none. \
When a background process ends, a notification says so.

Interactive or terminal programs (REPLs, editors, TUIs, anything that checks for a TTY or \
prompts): pass `pty: true` together with `background: true`, then drive them with `process` \
`send-keys` (e.g. keys [\"C-c\"], [\"Enter\"]), `paste` and `submit`, and read the screen \
output with `poll`.

Prefer short commands with explicit `workdir` over `cd` chains, and never use `sleep` loops \
to wait: use `process poll` with `timeout` instead.";

const PROCESS_DESCRIPTION: &str = "\
Manage processes that `exec` started in this session and that are still running or recently \
finished (status `running` results, or calls with `background: true`). `sessionId` is the \
process id that `exec` returned (e.g. `warm-river`); only this session's processes are \
visible.

Actions:
- `list`: background and recently finished processes, newest first.
- `poll`: output produced since the last poll, plus the status and exit code. `timeout` \
(ms, at most 120000) waits for the process to exit or print something. Respect \
`retryInMs` in the result before polling again.
- `log`: the whole recorded output (also what the output cap cut), by line numbers of the \
whole output: `offset` is the first line (1-based), `limit` the count; without `offset` the \
last `limit` (default 200) lines.
- `write`: send `data` to stdin; `eof: true` closes stdin afterwards.
- `send-keys`: for `pty` processes: `literal` text, `hex` bytes (e.g. [\"0x1b\"]), and \
`keys` in tmux notation (Enter, Tab, Escape, BSpace, Up, Down, Left, Right, Home, End, \
PageUp, PageDown, F1-F12, C-c, M-x, S-Tab, ^D).
- `submit`: press Enter (sends CR).
- `paste`: send `text` as a bracketed paste (`bracketed: false` sends it raw).
- `kill`: terminate the process (SIGTERM to its process group, SIGKILL after 3 s).
- `clear`: forget a finished process. `remove`: kill if running, then forget.

A result for a process that failed or was killed is marked as an error; its text still \
carries the output.";

/// The server's `instructions`: what a model should know before its first call.
pub const INSTRUCTIONS: &str = "\
moat runs your shell commands in a per-session sandbox container. Use `exec` to run a \
command; if it takes longer than `yieldMs` (or you pass `background: true`) it keeps running \
and you get a process id for the `process` tool (poll, log, write, send-keys, kill). Use \
`pty: true` for programs that need a terminal. Background exits arrive as logging \
notifications (logger `moat`).";

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are JSON objects"),
    }
}

/// The `exec` input schema: exactly the parameters of SPEC §2.
pub fn exec_input() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "description": "Shell command to run (sh -lc, so pipes, && and quoting work)."
            },
            "workdir": {
                "type": "string",
                "description": "Working directory: a path under /workspace, or relative to it. Default: /workspace. Must exist."
            },
            "env": {
                "type": "object",
                "additionalProperties": { "type": "string" },
                "description": "Environment variables for this command, merged over the session's. In the sandbox, PATH entries (absolute directories) are put in front of the login PATH."
            },
            "yieldMs": {
                "type": "number",
                "description": "Milliseconds to wait before the command moves to the background and the call returns status `running` with a process id (default 10000, range 10-120000)."
            },
            "background": {
                "type": "boolean",
                "description": "Return at once with a process id; follow up with the `process` tool."
            },
            "timeout": {
                "type": "number",
                "description": "Seconds from the start before the command is killed, in the foreground or the background (default 1800; 0 disables)."
            },
            "pty": {
                "type": "boolean",
                "description": "Run in a pseudo-terminal, for programs that need a TTY (REPLs, editors, TUIs, interactive prompts). Combine with background and drive it with `process send-keys`."
            },
            "elevated": {
                "type": "boolean",
                "description": "Run on the host instead of the sandbox, if the operator enabled and allowed it (otherwise an error lists what is missing)."
            },
            "host": {
                "type": "string",
                "description": "Where to run: `auto` (= sandbox, the default), `sandbox`, or `host` (alias `gateway`). Not a machine name: other values are refused."
            },
            "security": {
                "type": "string",
                "description": "Security mode: `deny`, `allowlist` or `full`. Can only tighten the configured mode."
            },
            "ask": {
                "type": "string",
                "description": "Approval mode: `off`, `on-miss` or `always`. Can only raise the configured mode."
            }
        },
        "required": ["command"],
        "additionalProperties": false
    }))
}

/// The `process` input schema: exactly the parameters of SPEC §5.
pub fn process_input() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "description": "One of: list, poll, log, write, send-keys, submit, paste, kill, clear, remove."
            },
            "sessionId": {
                "type": "string",
                "description": "The process id returned by `exec` (e.g. `warm-river`). Required for every action but `list`."
            },
            "data": {
                "type": "string",
                "description": "write: the text to send to stdin (include \\n for a newline)."
            },
            "eof": {
                "type": "boolean",
                "description": "write: close stdin after writing."
            },
            "keys": {
                "type": "array",
                "items": { "type": "string" },
                "description": "send-keys: key names in tmux notation, e.g. [\"C-c\"], [\"Up\", \"Enter\"]."
            },
            "hex": {
                "type": "array",
                "items": { "type": "string" },
                "description": "send-keys: raw bytes as hex, e.g. [\"0x1b\", \"0d\"]."
            },
            "literal": {
                "type": "string",
                "description": "send-keys: literal text to type."
            },
            "text": {
                "type": "string",
                "description": "paste: the text to paste."
            },
            "bracketed": {
                "type": "boolean",
                "description": "paste: wrap in bracketed-paste markers (default true)."
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "log: first line to show, 1-based over the whole output (0 reads as 1)."
            },
            "limit": {
                "type": "integer",
                "minimum": 0,
                "description": "log: number of lines to show."
            },
            "timeout": {
                "type": "integer",
                "minimum": 0,
                "description": "poll: milliseconds to wait for the process to exit or print (at most 120000)."
            }
        },
        "required": ["action"],
        "additionalProperties": false
    }))
}

/// Both tools, in the order `tools/list` shows them.
pub fn tools() -> Vec<Tool> {
    let exec = Tool::new(EXEC, EXEC_DESCRIPTION, exec_input())
        .with_title("Run a shell command in the sandbox")
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        );
    let process = Tool::new(PROCESS, PROCESS_DESCRIPTION, process_input())
        .with_title("Follow up on background processes")
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        );
    vec![exec, process]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(schema: &JsonObject) -> Vec<String> {
        let mut v: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }

    #[test]
    fn exec_schema_has_the_contract_parameters() {
        let s = exec_input();
        assert_eq!(
            names(&s),
            [
                "ask",
                "background",
                "command",
                "elevated",
                "env",
                "host",
                "pty",
                "security",
                "timeout",
                "workdir",
                "yieldMs"
            ]
        );
        assert_eq!(s["required"], json!(["command"]));
        let p = &s["properties"];
        for (name, ty) in [
            ("command", "string"),
            ("workdir", "string"),
            ("env", "object"),
            ("yieldMs", "number"),
            ("background", "boolean"),
            ("timeout", "number"),
            ("pty", "boolean"),
            ("elevated", "boolean"),
            ("host", "string"),
            ("security", "string"),
            ("ask", "string"),
        ] {
            assert_eq!(p[name]["type"], ty, "{name}");
        }
        assert_eq!(p["env"]["additionalProperties"]["type"], "string");
    }

    #[test]
    fn process_schema_has_the_contract_parameters() {
        let s = process_input();
        assert_eq!(
            names(&s),
            [
                "action",
                "bracketed",
                "data",
                "eof",
                "hex",
                "keys",
                "limit",
                "literal",
                "offset",
                "sessionId",
                "text",
                "timeout"
            ]
        );
        assert_eq!(s["required"], json!(["action"]));
        assert_eq!(s["properties"]["keys"]["items"]["type"], "string");
        assert_eq!(s["properties"]["hex"]["type"], "array");
    }

    /// Every schema property must be a field the request structs accept, and the other way
    /// round (they deny unknown fields): a drift between the two would refuse valid calls.
    #[test]
    fn schemas_match_the_request_structs() {
        let exec: crate::exec::ExecRequest = serde_json::from_value(json!({
            "command": "x", "workdir": "w", "env": {"A": "1"}, "yieldMs": 10, "background": true,
            "timeout": 1, "pty": true, "elevated": false, "host": "auto", "security": "full",
            "ask": "off"
        }))
        .unwrap();
        assert_eq!(exec.command, "x");
        let process: crate::tools::ProcessRequest = serde_json::from_value(json!({
            "action": "poll", "sessionId": "a", "data": "d", "eof": true, "keys": ["Enter"],
            "hex": ["0d"], "literal": "l", "text": "t", "bracketed": false, "offset": 1,
            "limit": 2, "timeout": 3
        }))
        .unwrap();
        assert_eq!(process.action, "poll");
    }

    #[test]
    fn descriptions_teach_the_follow_up() {
        let tools = tools();
        let exec = tools[0].description.as_deref().unwrap();
        for needle in ["yieldMs", "background", "process", "poll", "pty"] {
            assert!(exec.contains(needle), "exec description lacks {needle}");
        }
        assert_eq!(tools[1].name, "process");
    }
}
