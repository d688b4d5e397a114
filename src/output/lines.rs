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

/// Lines `process log` shows, as 1-based line numbers of the whole output: `[start, end)`.
///
/// `first` is the first line the record still holds (1 unless spill freed older output) and
/// `last` the last line (0 for no output). `offset` is the first line to show, 1-based (0 is
/// taken as 1, so a caller counting from 0 sees one line more, never one less); without it the
/// page is the last `limit` lines (default [`DEFAULT_PAGE_LINES`]).
pub fn line_window(first: u64, last: u64, offset: Option<u64>, limit: Option<u64>) -> (u64, u64) {
    let end_all = last + 1;
    match offset {
        None => {
            let n = limit.unwrap_or(DEFAULT_PAGE_LINES as u64);
            (end_all.saturating_sub(n).max(first), end_all)
        }
        Some(o) => {
            let start = o.max(1).max(first);
            let n = limit.unwrap_or(DEFAULT_PAGE_LINES as u64);
            let end = start.saturating_add(n).min(end_all).max(start.min(end_all));
            (start.min(end_all), end)
        }
    }
}

/// Collects lines `[from, to)` of a text streamed in chunks whose first line is `first`, up to
/// `budget` bytes (cut at a character boundary). A `\r` ending a line is dropped.
#[derive(Debug)]
pub struct LineCollector {
    /// First line number to keep.
    from: u64,
    /// One past the last line number to keep.
    to: u64,
    /// Number of the line the next byte belongs to.
    current: u64,
    /// Bytes the page may hold, so one enormous line cannot blow up a result.
    budget: usize,
    /// The kept text.
    out: String,
    /// Whether the budget cut the page.
    cut: bool,
    /// Characters of line `from` not to keep (the page reads on inside a long line).
    skip: u64,
    /// Characters of the current line seen so far (kept or skipped).
    col: u64,
    /// Where the budget cut the page inside a line: its number and the character the next
    /// page starts at.
    resume: Option<(u64, u64)>,
}

impl LineCollector {
    pub fn new(first: u64, from: u64, to: u64, budget: usize) -> Self {
        Self {
            from,
            to,
            current: first,
            budget,
            out: String::new(),
            cut: false,
            skip: 0,
            col: 0,
            resume: None,
        }
    }

    /// Starts the page `chars` characters into its first line.
    pub fn skipping(mut self, chars: u64) -> Self {
        self.skip = chars;
        self
    }

    /// The line and character the next page starts at when the budget cut this one inside a
    /// line.
    pub fn resume(&self) -> Option<(u64, u64)> {
        self.resume
    }

    /// Whether nothing more can be kept (the stream may stop).
    pub fn done(&self) -> bool {
        self.current >= self.to || self.cut
    }

    pub fn push(&mut self, text: &str) {
        for piece in text.split_inclusive('\n') {
            if self.done() {
                return;
            }
            let ends_line = piece.ends_with('\n');
            if self.current >= self.from {
                let mut body = if ends_line {
                    let line = &piece[..piece.len() - 1];
                    line.strip_suffix('\r').unwrap_or(line)
                } else {
                    piece
                };
                if self.current == self.from && self.col < self.skip {
                    let want = (self.skip - self.col) as usize;
                    let at = body.char_indices().nth(want).map_or(body.len(), |(i, _)| i);
                    self.col += body[..at].chars().count() as u64;
                    body = &body[at..];
                }
                let kept = self.keep(body);
                if self.cut && kept < body.len() {
                    let col = self.col + body[..kept].chars().count() as u64;
                    self.resume = Some((self.current, col));
                }
                self.col += body.chars().count() as u64;
                if ends_line && !self.cut && self.current + 1 < self.to {
                    self.keep("\n");
                }
            }
            if ends_line {
                self.current += 1;
                self.col = 0;
            }
        }
    }

    /// Keeps what fits of `s`; returns how many of its bytes were kept.
    fn keep(&mut self, s: &str) -> usize {
        let room = self.budget.saturating_sub(self.out.len());
        if s.len() <= room {
            self.out.push_str(s);
            return s.len();
        }
        let mut cut = room;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.out.push_str(&s[..cut]);
        self.cut = true;
        cut
    }

    /// The kept text (without a final newline) and whether the budget cut it.
    pub fn finish(self) -> (String, bool) {
        (self.out, self.cut)
    }
}

/// Counts the lines of a text streamed in chunks: newlines, plus a last line without one.
#[derive(Debug, Default)]
pub struct LineCounter {
    newlines: u64,
    /// Whether text follows the last newline.
    open_line: bool,
}

impl LineCounter {
    pub fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.newlines += text.bytes().filter(|b| *b == b'\n').count() as u64;
        self.open_line = !text.ends_with('\n');
    }

    /// Number of lines.
    pub fn lines(&self) -> u64 {
        self.newlines + u64::from(self.open_line)
    }
}
