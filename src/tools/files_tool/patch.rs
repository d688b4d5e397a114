//! The `apply_patch` envelope (`*** Begin Patch … *** End Patch`): parsing it and computing
//! the files it produces. Pure: text in, edits out; the I/O shell (`tool.rs`) reads the files
//! the patch names, hands their text here, and writes back only when every hunk applied
//! (docs/mcp.md, "apply_patch").

use std::collections::BTreeMap;

/// Longest path a patch may name, in bytes (PATH_MAX on Linux).
pub const MAX_PATH_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    #[error("parse the patch at line {line}: {reason}")]
    Parse { line: usize, reason: String },
    #[error("apply hunk {hunk} to {path}: {reason}")]
    Hunk {
        path: String,
        hunk: usize,
        reason: String,
    },
    #[error("apply the patch to {path}: {reason}")]
    File { path: String, reason: String },
}

/// One line of a hunk body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` text`: must be in the file and stays.
    Context(String),
    /// `-text`: must be in the file and goes.
    Remove(String),
    /// `+text`: comes in.
    Add(String),
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hunk {
    /// The `@@ HINT` texts, outermost first: each is looked for (in order, from where the
    /// previous hunk ended) before the context, to place hunks whose context repeats.
    pub hints: Vec<String>,
    /// The body, in order.
    pub lines: Vec<HunkLine>,
    /// `*** End of File` followed: the hunk must match at the end of the file.
    pub end_of_file: bool,
}

/// One file operation, in the order the patch gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// `*** Add File:` with every line of the new file.
    Add { path: String, contents: String },
    /// `*** Delete File:`.
    Delete { path: String },
    /// `*** Update File:`, optionally `*** Move to:`, then hunks.
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// A parsed patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub ops: Vec<FileOp>,
}

impl Patch {
    /// Every path the patch reads or writes, each once, in first-seen order: what the shell
    /// must load (and confine) before [`Patch::apply`].
    pub fn paths(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut push = |p: &String| {
            if !out.contains(p) {
                out.push(p.clone());
            }
        };
        for op in &self.ops {
            match op {
                FileOp::Add { path, .. } | FileOp::Delete { path } => push(path),
                FileOp::Update { path, move_to, .. } => {
                    push(path);
                    if let Some(m) = move_to {
                        push(m);
                    }
                }
            }
        }
        out
    }

