//! One process's output as moat holds it in memory: sanitized, redacted, capped.
//!
//! Raw bytes come from the log file at increasing offsets. Each chunk is sanitized once and
//! then feeds two capped views (`shelf::Views`): `aggregated` (the whole run, head + tail) and
//! `pending` (what the next `poll` drains). Memory is bounded by two caps, whatever the command
//! prints, and by less once it ended: a finished process's views are compacted, or shelved
//! when its log can give them back (`shelf`).

use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;

use super::shelf::{Counts, Note, Replay, Shelved, Views};
use crate::output::{Redactor, Sanitizer};

/// Raw bytes between two line marks: `process log` re-reads at most this much before the start
/// of the record, and the marks of a 64 MiB record take a few kilobytes.
const MARK_SPACING: u64 = 64 << 10;
/// Most marks kept; past it every other one is dropped (the spacing doubles), so an unbounded
/// spill setting cannot grow the index without bound.
const MAX_MARKS: usize = 4096;
/// Raw bytes sanitized and redacted at a time: the reused buffers grow to about this much,
/// not to the size of the largest read (a megabyte), in every process that ever printed one.
const SLICE: usize = 64 << 10;
/// A finished process's views that hold more than this are shelved when they can be
/// replayed; smaller ones stay (a replay would cost more than they do).
pub const SHELVE_ABOVE: usize = 16 << 10;
/// Most log data a replay reads (a sparse log's holes are not read): a record holding more
/// keeps its views compacted instead, so no `poll` of a finished process sanitizes more than
/// this again (about 20 ms).
pub const REPLAY_MAX_BYTES: u64 = 16 << 20;
/// Most notes a shelved record carries; moat adds one or two per process (a cancellation,
/// the disk bound), so more means something unusual: the views then stay.
const MAX_NOTES: usize = 8;

/// A point of the log and how many lines the output had before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineMark {
    /// Raw byte offset in the log.
    pub offset: u64,
    /// Newlines emitted before `offset`; `None` when moat attached to a log whose beginning
    /// was already freed, so the count of earlier lines is unknown.
    pub lines_before: Option<u64>,
    /// Whether `offset` starts a line (else the line it sits in began before it).
    pub at_line_start: bool,
}

/// Where a process's views are.
enum Held {
    /// In memory: a running process's, and a finished one's that cannot or need not be shelved.
    Live(Views),
    /// Put away once the process ended; its log gives them back (`shelf`).
    Shelved(Shelved),
}

pub struct OutputState {
    sanitizer: Sanitizer,
    /// Replaces secret values; streaming, so a value split across reads is still caught.
    redactor: Redactor,
    /// `aggregated` (the whole run, capped to `max_chars`, head 10 % + tail) and `pending`
    /// (produced since the last poll), or their counts once shelved.
    views: Held,
    max_chars: usize,
    /// Bytes of the log consumed so far (the next read starts here).
    pub bytes_read: u64,
    /// `bytes_read` at the last drain, persisted so a restart does not repeat polled output.
    pub drained_at: u64,
    /// Reused buffers: the hot path allocates nothing per chunk.
    clean: String,
    redacted: String,
    /// Newlines the pipeline emitted so far, so `process log` numbers lines of the whole
    /// output; `None` when counting began after freed bytes.
    lines: Option<u64>,
    /// Whether the last emitted character ended a line.
    at_line_start: bool,
    /// Sparse marks (offset, lines before it), so the line number where the kept record
    /// starts is known once spill frees older bytes.
    marks: VecDeque<LineMark>,
    /// Current spacing of `marks` (doubles when thinned).
    spacing: u64,
    /// Where the record kept on disk starts, once older bytes were freed.
    pub record_start: Option<LineMark>,
    /// `exec.spill_max_bytes`, to say how much the record keeps.
    pub spill_max: u64,
    /// moat's own remarks and where they went, for a replay of shelved views.
    notes: Vec<Note>,
    /// Log data fed so far (holes not counted): what a replay would read again.
    data_bytes: u64,
    /// `finish` ran: the text is complete, and the views may be shelved.
    finished: bool,
}

impl OutputState {
    pub fn new(max_chars: usize, secrets: Vec<(String, String)>) -> Self {
        Self {
            sanitizer: Sanitizer::new(),
            redactor: Redactor::new(secrets),
            views: Held::Live(Views::new(max_chars)),
            max_chars,
            bytes_read: 0,
            drained_at: 0,
            clean: String::new(),
            redacted: String::new(),
            lines: Some(0),
            at_line_start: true,
            marks: VecDeque::new(),
            spacing: MARK_SPACING,
            record_start: None,
            spill_max: 0,
            notes: Vec::new(),
            data_bytes: 0,
            finished: false,
        }
    }

