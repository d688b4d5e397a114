//! `process log`: pages the whole recorded output, read again from the log through the
//! descriptor moat holds (`pread`, never a path), sanitized and redacted like the live output.
//!
//! Memory stays bounded whatever the log holds: the log is streamed in fixed chunks, twice
//! (once to count lines, once to collect the page), and only the page is kept, capped at the
//! process's output cap. The record starts where spill left it (`OutputState::record_start`);
//! see docs/security.md, "Process output record".

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::output::LineMark;
use crate::output::{LineCollector, LineCounter, Redactor, Sanitizer};

/// Bytes read per `pread`.
const CHUNK: usize = 256 << 10;

/// Where one pass over the record starts and how it is read.
pub struct Source<'a> {
    pub log: &'a File,
    /// The start of the record (offset 0 with no lines before, unless spill freed bytes).
    pub start: LineMark,
    /// The log length when the call began: both passes read the same bytes.
    pub end: u64,
    /// The process's secrets, with a fresh stream per pass.
    pub redactor: &'a Redactor,
    /// Whether the process ended: only then is held-back text (a possible secret prefix, an
    /// unfinished character) flushed.
    pub finished: bool,
}

/// One pass over the record; `sink` gets the redacted text. Returns the number of the first
/// line handed to `sink` (1-based; relative to the first kept line when the count before the
/// record is unknown).
pub fn pass(src: &Source<'_>, sink: &mut dyn FnMut(&str)) -> std::io::Result<u64> {
    let mut sanitizer = Sanitizer::new();
    let mut redactor = src.redactor.fresh();
    let mut first = src.start.lines_before.unwrap_or(0) + 1;
    // A record that does not begin at the start of the output begins with a fresh pipeline:
    // drop the rest of the partial line it starts in, and (with secrets) at least the longest
    // secret's length of text first, so the tail of a value whose head was freed never shows.
    let needs_skip = src.start.offset > 0 && (!src.start.at_line_start || redactor.max_len() > 0);
    let mut skip = needs_skip.then(|| Skip {
        min_bytes: redactor.max_len(),
        seen: 0,
        newlines: 0,
    });
    if src.start.lines_before.is_none() {
        first = 1;
    }
    let mut buf = vec![0u8; CHUNK];
    let mut clean = String::new();
    let mut text = String::new();
    let mut offset = src.start.offset;
    while offset < src.end {
        // A hole reads as NULs the sanitizer drops: jumped, not read (`process::holes`).
        match super::holes::next_data(src.log, offset) {
            Some(data) if data >= src.end => break,
            Some(data) => offset = offset.max(data),
            None => break,
        }
        let want = ((src.end - offset) as usize).min(CHUNK);
        let n = match src.log.read_at(&mut buf[..want], offset) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        offset += n as u64;
        clean.clear();
        sanitizer.push(&buf[..n], &mut clean);
        let kept = match &mut skip {
            Some(s) => match s.take(&clean) {
                Some((from, newlines)) => {
                    if src.start.lines_before.is_some() {
                        first += newlines;
                    }
                    skip = None;
                    &clean[from..]
                }
                None => continue,
            },
            None => &clean[..],
        };
        text.clear();
        redactor.push(kept, &mut text);
        sink(&text);
    }
    if src.finished && skip.is_none() {
        clean.clear();
        sanitizer.finish(&mut clean);
        text.clear();
        redactor.push(&clean, &mut text);
        redactor.finish(&mut text);
        sink(&text);
    }
    Ok(first)
}

/// The text dropped at the start of a record that begins mid-stream: at least `min_bytes`,
/// then through the next newline.
struct Skip {
    /// Bytes to drop at least (the longest secret's length).
    min_bytes: usize,
    /// Bytes dropped so far.
    seen: usize,
    /// Newlines dropped so far.
    newlines: u64,
}

impl Skip {
    /// Drops what it must of `clean`; returns where the kept text starts and how many newlines
    /// were dropped in all, or `None` when all of `clean` was dropped.
    fn take(&mut self, clean: &str) -> Option<(usize, u64)> {
        let mut from = 0;
        while let Some(i) = clean[from..].find('\n') {
            self.newlines += 1;
            self.seen += i + 1;
            from += i + 1;
            if self.seen > self.min_bytes {
                return Some((from, self.newlines));
            }
        }
        self.seen += clean.len() - from;
        None
    }
}

/// Everything one page needs: the numbers and the text.
pub struct LogPage {
    /// First line the record holds (1-based).
    pub first: u64,
    /// Last line (0 when the record holds none).
    pub last: u64,
    /// The shown lines `[start, end)`.
    pub start: u64,
    pub end: u64,
    pub text: String,
    /// Whether the page was cut by the output cap.
    pub cut: bool,
    /// Where the cap cut the page inside a line: that line and the character the next page
    /// starts at (`offset`, `charOffset`), so a line longer than a page is read whole.
    pub resume: Option<(u64, u64)>,
}