    /// Applies the operations in order to `current` (path → text, `None` for a file that does
    /// not exist) and returns the files whose final state differs: path → new text, or `None`
    /// to delete. Either every operation applies or the first failure is returned and nothing
    /// is to be written.
    pub fn apply(
        &self,
        current: &BTreeMap<String, Option<String>>,
    ) -> Result<BTreeMap<String, Option<String>>, PatchError> {
        let mut state = current.clone();
        let file_err = |path: &str, reason: &str| PatchError::File {
            path: crate::output::escape_display(path),
            reason: reason.to_string(),
        };
        for op in &self.ops {
            match op {
                FileOp::Add { path, contents } => {
                    if state.get(path).is_some_and(Option::is_some) {
                        return Err(file_err(
                            path,
                            "the file already exists (use *** Update File: to change it)",
                        ));
                    }
                    state.insert(path.clone(), Some(contents.clone()));
                }
                FileOp::Delete { path } => {
                    if !state.get(path).is_some_and(Option::is_some) {
                        return Err(file_err(path, "there is no such file to delete"));
                    }
                    state.insert(path.clone(), None);
                }
                FileOp::Update {
                    path,
                    move_to,
                    hunks,
                } => {
                    let Some(Some(old)) = state.get(path) else {
                        return Err(file_err(path, "there is no such file to update"));
                    };
                    let new = apply_hunks(path, old, hunks)?;
                    match move_to {
                        Some(dest) if dest != path => {
                            if state.get(dest).is_some_and(Option::is_some) {
                                return Err(file_err(
                                    dest,
                                    "the destination of *** Move to: already exists",
                                ));
                            }
                            state.insert(path.clone(), None);
                            state.insert(dest.clone(), Some(new));
                        }
                        _ => {
                            state.insert(path.clone(), Some(new));
                        }
                    }
                }
            }
        }
        Ok(state
            .into_iter()
            .filter(|(p, v)| current.get(p).cloned().flatten() != *v)
            .collect())
    }
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARK: &str = "*** End of File";

/// Parses the envelope. Blank lines around it are ignored; markers are matched with their
/// surrounding whitespace trimmed, since models indent them now and then.
pub fn parse(text: &str) -> Result<Patch, PatchError> {
    let lines: Vec<&str> = text.lines().collect();
    let err = |i: usize, reason: &str| PatchError::Parse {
        line: i + 1,
        reason: reason.to_string(),
    };
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return Err(err(
            0,
            "the patch is empty (it must start with *** Begin Patch)",
        ));
    };
    if lines[first].trim() != BEGIN {
        return Err(err(first, "the first line must be *** Begin Patch"));
    }
    if last == first || lines[last].trim() != END {
        return Err(err(last, "the last line must be *** End Patch"));
    }
    let mut ops = Vec::new();
    let mut i = first + 1;
    while i < last {
        let line = lines[i].trim();
        if line.is_empty() {
            i += 1;
            continue;
        }
        if let Some(p) = line.strip_prefix(ADD.trim_end()) {
            let path = check_path(p, i)?;
            i += 1;
            let mut contents = String::new();
            while i < last && !is_marker(lines[i]) {
                if trailing_blanks(&lines, i, last) {
                    i = skip_blanks(&lines, i, last);
                    break;
                }
                let Some(text) = lines[i].strip_prefix('+') else {
                    return Err(err(i, "every line of an added file must start with +"));
                };
                contents.push_str(text);
                contents.push('\n');
                i += 1;
            }
            ops.push(FileOp::Add { path, contents });
        } else if let Some(p) = line.strip_prefix(DELETE.trim_end()) {
            ops.push(FileOp::Delete {
                path: check_path(p, i)?,
            });
            i += 1;
        } else if let Some(p) = line.strip_prefix(UPDATE.trim_end()) {
            let path = check_path(p, i)?;
            let start = i;
            i += 1;
            let mut move_to = None;
            if i < last {
                if let Some(m) = lines[i].trim().strip_prefix(MOVE.trim_end()) {
                    move_to = Some(check_path(m, i)?);
                    i += 1;
                }
            }
            let (hunks, next) = parse_hunks(&lines, i, last)?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(err(start, "an update must have at least one hunk"));
            }
            i = next;
            ops.push(FileOp::Update {
                path,
                move_to,
                hunks,
            });
        } else {
            return Err(err(
                i,
                "expected *** Add File:, *** Delete File: or *** Update File:",
            ));
        }
    }
    if ops.is_empty() {
        return Err(err(first, "the patch has no file operations"));
    }
    Ok(Patch { ops })
}

/// A line that starts the next file operation (or ends the patch).
fn is_marker(line: &str) -> bool {
    let t = line.trim();
    t == END
        || t.starts_with(ADD.trim_end())
        || t.starts_with(DELETE.trim_end())
        || t.starts_with(UPDATE.trim_end())
}

/// Whether line `i` starts a run of blank lines that ends at the next file operation or at
/// the end of the patch: separators between operations, not part of a file.
fn trailing_blanks(lines: &[&str], i: usize, last: usize) -> bool {
    let j = skip_blanks(lines, i, last);
    j > i && (j == last || is_marker(lines[j]))
}

fn skip_blanks(lines: &[&str], mut i: usize, last: usize) -> usize {
    while i < last && lines[i].trim().is_empty() {
        i += 1;
    }
    i
}