    /// Starts counting at `offset` of a log whose earlier bytes are gone (a re-attach after
    /// spill freed them): line numbers before it are unknown.
    pub fn start_after_freed(&mut self, offset: u64) {
        self.bytes_read = offset;
        self.lines = None;
        self.at_line_start = false;
        self.record_start = Some(LineMark {
            offset,
            lines_before: None,
            at_line_start: false,
        });
    }

    /// Starts counting at a record start moat recorded earlier (a re-attach after spill freed
    /// the bytes before it), so lines keep their numbers of the whole output.
    pub fn start_at(&mut self, mark: LineMark) {
        self.bytes_read = mark.offset;
        self.lines = mark.lines_before;
        self.at_line_start = mark.at_line_start;
        self.record_start = Some(mark);
    }

    /// Records that the bytes before `freed_to` were freed: the record now starts at the first
    /// mark at or after it (or at the read position), and older marks are dropped.
    pub fn freed_to(&mut self, freed_to: u64) {
        while self.marks.front().is_some_and(|m| m.offset < freed_to) {
            self.marks.pop_front();
        }
        let start = self.marks.front().copied().unwrap_or(self.mark());
        if start.offset >= freed_to {
            self.record_start = Some(start);
        }
    }

    /// The current read position as a mark.
    fn mark(&self) -> LineMark {
        LineMark {
            offset: self.bytes_read,
            lines_before: self.lines,
            at_line_start: self.at_line_start,
        }
    }

    /// The secrets' redactor with a fresh stream, for re-reading the log.
    pub fn fresh_redactor(&self) -> Redactor {
        self.redactor.fresh()
    }

    pub fn max_chars(&self) -> usize {
        self.max_chars
    }

    /// Feeds raw bytes. `to_pending` is false when replaying output a poll already returned.
    pub fn ingest(&mut self, bytes: &[u8], to_pending: bool) {
        for slice in bytes.chunks(SLICE) {
            self.ingest_slice(slice, to_pending);
        }
    }

    fn ingest_slice(&mut self, bytes: &[u8], to_pending: bool) {
        self.bytes_read += bytes.len() as u64;
        self.data_bytes += bytes.len() as u64;
        self.clean.clear();
        self.sanitizer.push(bytes, &mut self.clean);
        self.emit(to_pending);
        let last = self.marks.back().map_or(0, |m| m.offset);
        if self.bytes_read >= last + self.spacing {
            self.marks.push_back(self.mark());
            if self.marks.len() > MAX_MARKS {
                let kept: VecDeque<LineMark> = self.marks.iter().copied().step_by(2).collect();
                self.marks = kept;
                self.spacing *= 2;
            }
        }
    }

    /// Jumps a hole in the log (`process::holes`): it holds no data, and read it would be
    /// NULs the sanitizer drops, so nothing is emitted and lines keep their numbers.
    /// The hole counts as output for the record's bound (it is part of the log's length), so
    /// a mark is set at its end: once spill passes the hole, the record starts there, at a
    /// known line, instead of inside it.
    pub fn skip_hole_to(&mut self, offset: u64) {
        if offset > self.bytes_read {
            self.bytes_read = offset;
            self.marks.push_back(self.mark());
        }
    }

    /// Adds moat's own remark to the output (it is not part of the log, so the read offset
    /// does not move). It is kept apart too, so a replay of shelved views puts it back.
    pub fn note(&mut self, text: &str) {
        let at = self.counts().total;
        self.notes.push(Note {
            at,
            text: text.to_string(),
        });
        let n = text.chars().count() as u64;
        match &mut self.views {
            Held::Live(v) => {
                v.aggregated.push_str(text);
                if let Some(p) = &mut v.pending {
                    p.push_str(text);
                }
            }
            Held::Shelved(s) => {
                s.counts.total += n;
                s.counts.pending = s.counts.pending.map(|p| p + n);
            }
        }
    }

