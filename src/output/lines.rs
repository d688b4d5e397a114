//! Line paging for `process log`.

/// Lines shown when the caller gives no limit.
pub const DEFAULT_PAGE_LINES: usize = 200;

/// One page of a process's output.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Page {
    /// The selected lines joined with `\n`, without a trailing newline.
    pub text: String,
    /// Lines in the whole text, so the caller can say where this page sits.
    pub total_lines: usize,
    /// 0-based index of the first line shown.
    pub start: usize,
    /// 0-based index one past the last line shown (`start == end` for an empty page).
    pub end: usize,
    /// Hint shown after the text when the page was cut by a default, e.g. `showing last 200 of
    /// 512 lines; pass offset/limit to page`, so the agent knows there is more.
    pub note: Option<String>,
}

impl Page {
    /// The text followed by the note in brackets (after a blank line), as the tool shows it.
    pub fn render(&self) -> String {
        match &self.note {
            Some(note) => format!("{}\n\n[{note}]", self.text),
            None => self.text.clone(),
        }
    }
}

/// Selects lines of `text`.
///
/// - no offset, no limit: the last [`DEFAULT_PAGE_LINES`] lines, with a note when more exist;
/// - `limit` only: the last `limit` lines;
/// - `offset` (0-based line index) with or without `limit`: `limit` lines from there (default
///   [`DEFAULT_PAGE_LINES`], with a note when more lines follow).
///
/// Lines end at `\n`; a `\r` before it is dropped and a final newline does not start an extra
/// empty line.
pub fn page(text: &str, offset: Option<usize>, limit: Option<usize>) -> Page {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let total = if text.is_empty() {
        0
    } else {
        count_newlines(body) + 1
    };
    let (start, end) = match (offset, limit) {
        (None, None) => (total.saturating_sub(DEFAULT_PAGE_LINES), total),
        (None, Some(limit)) => (total.saturating_sub(limit), total),
        (Some(offset), limit) => {
            let start = offset.min(total);
            let len = limit.unwrap_or(DEFAULT_PAGE_LINES);
            (start, start.saturating_add(len).min(total))
        }
    };
    let note = match (offset, limit) {
        (None, None) if total > DEFAULT_PAGE_LINES => Some(format!(
            "showing last {DEFAULT_PAGE_LINES} of {total} lines; pass offset/limit to page"
        )),
        (Some(_), None) if end < total => Some(format!(
            "showing lines {}-{} of {total}; pass offset/limit to page",
            start + 1,
            end
        )),
        _ => None,
    };
    let text = if start < end {
        let from = line_start(body, start);
        let to = line_start(body, end);
        // Before the last line, `to` is just past the newline ending the last selected line.
        let to = if end < total { to - 1 } else { to };
        let slice = &body[from..to];
        join_lines(slice)
    } else {
        String::new()
    };
    Page {
        text,
        total_lines: total,
        start,
        end,
        note,
    }
}

fn count_newlines(s: &str) -> usize {
    s.as_bytes().iter().filter(|b| **b == b'\n').count()
}

/// Byte offset of line `n` in `body` (`body.len()` when `n` is past the last line).
fn line_start(body: &str, n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    body.match_indices('\n')
        .nth(n - 1)
        .map_or(body.len(), |(i, _)| i + 1)
}

/// Copies `slice`, dropping the `\r` of each `\r\n`.
fn join_lines(slice: &str) -> String {
    if !slice.contains('\r') {
        return slice.to_owned();
    }
    let mut out = String::with_capacity(slice.len());
    for (i, line) in slice.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
    }
    out
}

#[cfg(test)]
mod tests;