/// The hunks of one update, from line `i` up to the next file operation; returns them and the
/// index of that next line.
fn parse_hunks(
    lines: &[&str],
    mut i: usize,
    last: usize,
) -> Result<(Vec<Hunk>, usize), PatchError> {
    let err = |i: usize, reason: &str| PatchError::Parse {
        line: i + 1,
        reason: reason.to_string(),
    };
    let mut hunks: Vec<Hunk> = Vec::new();
    // Whether the current hunk was opened (by `@@`, or by a body line for a first hunk that
    // omits it) and has no body yet, so a further `@@ hint` stacks onto it.
    let mut open = false;
    while i < last && !is_marker(lines[i]) {
        if trailing_blanks(lines, i, last) {
            i = skip_blanks(lines, i, last);
            break;
        }
        let line = lines[i];
        if line.trim_start().starts_with("@@") {
            let hint = line.trim().trim_start_matches("@@").trim();
            // `@@ … @@` as unified diffs write it: the part between is line numbers.
            let hint = hint.strip_suffix("@@").map(str::trim).unwrap_or(hint);
            let stack = open && hunks.last().is_some_and(|h| h.lines.is_empty());
            if !stack {
                hunks.push(Hunk::default());
            }
            if !hint.is_empty() && !hint.starts_with('-') {
                hunks
                    .last_mut()
                    .expect("pushed")
                    .hints
                    .push(hint.to_string());
            }
            open = true;
        } else if line.trim() == EOF_MARK {
            let Some(h) = hunks.last_mut().filter(|h| !h.lines.is_empty()) else {
                return Err(err(i, "*** End of File must follow a hunk's lines"));
            };
            h.end_of_file = true;
            open = false;
        } else {
            let body =
                match line.chars().next() {
                    Some(' ') => HunkLine::Context(line[1..].to_string()),
                    Some('-') => HunkLine::Remove(line[1..].to_string()),
                    Some('+') => HunkLine::Add(line[1..].to_string()),
                    // Models often drop the space of an empty context line.
                    None => HunkLine::Context(String::new()),
                    Some(_) => return Err(err(
                        i,
                        "a hunk line must start with a space, - or + (or be @@, *** End of File)",
                    )),
                };
            if !open {
                if hunks.last().is_some_and(|h| h.end_of_file) {
                    return Err(err(i, "lines after *** End of File need a new @@"));
                }
                if !hunks.is_empty() {
                    // Continuing the previous hunk after no `@@`: still one hunk.
                } else {
                    hunks.push(Hunk::default());
                }
                open = true;
            }
            hunks.last_mut().expect("opened").lines.push(body);
        }
        i += 1;
    }
    if let Some(n) = hunks.iter().position(|h| h.lines.is_empty()) {
        return Err(PatchError::Parse {
            line: i + 1,
            reason: format!("hunk {} has no lines", n + 1),
        });
    }
    Ok((hunks, i))
}

fn check_path(p: &str, i: usize) -> Result<String, PatchError> {
    let p = p.trim();
    let err = |reason: &str| PatchError::Parse {
        line: i + 1,
        reason: reason.to_string(),
    };
    if p.is_empty() {
        return Err(err("the file operation names no path"));
    }
    if p.len() > MAX_PATH_BYTES {
        return Err(err("the path is longer than 4096 bytes"));
    }
    if p.contains('\0') {
        return Err(err("the path contains a NUL byte"));
    }
    Ok(p.to_string())
}

/// How strictly a context line must equal the file's line; each hunk tries them in order.
#[derive(Clone, Copy)]
enum Fuzz {
    Exact,
    TrimEnd,
    Trim,
}

impl Fuzz {
    fn eq(self, file: &str, want: &str) -> bool {
        match self {
            Fuzz::Exact => file == want,
            Fuzz::TrimEnd => file.trim_end() == want.trim_end(),
            Fuzz::Trim => file.trim() == want.trim(),
        }
    }
}

const FUZZES: [Fuzz; 3] = [Fuzz::Exact, Fuzz::TrimEnd, Fuzz::Trim];