    /// Flushes partial sequences at the end of the run.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.clean.clear();
        self.sanitizer.finish(&mut self.clean);
        self.emit(true);
        self.redacted.clear();
        self.redactor.finish(&mut self.redacted);
        if let Held::Live(v) = &mut self.views {
            v.push(&self.redacted, true);
        }
        self.finished = true;
    }

    /// Puts away what a finished process's record no longer needs: the reused buffers and
    /// the line marks always (nothing is read or freed any more); the views too when `log`
    /// can give them back (they are bigger than [`SHELVE_ABOVE`], the log still holds the
    /// whole output, at most [`REPLAY_MAX_BYTES`] of it), else they are compacted. A running
    /// process's state is left alone.
    pub fn shelve(&mut self, log: Option<&Arc<File>>) {
        if !self.finished {
            return;
        }
        self.clean = String::new();
        self.redacted = String::new();
        self.marks = VecDeque::new();
        let replayable = self.record_start.is_none()
            && self.data_bytes <= REPLAY_MAX_BYTES
            && self.notes.len() <= MAX_NOTES;
        let Held::Live(views) = &mut self.views else {
            return;
        };
        match log {
            Some(log) if replayable && views.held_bytes() > SHELVE_ABOVE => {
                self.views = Held::Shelved(Shelved {
                    counts: views.counts(),
                    log: log.clone(),
                });
            }
            _ => views.compact(),
        }
    }

    /// Whether the views are shelved: read them through `Proc::with_output`.
    pub fn is_shelved(&self) -> bool {
        matches!(self.views, Held::Shelved(_))
    }

    /// What gives shelved views back, to run without the process's lock; `None` when they
    /// are in memory.
    pub fn replay(&self) -> Option<Replay> {
        let Held::Shelved(s) = &self.views else {
            return None;
        };
        Some(Replay {
            log: s.log.clone(),
            end: self.bytes_read,
            redactor: self.redactor.fresh(),
            max_chars: self.max_chars,
            counts: s.counts,
            notes: self.notes.clone(),
        })
    }

    /// Takes back replayed views, unless another caller did first.
    pub fn unshelve(&mut self, views: Views) {
        if self.is_shelved() {
            self.views = Held::Live(views);
        }
    }

    /// Heap bytes this state holds for its text: what a process's record costs beyond its
    /// fixed fields.
    pub fn held_bytes(&self) -> usize {
        let views = match &self.views {
            Held::Live(v) => v.held_bytes(),
            Held::Shelved(_) => 0,
        };
        views
            + self.clean.capacity()
            + self.redacted.capacity()
            + self.redactor.held_bytes()
            + self.marks.capacity() * std::mem::size_of::<LineMark>()
            + self.notes.iter().map(|n| n.text.capacity()).sum::<usize>()
    }

    /// The views in memory; `None` once shelved (for a reader that did not come through
    /// `Proc::with_output`, which reads as empty).
    fn views(&self) -> Option<&Views> {
        debug_assert!(
            !self.is_shelved(),
            "shelved output read without with_output"
        );
        match &self.views {
            Held::Live(v) => Some(v),
            Held::Shelved(_) => None,
        }
    }

    fn counts(&self) -> Counts {
        match &self.views {
            Held::Live(v) => v.counts(),
            Held::Shelved(s) => s.counts,
        }
    }

    fn emit(&mut self, to_pending: bool) {
        let text = if self.redactor.is_empty() {
            &self.clean
        } else {
            self.redacted.clear();
            self.redactor.push(&self.clean, &mut self.redacted);
            &self.redacted
        };
        if text.is_empty() {
            return;
        }
        let newlines = text.bytes().filter(|b| *b == b'\n').count() as u64;
        self.lines = self.lines.map(|l| l + newlines);
        self.at_line_start = text.ends_with('\n');
        let views = match &mut self.views {
            Held::Live(v) => v,
            // Nothing is fed once shelved (the process ended).
            Held::Shelved(_) => return,
        };
        views.push(text, to_pending);
    }

    /// Takes what was produced since the last drain. Shelved views read as empty (and stay
    /// as they are): every reader of a finished process's text goes through
    /// `Proc::with_output`, which brings them back first.
    pub fn drain(&mut self) -> String {
        debug_assert!(
            !self.is_shelved(),
            "shelved output drained without with_output"
        );
        let Held::Live(views) = &mut self.views else {
            return String::new();
        };
        let taken = views.drain();
        self.drained_at = self.bytes_read;
        taken
    }

    pub fn has_pending(&self) -> bool {
        self.counts().pending_chars() > 0
    }

    pub fn aggregated(&self) -> String {
        self.views()
            .map(|v| v.aggregated.render())
            .unwrap_or_default()
    }

    pub fn truncated(&self) -> bool {
        self.total_chars() > self.max_chars as u64
    }

    pub fn total_chars(&self) -> u64 {
        self.counts().total
    }

    /// The last `n` characters, for `running` results and exit events.
    pub fn tail(&self, n: usize) -> String {
        self.views()
            .map(|v| v.aggregated.last_chars(n))
            .unwrap_or_default()
    }

    /// Redacts a one-off text (an event line) with the same secrets.
    pub fn redact(&self, text: &str) -> String {
        if self.redactor.is_empty() {
            text.to_string()
        } else {
            self.redactor.redact_all(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_returns_only_new_output() {
        let mut o = OutputState::new(1000, vec![]);
        o.ingest(b"one\n", true);
        assert_eq!(o.drain(), "one\n");
        assert_eq!(o.drain(), "");
        o.ingest(b"\x1b[31mtwo\x1b[0m\n", true);
        assert_eq!(o.drain(), "two\n");
        assert_eq!(o.aggregated(), "one\ntwo\n");
        assert_eq!(o.drained_at, o.bytes_read);
    }

    #[test]
    fn replayed_bytes_skip_pending() {
        let mut o = OutputState::new(1000, vec![]);
        o.ingest(b"old\n", false);
        o.ingest(b"new\n", true);
        assert_eq!(o.drain(), "new\n");
        assert_eq!(o.aggregated(), "old\nnew\n");
    }

    #[test]
    fn secrets_split_across_reads_are_redacted() {
        let mut o = OutputState::new(1000, vec![("TOKEN".into(), "s3cr3t-value".into())]);
        o.ingest(b"key=s3cr", true);
        o.ingest(b"3t-value done", true);
        o.finish();
        assert_eq!(o.aggregated(), "key=[REDACTED:TOKEN] done");
    }

    #[test]
    fn marks_count_lines_and_follow_freed_bytes() {
        let mut o = OutputState::new(1000, vec![]);
        let line = [b"x".repeat(99), b"\n".to_vec()].concat();
        for _ in 0..3000 {
            o.ingest(&line, true);
        }
        assert_eq!(o.lines, Some(3000));
        assert_eq!(o.record_start, None);
        // Free everything before byte 200 000: the record starts at the first mark after it,
        // which (100-byte lines) is a line start with 2000+ lines before it.
        o.freed_to(200_000);
        let start = o.record_start.unwrap();
        assert!(start.offset >= 200_000 && start.offset < 200_000 + MARK_SPACING);
        assert_eq!(start.lines_before, Some(start.offset / 100));
        assert!(start.at_line_start);
        // A mid-line mark says so.
        let mut o = OutputState::new(1000, vec![]);
        let text = b"ab\ncd".repeat(30_000);
        o.ingest(&text, true);
        o.freed_to(1);
        let start = o.record_start.unwrap();
        let before = text[..start.offset as usize]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        assert_eq!(start.lines_before, Some(before as u64));
        assert!(!start.at_line_start);
        // A state that began after freed bytes does not know the earlier lines.
        let mut o = OutputState::new(1000, vec![]);
        o.start_after_freed(4096);
        o.ingest(b"a\nb\n", true);
        assert_eq!(o.lines, None);
        assert_eq!(o.record_start.unwrap().lines_before, None);
    }

    #[test]
    fn marks_stay_bounded() {
        let mut o = OutputState::new(1000, vec![]);
        let chunk = vec![b'y'; MARK_SPACING as usize];
        for _ in 0..(MAX_MARKS * 3) {
            o.ingest(&chunk, true);
        }
        assert!(o.marks.len() <= MAX_MARKS);
        assert!(o.spacing > MARK_SPACING);
    }

    /// Shelved views come back from the log exactly as they were: escape sequences and
    /// secrets cut across reads, a drain in the middle, moat's notes, a cap that cut the text.
    #[test]
    fn shelved_views_come_back_exactly() {
        use std::io::Write;
        let secrets = vec![("TOKEN".to_string(), "hunter2hunter2".to_string())];
        let text: Vec<u8> = (0..3_000)
            .flat_map(|i| format!("{i} \x1b[1mbold\x1b[0m hunter2hunter2 \u{e9}\n").into_bytes())
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&text)
            .unwrap();
        let log = Arc::new(File::open(&path).unwrap());
        let mut o = OutputState::new(20_000, secrets);
        // Odd read sizes: sequences, secrets and characters are cut between reads.
        let (mut at, mut n, mut drained) = (0, 0, String::new());
        for size in [7usize, 1021, 33, 4096].iter().cycle() {
            let end = (at + size).min(text.len());
            o.ingest(&text[at..end], true);
            at = end;
            n += 1;
            if n == 40 {
                drained = o.drain();
                o.note("\n[moat] a note\n");
            }
            if at == text.len() {
                break;
            }
        }
        o.note("\n[moat] the last note\n");
        o.finish();
        let (aggregated, counts) = (o.aggregated(), o.counts());
        let pending = o.views().unwrap().pending.as_ref().unwrap().render();
        assert!(!drained.is_empty() && o.truncated());
        assert!(!aggregated.contains("hunter2") && !aggregated.contains('\x1b'));
        o.shelve(Some(&log));
        assert!(o.is_shelved());
        assert_eq!((o.counts(), o.total_chars()), (counts, counts.total));
        let back = o.replay().unwrap().run();
        o.unshelve(back);
        assert_eq!(o.aggregated(), aggregated);
        assert_eq!(o.counts(), counts);
        assert_eq!(o.drain(), pending);
    }

    #[test]
    fn caps_apply() {
        let mut o = OutputState::new(1000, vec![]);
        for _ in 0..100 {
            o.ingest(&[b'x'; 100], true);
        }
        assert!(o.truncated());
        assert_eq!(o.total_chars(), 10_000);
        assert!(o.aggregated().contains("[… 9000 chars truncated …]"));
    }
}
