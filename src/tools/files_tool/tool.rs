//! [`FilesTool`]: one file-tool call from request to result. Finds the session's workspace,
//! applies the session's security mode (only reads under `deny`), opens paths beneath the
//! workspace ([`Workspace`]), and shapes the result like exec's (docs/mcp.md, "File tools").

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use super::list::list;
use super::patch::{parse, PatchError};
use super::read::{is_binary, lines, SNIFF_BYTES};
use super::request::*;
use crate::config::Config;
use crate::contract::{
    BinaryFile, Denied, Details, DirListing, EntryKind, FileBytes, FileLines, FileWritten, Patched,
    Status, ToolResult,
};
use crate::files::{ConfineError, Workspace};
use crate::output::{escape_display, Redactor, Sanitizer};
use crate::policy::{compose, Layers, Security};
use crate::secrets::Secrets;
use crate::session::{SessionError, Sessions};

#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error(transparent)]
    Confine(#[from] ConfineError),
    #[error(transparent)]
    Patch(#[from] PatchError),
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A parameter out of its bounds or in conflict with another.
    #[error("{0}")]
    Request(String),
    #[error("read `{path}`")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl FilesError {
    /// Whether the caller's request is at fault (HTTP 4xx) rather than moat or the engine.
    pub fn is_callers(&self) -> bool {
        match self {
            FilesError::Confine(ConfineError::Io { .. } | ConfineError::Root { .. }) => false,
            FilesError::Confine(_) | FilesError::Patch(_) | FilesError::Request(_) => true,
            FilesError::Session(SessionError::Key(_)) => true,
            _ => false,
        }
    }
}

/// See the module docs. Cheap to clone.
#[derive(Clone)]
pub struct FilesTool {
    pub sessions: Arc<Sessions>,
    pub config: Arc<Config>,
    /// Every configured secret: file text is redacted like command output.
    pub secrets: Arc<Secrets>,
}

fn request(msg: impl Into<String>) -> FilesError {
    FilesError::Request(msg.into())
}

impl FilesTool {
    /// The session's workspace, opened; the container is made if needed, as for exec, so the
    /// workspace is prepared (owned by the sandbox user) before anything is written in it.
    async fn workspace(&self, session: &str) -> Result<Workspace, FilesError> {
        let container = self.sessions.ensure(session).await?;
        Ok(Workspace::open(&container.workspace, container.owner)?)
    }

    /// The workspace for a tool that writes: refused when the sandbox sees it read-only
    /// (`sandbox.workspace_access = "ro"`, or a host workspace created `--read-only`), since
    /// moat writing on the host would get round the mount; for the same reason the parts the
    /// sandbox sees read-only (a checkout's `.git`) refuse every write.
    async fn writable_workspace(&self, session: &str, what: &str) -> Result<Workspace, FilesError> {
        let container = self.sessions.ensure(session).await?;
        if container.read_only
            || self.config.sandbox.workspace_access == crate::config::WorkspaceAccess::Ro
        {
            return Err(request(format!(
                "{what}: the workspace of session {session} is read-only"
            )));
        }
        Ok(Workspace::open(&container.workspace, container.owner)?
            .with_read_only(container.read_only_parts.clone()))
    }

    /// The sandbox security mode in force for `session`: the config, tightened (or, with
    /// `--loosen`, replaced) by the operator's per-session override, composed as exec's
    /// (docs/policy.md, "The policy in force"). File tools take no request-level mode.
    fn security(&self, session: &str) -> Security {
        let o = self.sessions.store().session_policy(session).ok().flatten();
        let layers = Layers {
            session: o.as_ref().map(crate::store::SessionPolicy::layer),
            ..Layers::default()
        };
        compose(&self.config.policy.sandbox, layers).security
    }

    /// `None` when writes are allowed; else the refusal, worded like exec's.
    fn write_refusal(&self, session: &str, tool: &str, what: &str) -> Option<ToolResult> {
        (self.security(session) == Security::Deny).then(|| {
            ToolResult::new(
                format!(
                    "Write denied (sandbox, security is deny): {tool} {what}. Only read_file and list_dir work in this session."
                ),
                Details::Denied(Denied::new("security is deny")),
            )
        })
    }

    /// Text from the workspace as the model sees it: escape sequences and control
    /// characters stripped, secrets redacted (as command output is).
    fn shown_text(&self, bytes: &[u8]) -> String {
        let mut s = Sanitizer::new();
        let mut out = String::with_capacity(bytes.len());
        s.push(bytes, &mut out);
        s.finish(&mut out);
        Redactor::new(self.secrets.all()).redact_all(&out)
    }

    pub async fn read(&self, session: &str, req: &ReadRequest) -> Result<ToolResult, FilesError> {
        let by_bytes = req.byte_offset.is_some() || req.byte_limit.is_some();
        if by_bytes && (req.offset.is_some() || req.limit.is_some()) {
            return Err(request(
                "read a file by lines (offset, limit) and by bytes (byteOffset, byteLimit) at once: give one range",
            ));
        }
        let ws = self.workspace(session).await?;
        let (mut file, st) = ws.open_file(&req.path)?;
        let shown = escape_display(&req.path);
        let size = st.st_size.max(0) as u64;
        let read_err = |source| FilesError::Read {
            path: shown.clone(),
            source,
        };
        let mut head = vec![0u8; SNIFF_BYTES];
        let n = read_up_to(&mut file, &mut head).map_err(read_err)?;
        head.truncate(n);
        if is_binary(&head) {
            return Ok(ToolResult::new(
                format!("`{shown}` is a binary file ({size} bytes); its content is not shown."),
                Details::BinaryFile(BinaryFile {
                    binary: true,
                    path: shown,
                    size,
                    status: Status::Completed,
                }),
            ));
        }
        file.seek(SeekFrom::Start(0)).map_err(read_err)?;
        if by_bytes {
            let start = req.byte_offset.unwrap_or(0);
            let len = req.byte_limit.unwrap_or(MAX_READ_BYTES).min(MAX_READ_BYTES);
            file.seek(SeekFrom::Start(start)).map_err(read_err)?;
            let mut buf = Vec::new();
            (&mut file)
                .take(len)
                .read_to_end(&mut buf)
                .map_err(read_err)?;
            let end = start + buf.len() as u64;
            let mut text = self.shown_text(&buf);
            if end < size {
                text.push_str(&format!(
                    "\n\n[Bytes {start}-{end} of {size}; pass byteOffset={end} to read on.]"
                ));
            }
            return Ok(ToolResult::new(
                text,
                Details::FileBytes(FileBytes {
                    byte_offset: start,
                    bytes: buf.len() as u64,
                    more: end < size,
                    path: shown,
                    size,
                    status: Status::Completed,
                }),
            ));
        }
        let limit = req.limit.unwrap_or(DEFAULT_READ_LINES).max(1);
        let w = lines(
            &mut file,
            req.offset.unwrap_or(1),
            limit,
            MAX_READ_BYTES,
            MAX_SCAN_BYTES,
        )
        .map_err(read_err)?;
        let mut text = self.shown_text(&w.bytes);
        if w.scan_bound_hit {
            text = format!(
                "Line {} is past the first {} MiB of `{shown}` ({size} bytes); read it by bytes with byteOffset and byteLimit.",
                w.first_line,
                MAX_SCAN_BYTES >> 20
            );
        } else if w.more {
            let next = w.first_line + w.lines;
            text.push_str(&format!(
                "\n\n[Lines {}-{} shown; the file goes on ({size} bytes). Pass offset={next} to read on.]",
                w.first_line,
                next - 1
            ));
        } else if w.lines == 0 && size > 0 {
            text = format!(
                "`{shown}` has fewer than {} lines ({size} bytes).",
                w.first_line
            );
        }
        Ok(ToolResult::new(
            text,
            Details::FileLines(FileLines {
                lines: w.lines,
                more: w.more,
                offset: w.first_line,
                path: shown,
                size,
                status: Status::Completed,
            }),
        ))
    }

    pub async fn write(&self, session: &str, req: &WriteRequest) -> Result<ToolResult, FilesError> {
        let shown = escape_display(&req.path);
        if let Some(refused) = self.write_refusal(session, "write_file", &format!("`{shown}`")) {
            return Ok(refused);
        }
        if req.content.len() > MAX_WRITE_BYTES {
            return Err(request(format!(
                "write `{shown}`: the content is {} bytes, more than the {MAX_WRITE_BYTES} one call may write",
                req.content.len()
            )));
        }
        let ws = self
            .writable_workspace(session, &format!("write `{shown}`"))
            .await?;
        let entry = ws.entry(&req.path, req.create_dirs.unwrap_or(false))?;
        let existed = entry.regular()?.is_some();
        entry.write(req.content.as_bytes(), ws.owner())?;
        Ok(ToolResult::new(
            format!(
                "{} `{shown}` ({} bytes).",
                if existed { "Replaced" } else { "Created" },
                req.content.len()
            ),
            Details::FileWritten(FileWritten {
                bytes: req.content.len() as u64,
                created: !existed,
                path: shown,
                status: Status::Completed,
            }),
        ))
    }

    pub async fn list(&self, session: &str, req: &ListRequest) -> Result<ToolResult, FilesError> {
        let path = req.path.as_deref().filter(|p| !p.is_empty()).unwrap_or(".");
        let shown = escape_display(path);
        let limit = req
            .limit
            .map(|l| l.clamp(1, MAX_LIST_ENTRIES as u64) as usize)
            .unwrap_or(DEFAULT_LIST_ENTRIES);
        let ws = self.workspace(session).await?;
        let dir = ws.open_dir(path)?;
        let listing = list(&dir, limit, MAX_SCAN_ENTRIES).map_err(|source| FilesError::Read {
            path: shown.clone(),
            source,
        })?;
        let mut text = String::new();
        for e in &listing.entries {
            match e.kind {
                EntryKind::Dir => text.push_str(&format!("{}/\n", e.name)),
                EntryKind::File => text.push_str(&format!("{}  {} bytes\n", e.name, e.size)),
                kind => text.push_str(&format!("{}  ({kind})\n", e.name)),
            }
        }
        let more = listing.total > listing.entries.len() || listing.truncated_scan;
        if listing.entries.is_empty() {
            text.push_str(&format!("`{shown}` is empty.\n"));
        } else if more {
            text.push_str(&format!(
                "[{} of {}{} entries shown.]\n",
                listing.entries.len(),
                if listing.truncated_scan {
                    "more than "
                } else {
                    ""
                },
                listing.total
            ));
        }
        Ok(ToolResult::new(
            text,
            Details::DirListing(DirListing {
                entries: listing.entries,
                more,
                path: shown,
                status: Status::Completed,
                total: listing.total as u64,
            }),
        ))
    }

    /// Parses the patch, loads every file it names, computes all results in memory, and only
    /// then writes: a hunk that does not apply changes nothing.
    pub async fn patch(&self, session: &str, req: &PatchRequest) -> Result<ToolResult, FilesError> {
        if let Some(refused) = self.write_refusal(
            session,
            "apply_patch",
            &format!("a patch of {} bytes", req.input.len()),
        ) {
            return Ok(refused);
        }
        if req.input.len() > MAX_PATCH_BYTES {
            return Err(request(format!(
                "apply a patch of {} bytes: more than the {MAX_PATCH_BYTES} one call may carry; split it",
                req.input.len()
            )));
        }
        let patch = parse(&req.input)?;
        let paths = patch.paths();
        if paths.len() > MAX_PATCH_FILES {
            return Err(request(format!(
                "apply a patch touching {} files: more than {MAX_PATCH_FILES}; split it",
                paths.len()
            )));
        }
        let ws = self.writable_workspace(session, "apply the patch").await?;
        let mut entries = BTreeMap::new();
        let mut current = BTreeMap::new();
        for path in &paths {
            // Parents are made only for files the patch writes, and only once it applies.
            let entry = match ws.entry(path, false) {
                Ok(e) => Some(e),
                Err(ConfineError::Missing { .. }) => {
                    // Its directories are made at the end: check now that they can be.
                    ws.check_creatable(path)?;
                    None
                }
                Err(e) => return Err(e.into()),
            };
            let text = match &entry {
                None => None,
                Some(e) => match e.read(MAX_PATCH_FILE_BYTES)? {
                    None => None,
                    Some(Err(size)) => {
                        return Err(request(format!(
                            "patch `{}`: the file is {size} bytes, more than the {MAX_PATCH_FILE_BYTES} a patch may change (use write_file)",
                            e.shown
                        )))
                    }
                    Some(Ok(bytes)) => Some(String::from_utf8(bytes).map_err(|_| {
                        request(format!(
                            "patch `{}`: the file is not UTF-8 text",
                            escape_display(path)
                        ))
                    })?),
                },
            };
            entries.insert(path.clone(), entry);
            current.insert(path.clone(), text);
        }
        let changes = patch.apply(&current)?;
        // Every write first (each atomic), then the deletions, so a move never loses a file.
        let mut summary = Vec::new();
        for (path, text) in &changes {
            let Some(text) = text else { continue };
            let entry = match entries.remove(path).flatten() {
                Some(e) => e,
                None => ws.entry(path, true)?,
            };
            entry.write(text.as_bytes(), ws.owner())?;
            let verb = if current.get(path).cloned().flatten().is_some() {
                "M"
            } else {
                "A"
            };
            summary.push(format!("{verb} {}", escape_display(path)));
        }
        for (path, text) in &changes {
            if text.is_some() {
                continue;
            }
            if let Some(entry) = entries.remove(path).flatten() {
                entry.remove()?;
            }
            summary.push(format!("D {}", escape_display(path)));
        }
        let text = if summary.is_empty() {
            "The patch applied; no file changed.".to_string()
        } else {
            format!("The patch applied:\n{}", summary.join("\n"))
        };
        Ok(ToolResult::new(
            text,
            Details::Patched(Patched {
                files: summary,
                status: Status::Completed,
            }),
        ))
    }
}

/// Reads until `buf` is full or the file ends.
fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

impl FilesTool {
    /// Runs one call of any of the four tools.
    pub async fn call(&self, session: &str, call: &FileCall) -> Result<ToolResult, FilesError> {
        match call {
            FileCall::Read(r) => self.read(session, r).await,
            FileCall::Write(r) => self.write(session, r).await,
            FileCall::List(r) => self.list(session, r).await,
            FileCall::Patch(r) => self.patch(session, r).await,
        }
    }
}