/// The first index at or after `from` where `want` matches `file`, trying each fuzz level in
/// turn; with `at_end`, only the position that ends at the end of the file counts.
fn seek(file: &[String], want: &[String], from: usize, at_end: bool) -> Option<usize> {
    if want.len() > file.len() {
        return None;
    }
    let last = file.len() - want.len();
    for fuzz in FUZZES {
        let fits = |at: usize| want.iter().zip(&file[at..]).all(|(w, f)| fuzz.eq(f, w));
        if at_end {
            if last >= from && fits(last) {
                return Some(last);
            }
            continue;
        }
        if let Some(at) = (from..=last).find(|&at| fits(at)) {
            return Some(at);
        }
    }
    None
}

/// The hunks applied to `text`, in order, each searched from where the previous one ended.
fn apply_hunks(path: &str, text: &str, hunks: &[Hunk]) -> Result<String, PatchError> {
    let crlf = text.contains("\r\n");
    let ends_nl = text.is_empty() || text.ends_with('\n');
    let mut file: Vec<String> = text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect();
    let mut cursor = 0;
    // (start, old length, new lines), in file order.
    let mut edits: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for (n, hunk) in hunks.iter().enumerate() {
        let fail = |reason: String| PatchError::Hunk {
            path: crate::output::escape_display(path),
            hunk: n + 1,
            reason,
        };
        for hint in &hunk.hints {
            let want = [hint.clone()];
            match seek(&file, &want, cursor, false) {
                Some(at) => cursor = at + 1,
                None => {
                    return Err(fail(format!(
                        "its @@ line `{}` was not found in the file",
                        crate::output::escape_display(hint)
                    )))
                }
            }
        }
        let mut body: Vec<HunkLine> = hunk.lines.clone();
        let old_of = |body: &[HunkLine]| -> Vec<String> {
            body.iter()
                .filter_map(|l| match l {
                    HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.clone()),
                    HunkLine::Add(_) => None,
                })
                .collect()
        };
        let mut old = old_of(&body);
        let found = if old.is_empty() {
            // Pure addition: after the hints' place, or at the end of the file.
            Some(if hunk.hints.is_empty() || hunk.end_of_file {
                file.len()
            } else {
                cursor
            })
        } else {
            seek(&file, &old, cursor, hunk.end_of_file).or_else(|| {
                // A trailing empty context line stands for the file's final newline.
                if body.last() == Some(&HunkLine::Context(String::new())) {
                    body.pop();
                    old = old_of(&body);
                    seek(&file, &old, cursor, hunk.end_of_file)
                } else {
                    None
                }
            })
        };
        let Some(at) = found else {
            let first = old.first().map(String::as_str).unwrap_or("");
            let place = if hunk.end_of_file {
                " at the end of the file"
            } else if cursor > 0 {
                " after the previous hunk"
            } else {
                ""
            };
            return Err(fail(format!(
                "its {} context and removed lines (starting with `{}`) were not found{place}; the file is unchanged — read it again and patch its current text",
                old.len(),
                crate::output::escape_display(first)
            )));
        };
        // Context lines keep the file's own text (they matched perhaps only up to
        // whitespace); added lines come from the patch.
        let mut new = Vec::new();
        let mut k = at;
        for l in &body {
            match l {
                HunkLine::Context(_) => {
                    new.push(file[k].clone());
                    k += 1;
                }
                HunkLine::Remove(_) => k += 1,
                HunkLine::Add(t) => new.push(t.clone()),
            }
        }
        cursor = at + old.len();
        edits.push((at, old.len(), new));
    }
    for (at, len, new) in edits.into_iter().rev() {
        file.splice(at..at + len, new);
    }
    let nl = if crlf { "\r\n" } else { "\n" };
    let mut out = file.join(nl);
    if !file.is_empty() && ends_nl {
        out.push_str(nl);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
