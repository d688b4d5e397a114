//! The tools as MCP clients see them: names, descriptions and input schemas.
//!
//! The schemas are written by hand rather than derived, because the contract (docs/mcp.md, "Tools")
//! fixes every parameter's name and JSON type, and a derived schema would add `null` to every
//! optional field. Enum-like strings (`host`, `security`, `ask`, `action`) stay plain strings
//! with their values in the description: moat trims them and ignores case, and an unknown
//! value counts as "not given", which a JSON `enum` would wrongly reject.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};

pub const EXEC: &str = "exec";
pub const PROCESS: &str = "process";
pub const READ_FILE: &str = "read_file";
pub const WRITE_FILE: &str = "write_file";
pub const LIST_DIR: &str = "list_dir";
pub const APPLY_PATCH: &str = "apply_patch";

/// What every file tool's description says about paths (docs/mcp.md, "File tools").
const PATHS: &str = "Paths are relative to /workspace (this session's workspace) or absolute \
under /workspace; `..` above it and symbolic links that lead out of it (absolute ones \
included) are refused.";

const READ_FILE_DESCRIPTION: &str = "\
Read a text file from the workspace. By default the first 2000 lines; page with `offset` (first \
line, 1-based) and `limit` (line count), or read a byte range with `byteOffset` and \
`byteLimit` (for very long lines). At most 256 KiB per call; the result says how to read on. \
A binary file is reported as binary with its size, not shown. Control characters are stripped \
and secrets redacted, as in command output.";

const WRITE_FILE_DESCRIPTION: &str = "\
Write a whole file in the workspace, replacing it atomically if it exists (at most 512 KiB). \
Missing parent directories are an error unless `createDirs` is true. The file belongs to the \
sandbox user, like files commands create. For small changes to an existing file prefer \
`apply_patch`.";

const LIST_DIR_DESCRIPTION: &str = "\
List a directory of the workspace (default: /workspace itself): names sorted, directories \
with a trailing /, files with their size, symlinks and others marked. At most `limit` entries \
(default 200, at most 2000).";

const APPLY_PATCH_DESCRIPTION: &str = "\
Edit files in the workspace with a patch in this format (the whole patch applies, or nothing \
changes and the error names the file and the hunk):

*** Begin Patch
*** Add File: path/new.txt
+every line of the new file, each starting with +
*** Update File: path/old.py
*** Move to: path/renamed.py   (optional)
@@ def some_function():        (optional hint: a line above the change)
 context line (starts with a space)
-removed line
+added line
*** Delete File: path/gone.txt
*** End Patch

Give about three lines of context before and after each change; several `@@` hunks per file \
are applied in order. `*** End of File` after a hunk anchors it at the end of the file.";

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
notifications (logger `moat`). Read, write, list and patch files in /workspace with \
`read_file`, `write_file`, `list_dir` and `apply_patch` rather than through shell quoting.";

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are JSON objects"),
    }
}

/// The `exec` input schema: exactly the parameters docs/mcp.md lists.
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
                "description": "Where to run: `auto` (= sandbox, the default), `sandbox`, `host` (alias `gateway`), or `node` (a remote node the operator paired, named by `node`). Not a machine name: other values are refused."
            },
            "node": {
                "type": "string",
                "description": "With host=node: the paired node to run on (the operator's default when omitted). Its own policy and approvals decide; follow up with `process` and the same `node`."
            },
            "nodeHost": {
                "type": "string",
                "description": "With host=node: `sandbox` (the default, a sandbox on the node) or `host` (the node's host, if its operator allows this gateway)."
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

/// The `process` input schema: exactly the parameters docs/mcp.md lists.
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
            "charOffset": {
                "type": "integer",
                "minimum": 0,
                "description": "log: start this many characters into the line `offset`, to read on inside a line longer than a page (the page's note says where)."
            },
            "timeout": {
                "type": "integer",
                "minimum": 0,
                "description": "poll: milliseconds to wait for the process to exit or print (at most 120000)."
            },
            "node": {
                "type": "string",
                "description": "The paired node the process runs on, for one an exec with host=node started."
            }
        },
        "required": ["action"],
        "additionalProperties": false
    }))
}

fn path_property(what: &str) -> Value {
    json!({
        "type": "string",
        "description": format!("{what} {PATHS}")
    })
}

/// The `read_file` input schema.
pub fn read_file_input() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "path": path_property("The file to read."),
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "First line to show, 1-based (default 1)."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Number of lines to show (default 2000)."
            },
            "byteOffset": {
                "type": "integer",
                "minimum": 0,
                "description": "Read by bytes instead: the first byte, 0-based. Not with offset/limit."
            },
            "byteLimit": {
                "type": "integer",
                "minimum": 1,
                "description": "Read by bytes: how many (at most 262144)."
            }
        },
        "required": ["path"],
        "additionalProperties": false
    }))
}

/// The `write_file` input schema.
pub fn write_file_input() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "path": path_property("The file to write."),
            "content": {
                "type": "string",
                "description": "The file's entire new content."
            },
            "createDirs": {
                "type": "boolean",
                "description": "Create missing parent directories (default false)."
            }
        },
        "required": ["path", "content"],
        "additionalProperties": false
    }))
}