/// Pages the record: lines `offset..offset+limit` (1-based), or the last `limit` lines; the
/// first of them from character `skip` on.
pub fn page(
    src: &Source<'_>,
    offset: Option<u64>,
    limit: Option<u64>,
    skip: u64,
    budget: usize,
) -> std::io::Result<LogPage> {
    let mut counter = LineCounter::default();
    let first = pass(src, &mut |t| counter.push(t))?;
    let last = first + counter.lines() - 1;
    let (first, last) = if counter.lines() == 0 {
        (first, first - 1)
    } else {
        (first, last)
    };
    let (start, end) = crate::output::line_window(first, last, offset, limit);
    let mut collector = LineCollector::new(first, start, end, budget).skipping(skip);
    if start < end {
        pass(src, &mut |t| collector.push(t))?;
    }
    let resume = collector.resume();
    let (text, cut) = collector.finish();
    Ok(LogPage {
        first,
        last,
        start,
        end,
        text,
        cut,
        resume,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn log_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn src<'a>(log: &'a File, start: LineMark, redactor: &'a Redactor) -> Source<'a> {
        Source {
            log,
            start,
            end: log.metadata().unwrap().len(),
            redactor,
            finished: true,
        }
    }

    const ZERO: LineMark = LineMark {
        offset: 0,
        lines_before: Some(0),
        at_line_start: true,
    };

    #[test]
    fn pages_by_whole_output_line_numbers() {
        let text: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
        let log = log_with(text.as_bytes());
        let r = Redactor::new(vec![]);
        let p = page(&src(&log, ZERO, &r), Some(4222), Some(5), 0, 200_000).unwrap();
        assert_eq!((p.first, p.last, p.start, p.end), (1, 100_000, 4222, 4227));
        assert_eq!(p.text, "4222\n4223\n4224\n4225\n4226");
        let p = page(&src(&log, ZERO, &r), None, Some(2), 0, 200_000).unwrap();
        assert_eq!(p.text, "99999\n100000");
    }

    #[test]
    fn a_cut_record_starts_at_the_next_whole_line() {
        let log = log_with(b"aaa\nbbb\nccc\nddd\n");
        let r = Redactor::new(vec![]);
        // Mid-line of line 2 (offset 5, one line before it): line 3 is the first whole one.
        let mid = LineMark {
            offset: 5,
            lines_before: Some(1),
            at_line_start: false,
        };
        let p = page(&src(&log, mid, &r), None, None, 0, 1000).unwrap();
        assert_eq!((p.first, p.last, p.text.as_str()), (3, 4, "ccc\nddd"));
        // On a line start, nothing is dropped.
        let at = LineMark {
            offset: 4,
            lines_before: Some(1),
            at_line_start: true,
        };
        let p = page(&src(&log, at, &r), None, None, 0, 1000).unwrap();
        assert_eq!((p.first, p.text.as_str()), (2, "bbb\nccc\nddd"));
        // Unknown count before: numbered from the first kept line.
        let unknown = LineMark {
            offset: 4,
            lines_before: None,
            at_line_start: false,
        };
        let p = page(&src(&log, unknown, &r), None, None, 0, 1000).unwrap();
        assert_eq!((p.first, p.text.as_str()), (1, "ccc\nddd"));
    }

    #[test]
    fn the_tail_of_a_freed_secret_never_shows() {
        // The secret's head lies before the record's start; its tail must not appear.
        let log = log_with(b"xx TOPSECRETVALUE yy\nline two TOPSECRETVALUE\nthree\n");
        let r = Redactor::new(vec![("TOKEN".into(), "TOPSECRETVALUE".into())]);
        let cut = LineMark {
            offset: 8,
            lines_before: Some(0),
            at_line_start: false,
        };
        let p = page(&src(&log, cut, &r), None, None, 0, 1000).unwrap();
        assert!(!p.text.contains("VALUE"), "{:?}", p.text);
        assert!(!p.text.contains("SECRET"), "{:?}", p.text);
        // A secret the record holds whole is redacted.
        let p = page(&src(&log, ZERO, &r), None, None, 0, 1000).unwrap();
        assert_eq!(
            p.text,
            "xx [REDACTED:TOKEN] yy\nline two [REDACTED:TOKEN]\nthree"
        );
    }

    /// A line longer than a page is read whole, page after page, each starting where the
    /// last one's note said (docs/mcp.md, `process log`).
    #[test]
    fn a_line_longer_than_a_page_is_read_on_inside_it() {
        let long: String = (0..2500)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let log = log_with(format!("before\n{long}é\nafter\n").as_bytes());
        let r = Redactor::new(vec![]);
        let (mut got, mut at) = (String::new(), 0u64);
        let mut pages = 0;
        loop {
            let p = page(&src(&log, ZERO, &r), Some(2), Some(1), at, 1000).unwrap();
            got.push_str(&p.text);
            pages += 1;
            match p.resume {
                Some((2, next)) => {
                    assert!(p.cut && next > at, "{next}");
                    at = next;
                }
                None => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(pages, 3);
        assert_eq!(got, format!("{long}é"));
        // Past the line's end: an empty page, not another line.
        let p = page(&src(&log, ZERO, &r), Some(2), Some(1), 9999, 1000).unwrap();
        assert_eq!((p.text.as_str(), p.resume), ("", None));
    }

    #[test]
    fn escapes_are_stripped_like_live_output() {
        let log = log_with(b"\x1b[31mred\x1b[0m\n\x1b]0;title\x07ok\n");
        let r = Redactor::new(vec![]);
        let p = page(&src(&log, ZERO, &r), None, None, 0, 1000).unwrap();
        assert_eq!(p.text, "red\nok");
    }
}
