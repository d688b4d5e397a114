//! A process's capped output views, and how a finished one puts them away and gets them back
//! by replaying its log.
//!
//! A finished process's record stays up to `process.ttl_secs` (at most `process.max_finished`
//! per session) so `poll` and `process log` can still read it. Its views are up to
//! `exec.max_output_chars` characters twice over; two hundred of them held a daemon at 330 MiB.
//! The log on disk holds every byte they were made from, so a finished record whose log still
//! holds its whole output keeps only counts (and moat's own notes, which the log does not
//! hold); whoever reads it replays the log through the same sanitizer and redactor, which give
//! the same text whatever the chunking, so the views come back exactly
//! (docs/ARCHITECTURE.md, "Process memory").

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::output::{CappedText, Redactor, Sanitizer};

/// Bytes read per `pread` of a replay.
const CHUNK: usize = 64 << 10;

/// The two capped views of one process's text.
#[derive(Debug, Clone)]
pub struct Views {
    /// The whole run, capped.
    pub aggregated: CappedText,
    /// What the next `poll` drains; `None` while that is all of `aggregated` (nothing was
    /// drained or replayed as already polled yet), so the common case holds one copy.
    pub pending: Option<CappedText>,
    /// The cap of both, for the fresh `pending` a drain leaves.
    max_chars: usize,
}

impl Views {
    pub fn new(max_chars: usize) -> Self {
        Self {
            aggregated: CappedText::new(max_chars),
            pending: None,
            max_chars,
        }
    }

    /// Appends text to the run; to `pending` too unless a poll already returned it.
    pub fn push(&mut self, text: &str, to_pending: bool) {
        self.aggregated.push_str(text);
        match (&mut self.pending, to_pending) {
            (Some(p), true) => p.push_str(text),
            (Some(_), false) | (None, true) => {}
            // From here on `pending` is no longer all of the run.
            (None, false) => self.pending = Some(CappedText::new(self.max_chars)),
        }
    }

    /// Takes what was produced since the last drain.
    pub fn drain(&mut self) -> String {
        let fresh = Some(CappedText::new(self.max_chars));
        match std::mem::replace(&mut self.pending, fresh) {
            Some(p) => p.render(),
            None => self.aggregated.render(),
        }
    }

    pub fn has_pending(&self) -> bool {
        self.counts().pending_chars() > 0
    }

    /// How many characters each view was given.
    pub fn counts(&self) -> Counts {
        Counts {
            total: self.aggregated.total_chars(),
            pending: self.pending.as_ref().map(CappedText::total_chars),
        }
    }

    /// Heap bytes both views hold.
    pub fn held_bytes(&self) -> usize {
        self.aggregated.held_bytes() + self.pending.as_ref().map_or(0, CappedText::held_bytes)
    }

    /// Drops what pushes left over (see [`CappedText::compact`]).
    pub fn compact(&mut self) {
        self.aggregated.compact();
        if let Some(p) = &mut self.pending {
            p.compact();
        }
    }
}

/// What shelved views were given: enough to answer counts without them, and to split a replay
/// into the same two views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Characters of the whole run (notes included).
    pub total: u64,
    /// Characters given to `pending` since the last drain; `None`: all of the run.
    pub pending: Option<u64>,
}

impl Counts {
    pub fn pending_chars(&self) -> u64 {
        self.pending.unwrap_or(self.total)
    }
}

/// moat's own remark in a process's output (a cancellation, the disk bound): it is not in the
/// log, so a replay puts it back where it went.
#[derive(Debug, Clone)]
pub struct Note {
    /// Characters of the run (earlier notes included) before it.
    pub at: u64,
    pub text: String,
}

/// Shelved views: their counts, and the log that gives them back.
pub struct Shelved {
    pub counts: Counts,
    /// The process's log descriptor (`ProcState::log`), read with `pread`.
    pub log: Arc<File>,
}

/// One replay of shelved views, taken under the process's lock and run without it.
pub struct Replay {
    pub log: Arc<File>,
    /// Where the output ended when the process did: bytes the sandbox wrote after are not
    /// part of the run.
    pub end: u64,
    /// The process's secrets, with a fresh stream.
    pub redactor: Redactor,
    pub max_chars: usize,
    pub counts: Counts,
    pub notes: Vec<Note>,
}