/// The `list_dir` input schema.
pub fn list_dir_input() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "path": path_property("The directory to list (default: /workspace)."),
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Most entries to show (default 200, at most 2000)."
            }
        },
        "additionalProperties": false
    }))
}

/// The `apply_patch` input schema: one string named `input`, as agents are trained to send.
pub fn apply_patch_input() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "description": "The patch, from *** Begin Patch to *** End Patch."
            }
        },
        "required": ["input"],
        "additionalProperties": false
    }))
}

/// The file tools, in the order `tools/list` shows them (after exec and process).
fn file_tools() -> Vec<Tool> {
    let read_only = |read_only: bool, destructive: bool| {
        ToolAnnotations::new()
            .read_only(read_only)
            .destructive(destructive)
            .idempotent(read_only)
            .open_world(false)
    };
    vec![
        Tool::new(READ_FILE, READ_FILE_DESCRIPTION, read_file_input())
            .with_title("Read a file in the workspace")
            .with_annotations(read_only(true, false)),
        Tool::new(WRITE_FILE, WRITE_FILE_DESCRIPTION, write_file_input())
            .with_title("Write a file in the workspace")
            .with_annotations(read_only(false, true)),
        Tool::new(LIST_DIR, LIST_DIR_DESCRIPTION, list_dir_input())
            .with_title("List a directory in the workspace")
            .with_annotations(read_only(true, false)),
        Tool::new(APPLY_PATCH, APPLY_PATCH_DESCRIPTION, apply_patch_input())
            .with_title("Patch files in the workspace")
            .with_annotations(read_only(false, true)),
    ]
}

/// Every tool, in the order `tools/list` shows them.
pub fn tools() -> Vec<Tool> {
    tools_for(true)
}

/// What exec's description adds on a server without the process tool: the model must not
/// plan on backgrounding (docs/mcp.md, "Without the process tool").
pub const WITHOUT_PROCESS_NOTE: &str = "\n\nThis server has no `process` tool: every command runs \
to its end before the call returns; `yieldMs` and `background` are ignored.";

/// The tools one server lists: without `process` when `process_tool` is off, and then exec's
/// description says that it runs every command to its end.
pub fn tools_for(process_tool: bool) -> Vec<Tool> {
    let exec_description = if process_tool {
        EXEC_DESCRIPTION.to_string()
    } else {
        format!("{EXEC_DESCRIPTION}{WITHOUT_PROCESS_NOTE}")
    };
    let exec = Tool::new(EXEC, exec_description, exec_input())
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
    let mut all = vec![exec];
    if process_tool {
        all.push(process);
    }
    all.extend(file_tools());
    all
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
                "node",
                "nodeHost",
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
                "charOffset",
                "data",
                "eof",
                "hex",
                "keys",
                "limit",
                "literal",
                "node",
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
        let exec: crate::tools::ExecRequest = serde_json::from_value(json!({
            "command": "x", "workdir": "w", "env": {"A": "1"}, "yieldMs": 10, "background": true,
            "timeout": 1, "pty": true, "elevated": false, "host": "auto", "security": "full",
            "ask": "off", "node": "n1", "nodeHost": "sandbox"
        }))
        .unwrap();
        assert_eq!(exec.command, "x");
        let process: crate::tools::ProcessRequest = serde_json::from_value(json!({
            "action": "poll", "sessionId": "a", "data": "d", "eof": true, "keys": ["Enter"],
            "hex": ["0d"], "literal": "l", "text": "t", "bracketed": false, "offset": 1,
            "limit": 2, "timeout": 3, "charOffset": 4, "node": "n1"
        }))
        .unwrap();
        assert_eq!(process.action, "poll");
    }

    #[test]
    fn file_schemas_match_their_request_structs() {
        let rows: [(Arc<JsonObject>, &[&str], &[&str]); 4] = [
            (
                read_file_input(),
                &["byteLimit", "byteOffset", "limit", "offset", "path"],
                &["path"],
            ),
            (
                write_file_input(),
                &["content", "createDirs", "path"],
                &["path", "content"],
            ),
            (list_dir_input(), &["limit", "path"], &[]),
            (apply_patch_input(), &["input"], &["input"]),
        ];
        for (schema, props, required) in rows {
            assert_eq!(names(&schema), props);
            assert_eq!(schema["additionalProperties"], false);
            let req = schema.get("required").cloned().unwrap_or(json!([]));
            assert_eq!(req, json!(required));
        }
        let _: crate::tools::ReadRequest = serde_json::from_value(json!({
            "path": "p", "offset": 1, "limit": 2, "byteOffset": 3, "byteLimit": 4
        }))
        .unwrap();
        let _: crate::tools::WriteRequest =
            serde_json::from_value(json!({"path": "p", "content": "c", "createDirs": true}))
                .unwrap();
        let _: crate::tools::ListRequest =
            serde_json::from_value(json!({"path": "p", "limit": 1})).unwrap();
        let _: crate::tools::PatchRequest = serde_json::from_value(json!({"input": "i"})).unwrap();
        assert!(
            serde_json::from_value::<crate::tools::PatchRequest>(json!({"patch": "i"})).is_err()
        );
        let names: Vec<_> = tools().iter().map(|t| t.name.to_string()).collect();
        assert_eq!(
            names,
            [
                "exec",
                "process",
                "read_file",
                "write_file",
                "list_dir",
                "apply_patch"
            ]
        );
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
