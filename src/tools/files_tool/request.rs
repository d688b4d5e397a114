//! The file tools' parameters as agents send them (MCP arguments, HTTP bodies), and the
//! bounds on each (docs/mcp.md, "File tools"). Unknown fields are refused: a misspelt
//! parameter must not be silently ignored.

use serde::{Deserialize, Serialize};

/// Most bytes `write_file` writes in one call (its JSON must also fit in a 1 MiB body).
pub const MAX_WRITE_BYTES: usize = 512 << 10;
/// Longest `apply_patch` input, in bytes.
pub const MAX_PATCH_BYTES: usize = 512 << 10;
/// Most files one patch may touch.
pub const MAX_PATCH_FILES: usize = 64;
/// Largest file a patch may update, in bytes: it is read whole into memory.
pub const MAX_PATCH_FILE_BYTES: u64 = 8 << 20;
/// Most text `read_file` returns in one call, in bytes (before sanitizing).
pub const MAX_READ_BYTES: u64 = 256 << 10;
/// Lines `read_file` returns when no `limit` is given.
pub const DEFAULT_READ_LINES: u64 = 2000;
/// Most bytes a line-range read scans from the start of the file to find its lines.
pub const MAX_SCAN_BYTES: u64 = 64 << 20;
/// Entries `list_dir` shows when no `limit` is given, and the most it ever shows.
pub const DEFAULT_LIST_ENTRIES: usize = 200;
pub const MAX_LIST_ENTRIES: usize = 2000;
/// Most names `list_dir` reads from one directory (to sort them); past it the listing says so.
pub const MAX_SCAN_ENTRIES: usize = 100_000;

/// `read_file`: a line range (`offset`, `limit`) or a byte range (`byteOffset`, `byteLimit`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadRequest {
    /// Relative to /workspace, or absolute under it.
    #[serde(default)]
    pub path: String,
    /// First line, 1-based (0 reads as 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Number of lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// First byte, 0-based; for files whose lines are too long or too many to page by line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_offset: Option<u64>,
    /// Number of bytes (at most [`MAX_READ_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_limit: Option<u64>,
}

/// `write_file`: the whole new content of one file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteRequest {
    #[serde(default)]
    pub path: String,
    /// The file's entire new text; required, so a forgotten field never empties a file.
    pub content: String,
    /// Make missing parent directories instead of failing; off by default so a typo in a
    /// directory name is an error rather than a new tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_dirs: Option<bool>,
}

/// `list_dir`: one directory's entries.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListRequest {
    /// Default: the workspace itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Most entries to show (default [`DEFAULT_LIST_ENTRIES`], at most [`MAX_LIST_ENTRIES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// `apply_patch`: named `input` as the tool agents are trained on names it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchRequest {
    /// The `*** Begin Patch … *** End Patch` text.
    #[serde(default)]
    pub input: String,
}

/// One file-tool call, as the MCP server hands it to its backend (in-process, or the daemon's
/// `files/<endpoint>` over its socket).
#[derive(Debug, Clone, PartialEq)]
pub enum FileCall {
    Read(ReadRequest),
    Write(WriteRequest),
    List(ListRequest),
    Patch(PatchRequest),
}

impl FileCall {
    /// The last segment of its HTTP endpoint, `/v1/sessions/{session}/files/<this>`.
    pub fn endpoint(&self) -> &'static str {
        match self {
            FileCall::Read(_) => "read",
            FileCall::Write(_) => "write",
            FileCall::List(_) => "list",
            FileCall::Patch(_) => "patch",
        }
    }

    /// The request body for that endpoint.
    pub fn body(&self) -> Result<serde_json::Value, serde_json::Error> {
        match self {
            FileCall::Read(r) => serde_json::to_value(r),
            FileCall::Write(r) => serde_json::to_value(r),
            FileCall::List(r) => serde_json::to_value(r),
            FileCall::Patch(r) => serde_json::to_value(r),
        }
    }
}