impl Replay {
    /// The views again: the log from its start through the sanitizer and the redactor, the
    /// notes put back, the text split into `pending` where the last drain left it. A log read
    /// that fails ends the text there.
    pub fn run(self) -> Views {
        let mut out = Splice {
            views: Views::new(self.max_chars),
            at: 0,
            notes: self.notes.into_iter().peekable(),
            pending_from: self
                .counts
                .pending
                .map(|p| self.counts.total.saturating_sub(p)),
        };
        if out.pending_from.is_some() {
            out.views.pending = Some(CappedText::new(self.max_chars));
        }
        let mut sanitizer = Sanitizer::new();
        let mut redactor = self.redactor;
        let (mut clean, mut redacted) = (String::new(), String::new());
        let mut buf = vec![0u8; CHUNK];
        let mut offset = 0u64;
        while offset < self.end {
            // Holes are jumped, as the supervisor jumped them (`process::holes`).
            match super::holes::next_data(&self.log, offset) {
                Some(data) if data < self.end => offset = offset.max(data),
                _ => break,
            }
            let want = (self.end - offset).min(CHUNK as u64) as usize;
            let n = match self.log.read_at(&mut buf[..want], offset) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            offset += n as u64;
            clean.clear();
            sanitizer.push(&buf[..n], &mut clean);
            out.text(redact(&mut redactor, &clean, &mut redacted));
        }
        clean.clear();
        sanitizer.finish(&mut clean);
        out.text(redact(&mut redactor, &clean, &mut redacted));
        redacted.clear();
        redactor.finish(&mut redacted);
        out.text(&redacted);
        out.finish()
    }
}

/// `text` redacted, as `OutputState::emit` does it.
fn redact<'a>(redactor: &mut Redactor, text: &'a str, out: &'a mut String) -> &'a str {
    if redactor.is_empty() {
        return text;
    }
    out.clear();
    redactor.push(text, out);
    out
}

/// Writes replayed text into views, with the notes put back and `pending` split off.
struct Splice {
    views: Views,
    /// Characters of the run written so far, notes included.
    at: u64,
    notes: std::iter::Peekable<std::vec::IntoIter<Note>>,
    /// Where `pending` starts in the run; `None`: it is all of the run.
    pending_from: Option<u64>,
}

impl Splice {
    fn text(&mut self, mut text: &str) {
        while !text.is_empty() {
            let len = text.chars().count() as u64;
            // The next boundary inside this text: a note's place, or where pending starts.
            let note = self
                .notes
                .peek()
                .map(|n| n.at)
                .filter(|a| *a < self.at + len);
            let split = self
                .pending_from
                .filter(|p| *p > self.at && *p < self.at + len);
            let cut = match (note, split) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(c) => c,
                    None => {
                        self.put(text);
                        return;
                    }
                },
            };
            let (head, rest) = text.split_at(char_offset(text, (cut - self.at) as usize));
            self.put(head);
            self.notes_due();
            text = rest;
        }
        self.notes_due();
    }

    /// Puts the notes whose place has come.
    fn notes_due(&mut self) {
        while let Some(note) = self.notes.next_if(|n| n.at <= self.at) {
            self.put(&note.text);
        }
    }

    fn put(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let to_pending = self.pending_from.is_none_or(|p| self.at >= p);
        match &mut self.views.pending {
            Some(p) if to_pending => p.push_str(text),
            _ => {}
        }
        self.views.aggregated.push_str(text);
        self.at += text.chars().count() as u64;
    }

    fn finish(mut self) -> Views {
        // Notes past the end of the replayed text (a log cut short since) still show.
        for note in self.notes.by_ref().collect::<Vec<_>>() {
            self.put(&note.text);
        }
        self.views
    }
}

/// Byte offset of the `k`-th char of `s` (`s.len()` past the end).
fn char_offset(s: &str, k: usize) -> usize {
    s.char_indices().nth(k).map_or(s.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_is_one_copy_until_a_drain() {
        let mut v = Views::new(1000);
        v.push("one\n", true);
        assert!(v.pending.is_none());
        assert!(v.has_pending());
        assert_eq!(v.drain(), "one\n");
        assert!(!v.has_pending());
        v.push("two\n", true);
        assert_eq!(v.drain(), "two\n");
        // Replayed text a poll already returned makes pending its own view.
        let mut v = Views::new(1000);
        v.push("old\n", false);
        v.push("new\n", true);
        assert_eq!(
            v.counts(),
            Counts {
                total: 8,
                pending: Some(4)
            }
        );
        assert_eq!(v.drain(), "new\n");
    }

    /// Replayed text with notes and a drain point comes back as the live views were.
    #[test]
    fn a_splice_puts_notes_and_the_drain_back() {
        let mut live = Views::new(1000);
        let mut notes = Vec::new();
        live.push("abc", true);
        notes.push(Note {
            at: live.counts().total,
            text: "[n1]".into(),
        });
        live.aggregated.push_str("[n1]");
        live.push("de", true);
        live.drain();
        live.push("fgh", true);
        notes.push(Note {
            at: live.counts().total,
            text: "[n2]".into(),
        });
        live.aggregated.push_str("[n2]");
        if let Some(p) = &mut live.pending {
            p.push_str("[n2]");
        }
        let mut s = Splice {
            views: Views::new(1000),
            at: 0,
            notes: notes.into_iter().peekable(),
            pending_from: live.counts().pending.map(|p| live.counts().total - p),
        };
        s.views.pending = Some(CappedText::new(1000));
        // Chunked unlike the live run.
        for piece in ["a", "bcdef", "g", "h"] {
            s.text(piece);
        }
        let back = s.finish();
        assert_eq!(back.aggregated.render(), live.aggregated.render());
        assert_eq!(back.counts(), live.counts());
        assert_eq!(
            back.pending.unwrap().render(),
            live.pending.unwrap().render()
        );
    }
}
